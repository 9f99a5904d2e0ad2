package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"runtime/debug"
	"strings"

	"github.com/patrdb/patrdb/store"
)

// server is the state behind one Handler.
type server struct {
	db     *store.DB
	opts   Options
	batch  batcher
	coords coordinators
	mux    *http.ServeMux
	routed http.Handler      // mux behind the gzip wrapper (gzip.go)
	token  [sha256.Size]byte // sha256 of Options.Token, compared in constant time
	ops    *operations       // routes, metrics, access log
	steps  stepFollowers     // per-step figures kept up to date per run
	soundness
}

// Handler returns the HTTP API and web viewer over db (see the package
// documentation for the endpoints). A Go trainer mounts it to serve its own
// live store in-process; `patrdb serve` mounts it over a file it opens.
// Writes through the handler and the caller's own writes may interleave:
// every request is its own transaction.
//
// Options that fail Validate give a handler that answers every request with
// 500 and the reason; use NewHandler to get the error instead.
func Handler(db *store.DB, opts Options) http.Handler {
	h, err := NewHandler(db, opts)
	if err != nil {
		msg := errorJSON(http.StatusInternalServerError, "misconfigured", err.Error())
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			writeRaw(w, http.StatusInternalServerError, msg)
		})
	}
	return h
}

// NewHandler is Handler that reports invalid options.
func NewHandler(db *store.DB, opts Options) (http.Handler, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil store", ErrInvalidOptions)
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &server{db: db, opts: opts.withDefaults(), batch: newBatcher()}
	if s.opts.Token != "" {
		s.token = sha256.Sum256([]byte(s.opts.Token))
	}
	s.mux = http.NewServeMux()
	s.ops = newOperations(db, s.opts)
	s.routes()
	s.routed = withGzip(s.mux)
	return s, nil
}

// apiFunc is an endpoint: it writes its answer, or returns an error that
// ServeHTTP turns into a one-line JSON error.
type apiFunc func(w http.ResponseWriter, r *http.Request) error

func (s *server) handle(pattern string, f apiFunc) { s.handleWith(pattern, f, true) }

// handleChecked is handle for an endpoint that reads its run through
// viewChecked or viewParts, or checks what it reads itself (summarize),
// so it skips the run's whole-run check.
func (s *server) handleChecked(pattern string, f apiFunc) { s.handleWith(pattern, f, false) }

func (s *server) handleWith(pattern string, f apiFunc, wholeRun bool) {
	s.ops.patterns = append(s.ops.patterns, pattern)
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		err := s.soundRequest(r, wholeRun)
		if err == nil {
			err = f(w, r)
		}
		if err != nil {
			s.fail(w, r, err)
		}
	})
}

func (s *server) routes() {
	const p = "/api/v1"
	s.handle("GET "+p+"/{$}", s.index)
	s.handle("GET "+p+"/openapi.json", s.openAPI)
	s.handle("GET /metrics", s.metrics)
	// Reads.
	s.handle("GET "+p+"/health", s.health)
	s.handle("GET "+p+"/stats", s.stats)
	s.handle("GET "+p+"/runs", s.listRuns)
	s.handleChecked("GET "+p+"/runs/{run}", s.getRun)
	s.handleChecked("GET "+p+"/runs/{run}/steps", s.stepMetrics)
	s.handle("GET "+p+"/runs/{run}/stats", s.runStatistics)
	s.handleChecked("GET "+p+"/runs/{run}/steps/{step}/groups", s.stepGroups)
	s.handle("GET "+p+"/runs/{run}/steps/{step}/status", s.stepStatus)
	s.handle("GET "+p+"/runs/{run}/steps/{step}/pending", s.pending)
	s.handleChecked("GET "+p+"/runs/{run}/steps/{step}/batch", s.trainBatch)
	s.handle("GET "+p+"/runs/{run}/groups", s.listGroups)
	s.handleChecked("GET "+p+"/runs/{run}/groups/{group}", s.getGroup)
	s.handleChecked("GET "+p+"/runs/{run}/nodes/{node}", s.getNode)
	s.handleChecked("GET "+p+"/runs/{run}/nodes/{node}/trajectory", s.getTrajectory)
	s.handle("GET "+p+"/runs/{run}/frontier", s.getFrontier)
	s.handle("GET "+p+"/runs/{run}/rubrics", s.getRubrics)
	s.handle("GET "+p+"/runs/{run}/rubrics/active", s.getActiveRubrics)
	s.handle("GET "+p+"/runs/{run}/advantages", s.getAdvantages)
	s.handle("GET "+p+"/runs/{run}/events", s.getEvents)
	s.handle("GET "+p+"/runs/{run}/checkpoint", s.getCheckpoint)
	s.handle("GET "+p+"/runs/{run}/scalars", s.getScalars)
	s.handleChecked("GET "+p+"/backup", s.backup) // a copy of the pages, checked by whoever opens it
	s.viewerRoutes(p)
	// Writes.
	s.handle("POST "+p+"/runs", s.createRun)
	s.handle("POST "+p+"/runs/{run}/status", s.setRunStatus)
	s.handle("POST "+p+"/runs/{run}/checkpoints", s.putCheckpoint)
	s.handle("POST "+p+"/runs/{run}/scalars", s.putScalars)
	s.handle("POST "+p+"/runs/{run}/steps", s.openStep)
	s.handle("POST "+p+"/runs/{run}/leases", s.lease)                 // hands out work, writes nothing
	s.handle("POST "+p+"/runs/{run}/leases/renew", s.renewLeases)     // a heartbeat, writes nothing
	s.handle("POST "+p+"/runs/{run}/leases/release", s.releaseLeases) // writes nothing
	s.handle("POST "+p+"/runs/{run}/version", s.publishVersion)
	s.handle("POST "+p+"/runs/{run}/rewards", s.announced(s.submitRewards))
	s.handle("POST "+p+"/runs/{run}/scores", s.announced(s.submitScores))
	s.handle("POST "+p+"/runs/{run}/submit", s.announced(s.submitWork))
	s.handle("POST "+p+"/runs/{run}/groups/{group}/close", s.closeGroup)
	s.handle("POST "+p+"/runs/{run}/steps/{step}/abandon", s.abandonStep)
	s.handle("POST "+p+"/runs/{run}/rubrics/activate", s.activate)
	s.handle("POST "+p+"/runs/{run}/groups/{group}/shape", s.shapeGroup) // computes, writes nothing
	// Anything else under the API is a JSON 404 or 405, never the mux's
	// plain-text page.
	s.handle("/api/", s.noRoute)
	// The viewer.
	s.mux.Handle("GET /{$}", viewerHandler())
	s.mux.Handle("GET /static/", viewerHandler())
}

