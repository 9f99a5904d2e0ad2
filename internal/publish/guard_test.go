package publish

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A stop signal removes every output the guard began and has not
// published, at once, runs the OnStop functions and cancels the context;
// those outputs can no longer be published (ErrInterrupted), nor can new
// ones begin; a published one stays.
func TestAStopSignalRemovesUnpublishedOutputs(t *testing.T) {
	dir := t.TempDir()
	g, ctx := Watch(context.Background())
	defer g.Close()
	done := writeOutput(t, g, filepath.Join(dir, "done"), "whole")
	if err := done.Publish(false); err != nil {
		t.Fatal(err)
	}
	a := writeOutput(t, g, filepath.Join(dir, "a"), "half")
	b := writeOutput(t, g, filepath.Join(dir, "b"), "half")
	ran := make(chan struct{})
	g.OnStop(func() { close(ran) })
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the context was not cancelled")
	}
	<-ran
	if !g.Stopped() {
		t.Error("Stopped is false after the signal")
	}
	if names := entries(t, dir); !slices.Equal(names, []string{"done"}) {
		t.Fatalf("after the signal: %v", names)
	}
	for _, o := range []*Output{a, b} {
		if err := o.Publish(false); !errors.Is(err, ErrInterrupted) {
			t.Errorf("Publish after the signal: %v, want ErrInterrupted", err)
		}
	}
	if _, err := g.Begin(filepath.Join(dir, "c")); !errors.Is(err, ErrInterrupted) {
		t.Errorf("Begin after the signal: %v, want ErrInterrupted", err)
	}
	if names := entries(t, dir); !slices.Equal(names, []string{"done"}) {
		t.Fatalf("at the end: %v", names)
	}
}

// Publishing and a signal's removal exclude each other: however they
// interleave, the destination is absent (Publish said ErrInterrupted) or
// whole (Publish said nil), and nothing temporary is left.
func TestPublishAndStopExcludeEachOther(t *testing.T) {
	for i := range 200 {
		dir := t.TempDir()
		g, _ := Watch(context.Background())
		o := writeOutput(t, g, filepath.Join(dir, "out"), "whole")
		var wg sync.WaitGroup
		var err error
		wg.Add(2)
		go func() { defer wg.Done(); err = o.Publish(false) }()
		go func() { defer wg.Done(); g.stop() }()
		wg.Wait()
		g.Close()
		b, rerr := os.ReadFile(filepath.Join(dir, "out"))
		switch {
		case err == nil && (rerr != nil || string(b) != "whole"):
			t.Fatalf("trial %d: published, but the destination holds %q (%v)", i, b, rerr)
		case errors.Is(err, ErrInterrupted) && rerr == nil:
			t.Fatalf("trial %d: interrupted, but the destination exists", i)
		case err != nil && !errors.Is(err, ErrInterrupted):
			t.Fatalf("trial %d: %v", i, err)
		}
		if names := entries(t, dir); len(names) > 1 || len(names) == 1 && names[0] != "out" {
			t.Fatalf("trial %d: left %v", i, names)
		}
	}
}
