package server

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/patrdb/patrdb/store"
)

// operations is what the handler keeps for the people who run it: the
// registered routes (for the OpenAPI check), Prometheus metrics and the
// access log.
type operations struct {
	patterns []string
	prom     *promMetrics
	logMu    sync.Mutex // one line at a time, whatever the writer
	log      io.Writer
	clock    func() time.Time
}

func newOperations(db *store.DB, opts Options) *operations {
	return &operations{prom: newPromMetrics(db), log: opts.AccessLog, clock: opts.Clock}
}

// ServeHTTP answers the request and then counts it (by route and status)
// and, with Options.AccessLog, writes its line.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := s.ops.clock()
	rec := &recorder{ResponseWriter: w}
	s.serveHTTP(rec, r)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	d := s.ops.clock().Sub(start)
	s.ops.prom.observe(r.Pattern, rec.status, d)
	if s.ops.log != nil {
		s.ops.writeLog(r, rec, start, d)
	}
}

// writeLog writes the Common Log Format line with the time taken in
// seconds appended: host - user [time] "request" status bytes seconds.
func (o *operations) writeLog(r *http.Request, rec *recorder, start time.Time, d time.Duration) {
	host := r.RemoteAddr
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	line := fmt.Sprintf("%s - - [%s] %q %d %d %.6f\n", host, start.UTC().Format("02/Jan/2006:15:04:05 -0700"),
		r.Method+" "+r.URL.RequestURI()+" "+r.Proto, rec.status, rec.bytes, d.Seconds())
	o.logMu.Lock()
	_, _ = io.WriteString(o.log, line)
	o.logMu.Unlock()
}

// recorder notes the status and body size a handler wrote.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection's writer
// (flushing a streamed batch, deadlines).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
