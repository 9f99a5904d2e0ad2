package main

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A stop signal in the middle of export, compact, migrate or batch leaves
// neither the destination nor any temporary file: the child is stopped
// where its temporary output exists (App.pause) and signalled there.
func TestStopSignalsRemoveTemporaryOutput(t *testing.T) {
	db := fixture(t)
	old := oldFile(t)
	cases := []struct {
		name string
		args func(out string) []string
	}{
		{"export-jsonl", func(out string) []string {
			return []string{"export", "patr-4x4", "--format", "jsonl", "--out", filepath.Join(out, "lake")}
		}},
		{"export-parquet", func(out string) []string {
			return []string{"export", "patr-4x4", "--format", "parquet", "--out", filepath.Join(out, "lake")}
		}},
		{"compact", func(out string) []string { return []string{"compact", "--out", filepath.Join(out, "c.db")} }},
		{"migrate", func(out string) []string { return []string{"migrate", old, filepath.Join(out, "m.db")} }},
		{"batch", func(out string) []string {
			return []string{"batch", "patr-4x4", "--step", "1", "--out", filepath.Join(out, "b.safetensors")}
		}},
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		for _, c := range cases {
			t.Run(c.name+"/"+sig.String(), func(t *testing.T) {
				out := t.TempDir()
				cmd := exec.Command(os.Args[0], append([]string{"--db", db}, c.args(out)...)...)
				cmd.Env = []string{cliChildEnv + "=1", pauseEnv + "=1"}
				stderr, err := cmd.StderrPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				rd := bufio.NewReader(stderr)
				line, err := rd.ReadString('\n')
				if !strings.HasPrefix(line, "paused at ") {
					_ = cmd.Process.Kill()
					t.Fatalf("child said %q (%v) instead of pausing", line, err)
				}
				entries, _ := os.ReadDir(out)
				if len(entries) == 0 {
					t.Fatalf("no temporary output at the pause point")
				}
				if err := cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				rest, _ := io.ReadAll(rd)
				done := make(chan error, 1)
				go func() { done <- cmd.Wait() }()
				select {
				case err = <-done:
				case <-time.After(15 * time.Second):
					_ = cmd.Process.Kill()
					t.Fatal("child did not end after the signal")
				}
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != exitUsage {
					t.Errorf("exit: %v, want %d", err, exitUsage)
				}
				oneErrorLine(t, string(rest), "interrupted", "nothing was written to "+out)
				if entries, _ := os.ReadDir(out); len(entries) != 0 {
					t.Errorf("left behind: %v", entries)
				}
			})
		}
	}
}
