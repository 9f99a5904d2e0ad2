package client_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/patrdb/patrdb/client"
	"github.com/patrdb/patrdb/store"
)

// Backup writes the server's whole file: the copy opens as a store
// holding what the server held, and Backup says how many bytes it wrote.
// It carries the client's token like every request.
func TestBackupIsTheFile(t *testing.T) {
	s := serve(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer s3cret" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	s.c.Token = "s3cret"
	s.createRun("r", workerTree)
	s.openStep("r", 1, 2)
	path := filepath.Join(t.TempDir(), "copy.patrdb")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.c.Backup(bg, f)
	if cerr := f.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != n || n == 0 {
		t.Fatalf("Backup said %d bytes; the copy: %v, %v", n, fi, err)
	}
	db, err := store.Open(path, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *store.Tx) error {
		r, err := tx.Run("r")
		if err != nil {
			return err
		}
		gs, err := r.Groups(1)
		if err == nil && len(gs) != 2 {
			t.Errorf("the copy holds %d groups of step 1, want 2", len(gs))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A refused backup is the server's error, not an empty copy.
func TestBackupRefused(t *testing.T) {
	s := serve(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/backup") {
				http.Error(w, "backups are off", http.StatusForbidden)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	var buf strings.Builder
	n, err := s.c.Backup(bg, &buf)
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusForbidden || !strings.Contains(ae.Message, "backups are off") || n != 0 || buf.Len() != 0 {
		t.Fatalf("a refused backup: %d bytes, %v", n, err)
	}
}

// A server gone before the copy starts is an error, with nothing written.
func TestBackupOfAServerGone(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"api_version":"1.2"}`))
	}))
	c := client.New(srv.URL)
	if _, err := c.APIVersion(bg); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	var buf strings.Builder
	if n, err := c.Backup(bg, &buf); err == nil || n != 0 || buf.Len() != 0 {
		t.Fatalf("a backup from a server gone: %d bytes, %v", n, err)
	}
}

// Backup checks the server's API version like every call, and goes
// through the client's own transport.
func TestBackupChecksTheServerAndUsesTheTransport(t *testing.T) {
	for _, version := range []string{"2.0", "1.2"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/backup") {
				w.Write([]byte("file bytes"))
				return
			}
			w.Write([]byte(`{"api_version":"` + version + `"}`))
		}))
		c := client.New(srv.URL)
		rt := &countingTransport{inner: c.HTTP.Transport}
		c.HTTP.Transport = rt
		var buf strings.Builder
		n, err := c.Backup(bg, &buf)
		srv.Close()
		switch {
		case version == "2.0" && (err == nil || n != 0 || buf.Len() != 0):
			t.Errorf("a backup from a server of another major version: %d bytes, %v", n, err)
		case version == "1.2" && (err != nil || buf.String() != "file bytes" || rt.n.Load() != 2):
			t.Errorf("a backup: %q, %v, %d requests through the client's transport (want the index and the copy)", buf.String(), err, rt.n.Load())
		}
	}
}

type countingTransport struct {
	inner http.RoundTripper
	n     atomic.Int32
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.inner.RoundTrip(r)
}

// A copy shorter than the length the server announced is an error naming
// both, with the bytes that did arrive counted: never a short file
// reported whole. (The transport trims the body, as a proxy that cut the
// copy short and still framed it would.)
func TestBackupShorterThanAnnouncedIsAnError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/backup") {
			w.Write([]byte("file bytes"))
			return
		}
		w.Write([]byte(`{"api_version":"1.2"}`))
	}))
	defer srv.Close()
	c := client.New(srv.URL)
	c.HTTP.Transport = announceTransport{inner: c.HTTP.Transport, length: "20"}
	var buf strings.Builder
	n, err := c.Backup(bg, &buf)
	if err == nil || n != 10 || !strings.Contains(err.Error(), "10 of 20 bytes") {
		t.Fatalf("a copy of 10 bytes announced as 20: %d bytes, %v", n, err)
	}
}

// announceTransport rewrites the Content-Length header of backup answers.
type announceTransport struct {
	inner  http.RoundTripper
	length string
}

func (a announceTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := a.inner.RoundTrip(r)
	if err == nil && strings.HasSuffix(r.URL.Path, "/backup") {
		resp.Header.Set("Content-Length", a.length)
	}
	return resp, err
}

// A refusal's body is read up to 64 KiB, whatever the server sends: a
// broken or hostile server cannot make the client hold its whole answer.
func TestBackupRefusalIsReadUpTo64KiB(t *testing.T) {
	s := serve(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/backup") {
				w.WriteHeader(http.StatusForbidden)
				w.Write([]byte(strings.Repeat("x", 200<<10)))
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	_, err := s.c.Backup(bg, io.Discard)
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusForbidden || len(ae.Message) != 64<<10 {
		t.Fatalf("a refusal of 200 KiB: %v (message of %d bytes, want 64 KiB)", err, len(ae.Message))
	}
}
