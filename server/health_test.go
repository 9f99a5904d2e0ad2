package server

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/patrdb/patrdb/api"
)

// Health names the file only by its FileID; the path goes to a request
// with the token and to nobody else.
func TestHealthHidesThePath(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	e := newEnv(t, Options{Token: token})
	abs, _ := filepath.Abs(e.db.Path())
	for _, c := range []struct {
		auth     string
		wantPath string
	}{{"", ""}, {"Bearer wrong-token-wrong-token-wrong", ""}, {"Bearer " + token, resolvePath(abs)}} {
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/api/v1/health", nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var h api.Health
		err = json.NewDecoder(resp.Body).Decode(&h)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || h.Path != c.wantPath || h.File != FileID(abs) {
			t.Errorf("auth %q: %d %+v %v, want path %q", c.auth, resp.StatusCode, h, err, c.wantPath)
		}
	}
}

// A server announced for a file is found through any symbolic link to it.
func TestDiscoverThroughSymlink(t *testing.T) {
	e := newEnv(t, Options{})
	if err := WriteAddrFile(e.db.Path(), e.srv.URL); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link.db")
	if err := os.Symlink(e.db.Path(), link); err != nil {
		t.Fatal(err)
	}
	if AddrFile(link) != AddrFile(e.db.Path()) {
		t.Errorf("AddrFile(%s) = %s, want %s", link, AddrFile(link), AddrFile(e.db.Path()))
	}
	base, err := Discover(context.Background(), link, nil)
	if err != nil || base != e.srv.URL {
		t.Errorf("Discover through the link: %q %v", base, err)
	}
	// Another file is not served by it.
	other := filepath.Join(t.TempDir(), "other.db")
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(AddrFile(other), []byte(e.srv.URL+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Discover(context.Background(), other, nil); err == nil {
		t.Error("Discover accepted a server of another file")
	}
}
