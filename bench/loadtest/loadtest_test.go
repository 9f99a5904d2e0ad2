package main

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// TestLoad runs the load test when PATRDB_LOADTEST is set (to anything; a
// number sets the clients): it takes seconds and measures a shared machine,
// so it stays out of the default suite. It fails on any lost or duplicated
// write; the figures are logged, not asserted.
func TestLoad(t *testing.T) {
	v := os.Getenv("PATRDB_LOADTEST")
	if v == "" {
		t.Skip("set PATRDB_LOADTEST=1 (or a client count) to run the serve load test")
	}
	cfg := defaultConfig()
	cfg.Turns, cfg.Duration = 100, 15*time.Second
	if n, err := strconv.Atoi(v); err == nil && n > 1 {
		cfg.Clients = n
	}
	rep, err := Run(cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var b []byte
	w := &logWriter{&b}
	rep.Print(w)
	t.Log("\n" + string(b))
	if rep.Lost != 0 || rep.Duplicated != 0 {
		t.Fatalf("%d lost, %d duplicated writes", rep.Lost, rep.Duplicated)
	}
	if rep.Retries == 0 || rep.Replayed != rep.Retries {
		t.Fatalf("%d retries, %d answered from the reply log", rep.Retries, rep.Replayed)
	}
	if rep.HTTP.Turns != cfg.Clients*cfg.Turns {
		t.Logf("the time bound stopped the HTTP phase at %d of %d turns", rep.HTTP.Turns, cfg.Clients*cfg.Turns)
	}
}

type logWriter struct{ b *[]byte }

func (w *logWriter) Write(p []byte) (int, error) { *w.b = append(*w.b, p...); return len(p), nil }