// serveHTTP applies, in order: panic recovery, the Host check, the bearer
// token, then the route.
func (s *server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	// bbolt reads through an mmap: a fault there is a panic, recovered
	// below, not the end of the process.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.opts.Logger.Error("server: panic in handler", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			// If the handler had already written, this is appended to a
			// broken response; the client sees a truncated body, not a
			// stack trace.
			writeRaw(w, http.StatusInternalServerError, errorJSON(500, "internal", "internal error (logged by the server)"))
		}
	}()
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	if s.opts.Token == "" && !s.opts.AllowAnyHost && !loopbackHost(r.Host) {
		writeRaw(w, http.StatusForbidden, errorJSON(403, "forbidden_host",
			fmt.Sprintf("Host %q is not a loopback name; this server answers only on loopback (serve with a token to allow other hosts)", r.Host)))
		return
	}
	if s.opts.Token != "" && (strings.HasPrefix(r.URL.Path, "/api/") || r.URL.Path == "/metrics") && r.URL.Path != "/api/v1/health" && !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="patrdb"`)
		writeRaw(w, http.StatusUnauthorized, errorJSON(401, "unauthorized", "missing or wrong bearer token (Authorization: Bearer <token>)"))
		return
	}
	s.routed.ServeHTTP(w, r)
}

// authorized compares the request's bearer token with the server's in
// constant time; hashing both first hides the token's length too.
func (s *server) authorized(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(h[len(prefix):])))
	return subtle.ConstantTimeCompare(got[:], s.token[:]) == 1
}

// fail answers err as one line of JSON with the status classify gives it.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, code := classify(err)
	msg := err.Error()
	if status >= 500 {
		s.opts.Logger.Error("server: request failed", "method", r.Method, "path", r.URL.Path, "err", msg)
	} else {
		s.opts.Logger.Debug("server: request refused", "method", r.Method, "path", r.URL.Path, "status", status, "err", msg)
	}
	if code == "checking" {
		w.Header().Set("Retry-After", "2")
	}
	writeRaw(w, status, errorJSON(status, code, msg))
}

// noRoute tells a wrong method (405, with Allow) from an unknown path (404).
func (s *server) noRoute(w http.ResponseWriter, r *http.Request) error {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pat := s.mux.Handler(probe); pat != "" && pat != "/api/" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		return withStatus(http.StatusMethodNotAllowed, "method_not_allowed",
			fmt.Errorf("%s %s: method not allowed (allowed: %s)", r.Method, r.URL.Path, strings.Join(allow, ", ")))
	}
	return withStatus(http.StatusNotFound, "no_route", fmt.Errorf("%s %s: no such endpoint (see /api/v1/)", r.Method, r.URL.Path))
}
