package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/patrdb/patrdb/api"
)

// A process that owns a store file and serves it announces where: it writes
// the base URL to AddrFile(db) next to the file, and removes it on a clean
// close. Another process that finds the file locked reads it (Discover) and
// talks to the owner instead. After a crash the file may be stale; Discover
// checks that the address answers for the same file before trusting it.

// AddrFile is the path of the address file of a store file: "<db>.serve",
// next to the file itself when dbPath is a symbolic link, so that every
// name of the file finds the same address.
func AddrFile(dbPath string) string {
	if p, err := filepath.EvalSymlinks(dbPath); err == nil {
		dbPath = p
	}
	return dbPath + ".serve"
}

// FileID names a store file without saying where it lives: a hash of its
// absolute path with symbolic links resolved. Health reports it, and
// Discover compares it with the file it was asked about.
func FileID(dbPath string) string {
	sum := sha256.Sum256([]byte(resolvePath(dbPath)))
	return hex.EncodeToString(sum[:16])
}

// WriteAddrFile records baseURL (e.g. "http://127.0.0.1:7878") for dbPath.
// It writes a temporary file and renames it, so a reader never sees half an
// address.
func WriteAddrFile(dbPath, baseURL string) error {
	if _, err := url.Parse(baseURL); err != nil {
		return fmt.Errorf("%w: base URL %q: %v", ErrInvalidOptions, baseURL, err)
	}
	path := AddrFile(dbPath)
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	if _, err := tmp.WriteString(baseURL + "\n"); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

// RemoveAddrFile removes the address file if it still names baseURL (a
// newer owner may have replaced it).
func RemoveAddrFile(dbPath, baseURL string) error {
	got, err := ReadAddrFile(dbPath)
	if err != nil || got != baseURL {
		return nil
	}
	if err := os.Remove(AddrFile(dbPath)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// ReadAddrFile returns the base URL recorded for dbPath, or ErrNoServer.
func ReadAddrFile(dbPath string) (string, error) {
	b, err := os.ReadFile(AddrFile(dbPath))
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoServer, err)
	}
	s := strings.TrimSpace(string(b))
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%w: %s does not hold an http URL", ErrNoServer, AddrFile(dbPath))
	}
	return s, nil
}

// Discover returns the base URL of the live server of dbPath: the address
// file must exist, the server must answer /api/v1/health, and the file it
// serves must be dbPath (compared after resolving both paths). Otherwise
// ErrNoServer says which of these failed. client may be nil.
func Discover(ctx context.Context, dbPath string, client *http.Client) (string, error) {
	base, err := ReadAddrFile(dbPath)
	if err != nil {
		return "", err
	}
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/api/v1/health", nil)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoServer, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("%w: %s (from %s) does not answer: %v", ErrNoServer, base, AddrFile(dbPath), err)
	}
	defer resp.Body.Close()
	var h api.Health
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&h) != nil || h.Status != "ok" {
		return "", fmt.Errorf("%w: %s (from %s) is not a healthy patrdb server (HTTP %d)", ErrNoServer, base, AddrFile(dbPath), resp.StatusCode)
	}
	if h.File != FileID(dbPath) {
		return "", fmt.Errorf("%w: %s (from %s) serves another file than %s", ErrNoServer, base, AddrFile(dbPath), dbPath)
	}
	return base, nil
}

// resolvePath is path made absolute, with symbolic links resolved when it
// exists.
func resolvePath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if p, err := filepath.EvalSymlinks(path); err == nil {
		path = p
	}
	return path
}
