package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/store/storetest"
)

func TestCheckBind(t *testing.T) {
	cases := []struct {
		addr, token string
		want        error
	}{
		{"127.0.0.1:7878", "", nil},
		{"127.0.0.2:7878", "", nil},
		{"[::1]:7878", "", nil},
		{"localhost:0", "", nil},
		{":7878", "", ErrTokenRequired},
		{"0.0.0.0:7878", "", ErrTokenRequired},
		{"[::]:7878", "", ErrTokenRequired},
		{"192.168.1.5:7878", "", ErrTokenRequired},
		{"example.com:80", "", ErrTokenRequired},
		{"0.0.0.0:7878", "0123456789abcdef", nil},
		{"7878", "", ErrInvalidOptions},
	}
	for _, c := range cases {
		if err := CheckBind(c.addr, c.token); !errors.Is(err, c.want) && !(err == nil && c.want == nil) {
			t.Errorf("CheckBind(%q, %q) = %v, want %v", c.addr, c.token, err, c.want)
		}
	}
}

func TestLoadToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "  s3cret-token-0123456789\n", 0o600)
	if tok, err := LoadToken(good); err != nil || tok != "s3cret-token-0123456789" {
		t.Fatalf("good token: %q %v", tok, err)
	}
	for name, p := range map[string]string{
		"short":            write("short", "abc\n", 0o600),
		"empty":            write("empty", "\n", 0o600),
		"world readable":   write("open", "s3cret-token-0123456789", 0o644),
		"inner whitespace": write("space", "s3cret token 0123456789", 0o600),
		"missing":          filepath.Join(dir, "missing"),
	} {
		if _, err := LoadToken(p); !errors.Is(err, ErrBadToken) {
			t.Errorf("%s: %v, want ErrBadToken", name, err)
		}
	}
}

func TestBearerToken(t *testing.T) {
	const tok = "0123456789abcdef-token"
	if _, err := NewHandler(storetest.Open(t), Options{Token: "short"}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("short token accepted: %v", err)
	}
	e := newEnv(t, Options{Token: tok})
	createRun(e, "r1", testTree) // with the right token
	for _, auth := range []string{"", "Bearer wrong-token-0123456789", "Bearer " + tok + "x", "Basic " + tok, tok} {
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/api/v1/runs", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("Authorization %q: %d", auth, resp.StatusCode)
		}
	}
	// Writes without the token are refused and write nothing.
	before := e.fileSum()
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/api/v1/runs", strings.NewReader(`{"client_key":"k","id":"r2"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || e.fileSum() != before {
		t.Fatalf("unauthorised write: %d", resp.StatusCode)
	}
	// Health stays open (it says nothing about the data), and a token
	// serves any Host.
	req, _ = http.NewRequest(http.MethodGet, e.srv.URL+"/api/v1/health", nil)
	req.Host = "patrdb.example.org"
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("health: %d", resp.StatusCode)
	}
	if _, err := e.c.Runs(context.Background()); err != nil {
		t.Fatalf("client with the token: %v", err)
	}
}

// TestOneLoopbackRule: a listen address and a Host header are loopback by
// the same rule: localhost or a loopback IP, never another name (not even a
// subdomain of localhost, whose resolution is up to the resolver).
func TestOneLoopbackRule(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1": true, "127.3.4.5": true, "localhost": true, "LocalHost": true, "[::1]": true, "[::ffff:127.0.0.1]": true,
		"app.localhost": false, "localhost.": false, "10.0.0.1": false, "0.0.0.0": false, "[::]": false, "": false,
		"evil.example": false, "127.0.0.1.nip.io": false,
	} {
		if got := IsLoopback(host + ":7878"); got != want {
			t.Errorf("IsLoopback(%q) = %t, want %t", host+":7878", got, want)
		}
		if got := loopbackHost(host + ":7878"); got != want {
			t.Errorf("loopbackHost(%q) = %t, want %t", host+":7878", got, want)
		}
		if got := loopbackHost(host); got != want && host != "" {
			t.Errorf("loopbackHost(%q) = %t, want %t", host, got, want)
		}
	}
	if IsLoopback("127.0.0.1") {
		t.Error("IsLoopback accepts an address without a port")
	}
}

