package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/patrdb/patrdb/lake"
	"github.com/patrdb/patrdb/server"
	"github.com/patrdb/patrdb/store"
)

// serveFlags are the flags of `patrdb serve`.
type serveFlags struct {
	addr      string
	tokenFile string
	readOnly  bool
	accessLog string
	lake      string
	keepSteps uint64
}

func newServeCommand(app *App) *cobra.Command {
	f := &serveFlags{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the file over HTTP: the JSON API (/api/v1/) and the web viewer (/)",
		Long: `serve opens the file for writing (it becomes the file's owner) and serves
the JSON API under /api/v1/ for trainers in other languages, live
inspection and the CLI's --server mode, and the web viewer at /.

It listens on a loopback address unless told otherwise; any other address
needs --token-file (a file of mode 600 holding a bearer token of at least 16
bytes) and every API request must then carry "Authorization: Bearer TOKEN"
(open the viewer as http://HOST:PORT/#token=TOKEN).

While it serves, it writes its address to <db>.serve next to the file, so
other patrdb commands that find the file locked talk to it instead; the
file is removed when serve stops on SIGINT or SIGTERM. When it cannot
write it (a full disk), it serves anyway and says so on stderr: readers
then need --server URL, and on a full disk writes fail (507) until space
is freed. The first line on stdout is "serving PATH at URL" (with --json,
one JSON object).

GET /api/v1/ lists the endpoints and the API version, /api/v1/openapi.json
is their OpenAPI document, and /metrics has Prometheus metrics (requests
by route and status, latencies, store figures). --access-log FILE appends
one Common Log Format line per request to FILE ("-": stderr).

--lake URL (a folder or s3://bucket/prefix, see patrdb export) exports every
run of the file into that Parquet lake as it grows: each step as soon as the
run has checkpointed it, with its part of the event log, while workers go on
writing; a run marked finished or failed whole. serve holds each run in the
lake while it runs: another exporter of it is refused. --keep-steps N then
drops from the file each step the lake holds once it is older than the run's
last N checkpointed steps, so the file stops growing (patrdb retain); patrdb
restore rebuilds the run from the lake.`,
		Args: needArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error { return app.serve(cmd.Context(), f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", server.DefaultAddr, "listen address host:port (port 0 picks a free one)")
	fl.StringVar(&f.tokenFile, "token-file", "", "file holding the bearer token; required for a non-loopback --addr")
	fl.BoolVar(&f.readOnly, "read-only", false, "open the file read-only and refuse every write endpoint")
	fl.StringVar(&f.accessLog, "access-log", "", "append one line per request to `FILE` (\"-\": stderr)")
	fl.StringVar(&f.lake, "lake", "", "export every run into this Parquet lake (a folder or s3://bucket/prefix) as it is checkpointed")
	fl.Uint64Var(&f.keepSteps, "keep-steps", 0, "with --lake: drop from the file the steps the lake holds, keeping the last `N` checkpointed ones")
	return cmd
}

// serveStarted is the --json line serve prints once it listens.
type serveStarted struct {
	Path     string `json:"path"`
	URL      string `json:"url"`
	ReadOnly bool   `json:"read_only"`
	Token    bool   `json:"token"` // whether requests need the bearer token
	// Lake is the lake the runs are exported into ("" for none), with the
	// steps kept in the file (0: all).
	Lake      string `json:"lake,omitempty"`
	KeepSteps uint64 `json:"keep_steps,omitempty"`
}

func (a *App) serve(ctx context.Context, f *serveFlags) error {
	token := ""
	if f.tokenFile != "" {
		var err error
		if token, err = server.LoadToken(f.tokenFile); err != nil {
			return usageErrorf("--token-file: %v", err)
		}
	}
	if err := server.CheckBind(f.addr, token); err != nil {
		return usageErrorf("--addr %s: %v", f.addr, err)
	}
	switch {
	case f.keepSteps > 0 && f.lake == "":
		return usageErrorf("--keep-steps needs --lake: only steps the lake holds are dropped")
	case f.keepSteps > 0 && f.readOnly:
		return usageErrorf("--keep-steps drops steps from the file: it cannot with --read-only")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	var db *store.DB
	var err error
	if f.readOnly {
		db, err = a.openRead()
	} else {
		db, err = a.openWrite()
	}
	if err != nil {
		return err
	}
	defer db.Close()

	log := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts := server.Options{Token: token, ReadOnly: f.readOnly, Logger: log}
	switch f.accessLog {
	case "":
	case "-":
		opts.AccessLog = a.stderr
	default:
		lf, err := os.OpenFile(f.accessLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return usageErrorf("--access-log: %v", err)
		}
		defer lf.Close()
		opts.AccessLog = lf
	}
	h, err := server.NewHandler(db, opts)
	if err != nil {
		return usageErrorf("%v", err)
	}
	if f.lake != "" {
		lk, err := a.openLake("--lake", f.lake)
		if err != nil {
			return err
		}
		follower, err := lk.Follow(db, lake.FollowOptions{KeepSteps: f.keepSteps, Logger: log})
		if err != nil {
			return usageErrorf("--lake: %v", err)
		}
		// Stopped before the file is closed, after a last export.
		defer func() {
			if err := follower.Close(); err != nil {
				log.Warn("patrdb: the last export into the lake failed", "lake", f.lake, "err", err)
			}
		}()
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return usageErrorf("--addr %s: %v", f.addr, err)
	}
	base := "http://" + connectAddr(f.addr, ln.Addr().(*net.TCPAddr))
	srv := server.NewHTTPServer(f.addr, h)

	// Announce the address only as the file's writer: a read-only serve
	// shares the lock, and readers can open the file themselves. Serving
	// does not depend on it: on a full disk (where the address cannot be
	// written) the file is still served, reads and all, and the warning
	// says why writes will fail.
	if !f.readOnly {
		if err := server.WriteAddrFile(a.dbPath, base); err != nil {
			fmt.Fprintln(a.stderr, errorLine(a.unannounced(err, base)))
		} else {
			defer server.RemoveAddrFile(a.dbPath, base)
		}
	}
	if a.json {
		if err := a.printJSON(serveStarted{Path: a.dbPath, URL: base, ReadOnly: f.readOnly, Token: token != "", Lake: f.lake, KeepSteps: f.keepSteps}); err != nil {
			ln.Close()
			return err
		}
	} else {
		fmt.Fprintf(a.stdout, "serving %s at %s\n", a.dbPath, base)
		if f.lake != "" {
			kept := ""
			if f.keepSteps > 0 {
				kept = fmt.Sprintf(", keeping the last %d in the file", f.keepSteps)
			}
			fmt.Fprintf(a.stdout, "exporting each checkpointed step into %s%s\n", f.lake, kept)
		}
	}

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving %s: %w", f.addr, err)
	case <-ctx.Done():
	}
	// Let requests in flight finish (each is one transaction), then close
	// the file cleanly.
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("stopping the server: %w", err)
	}
	return nil
}

// unannounced is the warning of a serve that could not write its address
// file: readers of the file must be given the address, and on a full disk
// the writes it takes will fail until space is freed.
func (a *App) unannounced(err error, base string) error {
	next := fmt.Sprintf("serving anyway; readers of %s must be given --server %s", a.dbPath, base)
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		next += "; the disk is full, so writes will fail (HTTP 507 full) until space is freed"
	}
	return fmt.Errorf("warning: cannot write %s: %v: %s", server.AddrFile(a.dbPath), errorText(err), next)
}

// connectAddr is the address a client on this machine dials: the host
// asked for, with a wildcard bind ("", 0.0.0.0, ::) reached through
// loopback, and the port actually bound (for --addr host:0).
func connectAddr(requested string, bound *net.TCPAddr) string {
	host, _, _ := net.SplitHostPort(requested)
	switch ip := net.ParseIP(host); {
	case host == "":
		host = "127.0.0.1"
	case ip != nil && ip.IsUnspecified():
		if ip.To4() != nil {
			host = "127.0.0.1"
		} else {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, fmt.Sprint(bound.Port))
}
