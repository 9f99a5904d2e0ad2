package main

import (
	"context"
	"os/exec"
	"syscall"
	"time"
)

// command runs name in its own process group and, when ctx ends, kills the
// whole group: go test runs the test binary as a child, and killing only
// the go command (exec's default) would leave a hung mutant's binary
// running, taking a core, until its own -test.timeout.
func command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}
