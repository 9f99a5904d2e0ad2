package server

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/store"
)

// A large JSON reply is gzip-encoded for a client that asks, and the same
// bytes decoded; a client that does not ask, and a binary batch, get
// them as they are.
func TestLargeRepliesAreGzipped(t *testing.T) {
	e := newEnv(t, Options{})
	createEmptyRun(t, e.db, "g")
	err := e.db.Update(func(tx *store.Tx) error {
		r, err := tx.Run("g")
		if err != nil {
			return err
		}
		for s := uint64(1); s <= 200; s++ {
			if err := r.PutScalars(s, map[string]float64{"loss": 1 / float64(s), "kl": float64(s) / 1000, "entropy": 0.5}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	get := func(encoding string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", e.srv.URL+"/api/v1/runs/g/scalars", nil)
		req.Header.Set("Accept-Encoding", encoding)
		resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, body
	}
	plainResp, plain := get("identity")
	if plainResp.Header.Get("Content-Encoding") != "" || !json.Valid(plain) || len(plain) < 10000 {
		t.Fatalf("identity: %q, %d bytes", plainResp.Header.Get("Content-Encoding"), len(plain))
	}
	gzResp, zipped := get("gzip, deflate")
	if gzResp.Header.Get("Content-Encoding") != "gzip" || !strings.Contains(gzResp.Header.Get("Vary"), "Accept-Encoding") {
		t.Fatalf("asked for gzip: Content-Encoding %q, Vary %q", gzResp.Header.Get("Content-Encoding"), gzResp.Header.Get("Vary"))
	}
	zr, err := gzip.NewReader(strings.NewReader(string(zipped)))
	if err != nil {
		t.Fatal(err)
	}
	unzipped, err := io.ReadAll(zr)
	if err != nil || string(unzipped) != string(plain) {
		t.Fatalf("the gzipped reply decodes to %d bytes (%v), the plain one has %d", len(unzipped), err, len(plain))
	}
	t.Logf("scalars of 200 steps: %d bytes, %d gzipped", len(plain), len(zipped))
	if len(zipped)*4 > len(plain) {
		t.Errorf("gzip took %d bytes to %d", len(plain), len(zipped))
	}
	// A small reply goes as it is.
	req, _ := http.NewRequest("GET", e.srv.URL+"/api/v1/health", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "" {
		t.Errorf("a small reply was gzipped")
	}
	// The Go client asks for gzip and reads the same figures.
	page, err := e.c.Scalars(bg, "g", 0)
	if err != nil || len(page.Steps) != 200 {
		t.Fatalf("through the client: %d steps, %v", len(page.Steps), err)
	}
}