// Without a token only loopback Host headers are answered: a page on
// another site that rebinds its name to 127.0.0.1 gets 403.
func TestHostCheck(t *testing.T) {
	e := newEnv(t, Options{})
	for host, want := range map[string]int{
		"127.0.0.1:7878": 200, "localhost:7878": 200, "[::1]:7878": 200, "[::1]": 200, "localhost": 200, "app.localhost:7878": 403,
		"evil.example:7878": 403, "10.0.0.1:7878": 403, "127.0.0.1.nip.io": 403,
	} {
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/api/v1/runs", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
	any := newEnv(t, Options{AllowAnyHost: true})
	req, _ := http.NewRequest(http.MethodGet, any.srv.URL+"/api/v1/runs", nil)
	req.Host = "evil.example"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("AllowAnyHost: %d", resp.StatusCode)
	}
}

// A panicking handler gives a one-line JSON 500, and the server keeps
// serving.
func TestPanicIsRecovered(t *testing.T) {
	db := storetest.Open(t)
	h, err := NewHandler(db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := h.(*server)
	s.mux.HandleFunc("GET /api/v1/test-panic", func(http.ResponseWriter, *http.Request) { panic("boom") })
	srv := httptest.NewServer(s)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/v1/test-panic")
	if err != nil {
		t.Fatal(err)
	}
	var body [512]byte
	n, _ := resp.Body.Read(body[:])
	resp.Body.Close()
	if resp.StatusCode != 500 || strings.Contains(string(body[:n]), "goroutine") {
		t.Fatalf("%d %s", resp.StatusCode, body[:n])
	}
	assertErrorBody(t, resp.Header, body[:n])
	resp, err = http.Get(srv.URL + "/api/v1/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("after the panic: %v %v", resp, err)
	}
	resp.Body.Close()
}

func TestHandlerWithBadOptions(t *testing.T) {
	h := Handler(storetest.Open(t), Options{MaxBodyBytes: -1})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/health", nil))
	if rec.Code != 500 || !strings.Contains(rec.Body.String(), "MaxBodyBytes") {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}

func TestServerTimeouts(t *testing.T) {
	s := NewHTTPServer(DefaultAddr, http.NotFoundHandler())
	if s.ReadHeaderTimeout == 0 || s.ReadTimeout == 0 || s.WriteTimeout == 0 || s.IdleTimeout == 0 || s.MaxHeaderBytes == 0 {
		t.Fatalf("unbounded server: %+v", s)
	}
}

func TestDiscover(t *testing.T) {
	e := newEnv(t, Options{})
	path := e.db.Path()
	if _, err := Discover(context.Background(), path, nil); !errors.Is(err, ErrNoServer) {
		t.Fatalf("no address file: %v", err)
	}
	if err := WriteAddrFile(path, e.srv.URL); err != nil {
		t.Fatal(err)
	}
	got, err := Discover(context.Background(), path, nil)
	if err != nil || got != e.srv.URL {
		t.Fatalf("Discover = %q, %v", got, err)
	}
	// Through a relative path and a symlink it is still the same file.
	link := filepath.Join(t.TempDir(), "link.db")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if err := WriteAddrFile(link, e.srv.URL); err != nil {
		t.Fatal(err)
	}
	if _, err := Discover(context.Background(), link, nil); err != nil {
		t.Fatalf("through a symlink: %v", err)
	}
	// Another file's server is not this file's.
	other := filepath.Join(t.TempDir(), "other.db")
	if err := WriteAddrFile(other, e.srv.URL); err != nil {
		t.Fatal(err)
	}
	if _, err := Discover(context.Background(), other, nil); !errors.Is(err, ErrNoServer) || !strings.Contains(err.Error(), "serves") {
		t.Fatalf("wrong file: %v", err)
	}
	// A stale file after a crash: nothing answers.
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	if err := WriteAddrFile(path, deadURL); err != nil {
		t.Fatal(err)
	}
	if _, err := Discover(context.Background(), path, nil); !errors.Is(err, ErrNoServer) {
		t.Fatalf("stale file: %v", err)
	}
	// RemoveAddrFile leaves a newer owner's file alone.
	if err := RemoveAddrFile(path, e.srv.URL); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(AddrFile(path)); err != nil {
		t.Fatal("removed another owner's address file")
	}
	if err := RemoveAddrFile(path, deadURL); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(AddrFile(path)); !os.IsNotExist(err) {
		t.Fatal("address file left behind")
	}
}
