package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/patrdb/patrdb/server"
	"github.com/patrdb/patrdb/store"
)

// A --db that cannot be a patrdb file is named for what it is.
func TestDBThatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ path, kind string }{
		{"/dev/zero", "is a device"}, {"/dev/null", "is a device"}, {dir, "is a folder"},
	} {
		if _, err := os.Stat(c.path); err != nil {
			continue
		}
		cli(t, "--db", c.path, "runs").fails(t, 2, c.path+" "+c.kind+", not a patrdb file")
		cli(t, "--db", c.path, "check").fails(t, 2, c.kind)
	}
	// A path under a file: the system's error, with the path said once.
	f := filepath.Join(dir, "f")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "--db", filepath.Join(f, "x.db"), "runs")
	r.fails(t, 2, "not a directory")
	if strings.Count(r.stderr, f) != 1 {
		t.Errorf("the path is repeated: %q", r.stderr)
	}
}

// --timeout bounds each request to a server that does not answer.
func TestTimeoutBoundsServerRequests(t *testing.T) {
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(20 * time.Second):
		}
	}))
	defer hung.Close()
	start := time.Now()
	cli(t, "--db", fixture(t), "--timeout", "300ms", "runs", "--server", hung.URL).fails(t, 2, "server "+hung.URL)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v with --timeout 300ms", d)
	}
}

// The owner's .serve file is found through a symbolic link to the file.
func TestServeFileFoundThroughSymlink(t *testing.T) {
	path := fixture(t)
	db, err := store.Open(path, nil) // holds the lock, as a trainer would
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	srv := httptest.NewServer(server.Handler(db, server.Options{}))
	defer srv.Close()
	if err := server.WriteAddrFile(path, srv.URL); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link.db")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	want := cli(t, "--db", path, "runs").ok(t).stdout
	if got := cli(t, "--db", link, "runs").ok(t).stdout; got != want {
		t.Errorf("through the link:\n%s\nwant:\n%s", got, want)
	}
}

// A full disk is said in words, with what to do, and exits 2.
func TestFullDiskMessage(t *testing.T) {
	app := &App{dbPath: "patr.db"}
	err := app.explain(&commandError{&os.PathError{Op: "write", Path: "out/lake/x.parquet", Err: syscall.ENOSPC}})
	if exitCode(err) != exitUsage || !strings.Contains(errorLine(err), "write out/lake/x.parquet: no space left on device: the disk or the file's size cap is full: free space") {
		t.Errorf("%d %q", exitCode(err), errorLine(err))
	}
	if err := app.explain(store.ErrFull); exitCode(err) != exitUsage || !strings.Contains(err.Error(), "free space") {
		t.Errorf("ErrFull: %v", err)
	}
}
