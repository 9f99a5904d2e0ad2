package server

import (
	"fmt"
	"io"
	"log/slog"
	"time"
)

// Options configure Handler. The zero value is usable: every zero field takes
// the default documented on it.
type Options struct {
	// Token, when not empty, is the bearer token every API request except
	// GET /api/v1/health must carry ("Authorization: Bearer <token>"). It is
	// compared in constant time. Serving on anything but a loopback address
	// requires one (CheckBind).
	Token string

	// AllowAnyHost turns off the Host header check. Without a Token the
	// handler answers only requests whose Host is a loopback name or address
	// (localhost, 127.0.0.0/8, ::1), so a web page the user visits cannot
	// reach the API through DNS rebinding. With a Token the check is off
	// anyway: the token is the defence.
	AllowAnyHost bool

	// ReadOnly refuses every write endpoint with 403, for serving a file
	// opened with store.Options.ReadOnly or a run nobody should touch.
	ReadOnly bool

	// MaxBodyBytes caps a request body; a larger one is refused with 413
	// before anything is decoded. Zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64

	// MaxPage caps the events returned by one page of the event log. Zero
	// means DefaultMaxPage.
	MaxPage int

	// Logger receives one line per failed request and every recovered
	// panic. Nil discards.
	Logger *slog.Logger

	// Clock stamps nothing in the store (the store has its own clock); it
	// times requests for the log. Nil means time.Now.
	Clock func() time.Time

	// CheckWait is how long a request waits for the check of a run it is
	// the first to need whole (its pages walked and its records checked,
	// once after the server starts) before it answers 503 "checking" with
	// Retry-After; the check goes on, and a request after it has ended is
	// answered at once. Zero means DefaultCheckWait.
	CheckWait time.Duration

	// AccessLog, when not nil, receives one line per request in the Common
	// Log Format with the seconds taken appended:
	//   127.0.0.1 - - [01/Dec/2026:17:30:00 +0000] "GET /api/v1/runs HTTP/1.1" 200 512 0.000210
	// Lines are written whole, one at a time.
	AccessLog io.Writer
}

// Defaults of Options.
const (
	// DefaultMaxBodyBytes fits a batch of long agent turns (a 1,500-token
	// turn with token ids and logprobs is ~30 KB of JSON).
	DefaultMaxBodyBytes = 8 << 20
	// DefaultMaxPage bounds the memory one events request can take.
	DefaultMaxPage = 10000
	// DefaultCheckWait answers well inside the clients' timeouts (60 s)
	// and the server's own WriteTimeout, and waits out the check of a run
	// of a million nodes, in the page cache or read from this machine's
	// disk (some 11 s).
	DefaultCheckWait = 30 * time.Second
	// MinTokenLen is the shortest bearer token accepted: shorter ones are
	// guessable over a network.
	MinTokenLen = 16
)

// Validate reports the first option that makes no sense.
func (o *Options) Validate() error {
	switch {
	case o.MaxBodyBytes < 0:
		return fmt.Errorf("%w: MaxBodyBytes %d is negative", ErrInvalidOptions, o.MaxBodyBytes)
	case o.MaxPage < 0:
		return fmt.Errorf("%w: MaxPage %d is negative", ErrInvalidOptions, o.MaxPage)
	case o.Token != "" && len(o.Token) < MinTokenLen:
		return fmt.Errorf("%w: token is %d bytes, want at least %d", ErrInvalidOptions, len(o.Token), MinTokenLen)
	}
	return nil
}

func (o *Options) withDefaults() Options {
	c := *o
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxPage == 0 {
		c.MaxPage = DefaultMaxPage
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.CheckWait <= 0 {
		c.CheckWait = DefaultCheckWait
	}
	return c
}
