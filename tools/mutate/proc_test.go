package main

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A timed-out command takes its children with it: the shell's background
// sleep stands in for the test binary go test starts.
func TestCommandKillsItsChildren(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	cmd := command(ctx, "sh", "-c", "sleep 60 & echo $!; wait")
	var out bytes.Buffer
	cmd.Stdout = &out
	start := time.Now()
	if err := cmd.Run(); err == nil {
		t.Fatal("the command outlived its context without an error")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Run returned after %v, want soon after the timeout", d)
	}
	child, err := strconv.Atoi(strings.TrimSpace(out.String()))
	if err != nil {
		t.Fatalf("the shell printed %q, not its child's pid", out.String())
	}
	// The child is gone: signal 0 to it finds no process (once reaped).
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := syscall.Kill(child, 0)
		if errors.Is(err, syscall.ESRCH) {
			return
		}
		if time.Now().After(deadline) {
			syscall.Kill(child, syscall.SIGKILL)
			t.Fatalf("the command's child %d still alive after the timeout (%v)", child, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
