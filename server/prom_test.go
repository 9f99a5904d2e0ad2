package server

import (
	"bufio"
	"bytes"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// metricValue finds one sample's value in a Prometheus text exposition.
func metricValue(t *testing.T, body, name string, labels ...string) (float64, bool) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != '{' && line[len(name)] != ' ') {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		return v, true
	}
	return 0, false
}

// /metrics counts requests by route and code, times them, and reports the
// store's figures; it needs the token when the API does.
func TestMetrics(t *testing.T) {
	token := "0123456789abcdef0123"
	e := newEnv(t, Options{Token: token})
	e.post("/api/v1/runs", `{"client_key":"k1","id":"m1"}`, 201, nil)
	e.post("/api/v1/runs", `{"client_key":"k2","id":"m2"}`, 201, nil)
	for range 3 {
		e.get("/api/v1/runs", &struct{}{})
	}
	e.call(http.MethodGet, "/api/v1/runs/nope", nil)

	st, hdr, body := e.call(http.MethodGet, "/metrics", nil)
	if st != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") {
		t.Fatalf("/metrics: %d %s\n%s", st, hdr.Get("Content-Type"), body)
	}
	text := string(body)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"patrdb_http_requests_total", []string{`route="GET /api/v1/runs"`, `code="200"`}, 3},
		{"patrdb_http_requests_total", []string{`route="POST /api/v1/runs"`, `code="201"`}, 2},
		{"patrdb_http_requests_total", []string{`route="GET /api/v1/runs/{run}"`, `code="404"`}, 1},
		{"patrdb_http_request_duration_seconds_count", []string{`route="GET /api/v1/runs"`}, 3},
		{"patrdb_store_runs", nil, 2},
		{"patrdb_run_last_step", []string{`run="m1"`}, 0},
	} {
		got, ok := metricValue(t, text, c.name, c.labels...)
		if !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	if v, ok := metricValue(t, text, "patrdb_run_events", `run="m1"`); !ok || v < 1 {
		t.Errorf("patrdb_run_events{run=m1} = %v, %v", v, ok)
	}
	if v, ok := metricValue(t, text, "patrdb_store_file_bytes"); !ok || v <= 0 {
		t.Errorf("patrdb_store_file_bytes = %v, %v", v, ok)
	}
	if _, ok := metricValue(t, text, "go_goroutines"); !ok {
		t.Error("no Go runtime metrics")
	}

	e.c.Token = ""
	if st, _, _ := e.call(http.MethodGet, "/metrics", nil); st != http.StatusUnauthorized {
		t.Errorf("/metrics without the token: %d", st)
	}
	e.c.Token = token
	_, _, body = e.call(http.MethodGet, "/metrics", nil)
	if v, _ := metricValue(t, string(body), "patrdb_http_requests_total", `route="none"`, `code="401"`); v != 1 {
		t.Errorf("the refused request counted %v times under route none", v)
	}
}

// syncBuffer is a bytes.Buffer safe for the handler's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The access log has one whole line per request, concurrent ones included,
// with method, path, status and size.
func TestAccessLog(t *testing.T) {
	var log syncBuffer
	at := time.Date(2026, 12, 1, 17, 30, 0, 0, time.UTC)
	e := newEnv(t, Options{AccessLog: &log, Clock: func() time.Time { return at }})
	e.post("/api/v1/runs", `{"client_key":"k1","id":"a1"}`, 201, nil)
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(e.srv.URL + "/api/v1/runs/a1?x=1")
			if err == nil {
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	e.call(http.MethodGet, "/api/v1/nope", nil)
	lines := strings.Split(strings.TrimSuffix(log.String(), "\n"), "\n")
	if len(lines) != 22 {
		t.Fatalf("%d lines for 22 requests:\n%s", len(lines), log.String())
	}
	re := regexp.MustCompile(`^127\.0\.0\.1 - - \[01/Dec/2026:17:30:00 \+0000\] "(GET|POST) (\S+) HTTP/1\.1" (\d{3}) (\d+) 0\.000000$`)
	counts := map[string]int{}
	for _, l := range lines {
		m := re.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("line %q is not a Common Log Format line", l)
		}
		if n, _ := strconv.Atoi(m[4]); n == 0 {
			t.Errorf("line %q: no body size", l)
		}
		counts[m[1]+" "+m[2]+" "+m[3]]++
	}
	if counts["POST /api/v1/runs 201"] != 1 || counts["GET /api/v1/runs/a1?x=1 200"] != 20 || counts["GET /api/v1/nope 404"] != 1 {
		t.Errorf("lines by request: %v", counts)
	}
}
