package main

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fullDisk mounts a small tmpfs at a new folder, lets prepare write into it,
// then fills it: every later write there fails with ENOSPC. It skips the
// test where this process may not mount (not root, no mount namespace).
func fullDisk(t *testing.T, prepare func(dir string)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "full")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=4m"); err != nil {
		t.Skipf("cannot mount a tmpfs to fill (%v): needs root", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	prepare(dir)
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	block := make([]byte, 64<<10)
	for {
		if _, err := f.Write(block); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "probe"), []byte("x"), 0o600); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("the disk is not full: %v", err)
	}
	return dir
}

// On a full disk serve cannot write its address file: it serves anyway
// (it had refused to start, so nothing was served, not even reads), says
// in a warning line why and what follows (readers need --server, writes
// fail until space is freed), answers reads, answers a write 507 "full"
// with nothing lost (the file checks clean and holds what it held), and
// stops cleanly.
func TestServeServesOnAFullDisk(t *testing.T) {
	var path string
	fullDisk(t, func(dir string) {
		path = filepath.Join(dir, "patr.db")
		buildFixture(t, path)
	})
	before := cli(t, "--db", path, "runs", "--json")
	p := startServe(t, "--db", path, "serve", "--addr", "127.0.0.1:0")
	var list struct {
		Runs []struct{ Run struct{ ID string } }
	}
	if st := getJSON(t, p.url+"/api/v1/runs", "", &list); st != 200 || len(list.Runs) != 2 {
		t.Errorf("GET runs: %d %+v", st, list)
	}
	resp, err := http.Post(p.url+"/api/v1/runs/patr-4x4/status", "application/json",
		strings.NewReader(`{"client_key":"k","status":"finished"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInsufficientStorage {
		t.Errorf("a write on the full disk: %d, want 507", resp.StatusCode)
	}
	if code := p.stop(t, os.Interrupt); code != 0 {
		t.Errorf("serve exit %d after SIGINT; stderr: %s", code, p.stderr)
	}
	// The first line is the CLI's; the server logs the failed write after it.
	first, _, _ := strings.Cut(p.stderr.String(), "\n")
	oneErrorLine(t, first+"\n", "warning: cannot write "+path+".serve", "no space left on device",
		"--server "+p.url, "writes will fail (HTTP 507 full) until space is freed")
	if after := cli(t, "--db", path, "runs", "--json"); after.stdout != before.stdout || after.code != 0 {
		t.Errorf("the refused write changed the runs: exit %d\n%s", after.code, goldenDiff(before.stdout, after.stdout))
	}
	if r := cli(t, "--db", path, "check"); r.code != 0 {
		t.Errorf("check after the refused write: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(path + ".serve"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an address file is left: %v", err)
	}
}
