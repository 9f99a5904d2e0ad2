package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/patrdb/patrdb/client"
)

// fakeServer answers the index with index (404 when empty), /runs with no
// runs, and counts the index requests.
func fakeServer(t *testing.T, index string) (*client.Client, *atomic.Int32) {
	var asked atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/{$}", func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		if index == "" {
			http.Error(w, `{"error":"not found","code":"not_found"}`, http.StatusNotFound)
			return
		}
		w.Write([]byte(index))
	})
	mux.HandleFunc("GET /api/v1/runs", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"runs":[]}`)) })
	mux.HandleFunc("GET /api/v1/health", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"status":"ok","api":"v1"}`))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return client.New(srv.URL), &asked
}

func TestVersionCheck(t *testing.T) {
	ctx := context.Background()
	t.Run("same major, any minor", func(t *testing.T) {
		c, asked := fakeServer(t, `{"api":"v1","api_version":"1.9"}`)
		for range 3 {
			if _, err := c.Runs(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if v, err := c.APIVersion(ctx); v != "1.9" || err != nil {
			t.Errorf("APIVersion = %q, %v", v, err)
		}
		if n := asked.Load(); n != 1 {
			t.Errorf("index read %d times by one client, want once", n)
		}
	})
	for name, index := range map[string]string{
		"other major":        `{"api":"v2","api_version":"2.0"}`,
		"no version":         `{"api":"v1"}`,
		"predates the index": "",
	} {
		t.Run(name, func(t *testing.T) {
			c, _ := fakeServer(t, index)
			if _, err := c.Runs(ctx); !errors.Is(err, client.ErrIncompatibleServer) {
				t.Errorf("Runs: %v, want ErrIncompatibleServer", err)
			}
			if _, err := c.APIVersion(ctx); !errors.Is(err, client.ErrIncompatibleServer) {
				t.Errorf("APIVersion: %v, want ErrIncompatibleServer", err)
			}
			if _, err := c.Health(ctx); err != nil {
				t.Errorf("Health is answered before the check: %v", err)
			}
			c.SkipVersionCheck = true
			if _, err := c.Runs(ctx); err != nil {
				t.Errorf("Runs without the check: %v", err)
			}
		})
	}
}

// A server that is down is not remembered as incompatible: once it
// answers, the same client works.
func TestVersionCheckRetriesAfterNoAnswer(t *testing.T) {
	ctx := context.Background()
	c, _ := fakeServer(t, `{"api_version":"1.2"}`)
	base := c.Base
	c.Base = "http://127.0.0.1:1" // nothing listens on port 1
	if _, err := c.Runs(ctx); err == nil || errors.Is(err, client.ErrIncompatibleServer) {
		t.Fatalf("Runs with no server: %v, want a transport error", err)
	}
	c.Base = base
	if _, err := c.Runs(ctx); err != nil {
		t.Errorf("Runs once the server answers: %v", err)
	}
}
