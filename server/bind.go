package server

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// DefaultAddr is where `patrdb serve` listens unless told otherwise.
const DefaultAddr = "127.0.0.1:7878"

// loopbackName is the one loopback rule, for listen addresses and Host
// headers alike: host (without a port; IPv6 brackets allowed) is
// "localhost" or a loopback IP literal. Any other name is not loopback,
// subdomains of localhost included: what a name resolves to can change, so
// a listener bound to it may face the network and a Host header naming it
// may come from a page whose DNS was rebound to this machine.
func loopbackName(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// IsLoopback reports whether a listen address (host:port) binds only to this
// machine's loopback interface. An empty host ("":7878, which binds every
// interface) is not loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && loopbackName(host)
}

// loopbackHost reports whether a Host header (port optional) names this
// machine's loopback.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return loopbackName(host)
}

// CheckBind enforces the rule for exposing a store: loopback addresses may
// serve without a token; any other address needs one (ErrTokenRequired).
func CheckBind(addr, token string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("%w: address %q: want host:port, e.g. %s", ErrInvalidOptions, addr, DefaultAddr)
	}
	if token == "" && !IsLoopback(addr) {
		return fmt.Errorf("%w: %s is not a loopback address", ErrTokenRequired, addr)
	}
	return nil
}

// LoadToken reads a bearer token from a file: its content with surrounding
// white space removed, at least MinTokenLen bytes of printable ASCII. A
// file others can read is refused, since anyone who can read it can write
// to the store.
func LoadToken(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadToken, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%w: %s is readable by group or others (mode %v); chmod 600 it", ErrBadToken, path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadToken, err)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < MinTokenLen {
		return "", fmt.Errorf("%w: %s holds %d bytes, want at least %d", ErrBadToken, path, len(tok), MinTokenLen)
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < 0x21 || tok[i] > 0x7e {
			return "", fmt.Errorf("%w: %s: byte %d is not printable ASCII", ErrBadToken, path, i)
		}
	}
	return tok, nil
}

// Timeouts of NewHTTPServer. Reads and writes are bounded so a slow or
// stalled client cannot hold a connection (and its goroutine) forever; the
// write timeout leaves room for the largest page of events.
const (
	ReadHeaderTimeout = 10 * time.Second
	ReadTimeout       = 60 * time.Second
	WriteTimeout      = 120 * time.Second
	IdleTimeout       = 120 * time.Second
	MaxHeaderBytes    = 64 << 10
)

// NewHTTPServer wraps h in an http.Server with the timeouts above.
func NewHTTPServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
	}
}
