package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/patrdb/patrdb/model"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/patrdb/patrdb/client"
	"github.com/patrdb/patrdb/server"
)

// Read commands can answer from a live run's server instead of the file:
// the trainer (or `patrdb serve`) owns the file's lock, and a second
// process could otherwise only wait --timeout and fail. A command opts in
// with addRemoteFlags and reads through app.read / app.readRun
// (source.go), which ask app.remote for a client and fall back to the file:
//
//	rf := addRemoteFlags(app, cmd)                  // in newXCommand
//	...
//	err := a.readRun(rf, id, func(r runReader) error { ... })
//
// The server answers with the store's own records (api.RunSummary,
// model.Group, model.Node, model.PathTurn, ...), so a command gathers and
// renders both paths with the same code.

// remoteHelp ends the long help of every command that can read through a
// server.
const remoteHelp = `

While another process owns the file (a trainer serving it in-process, or
patrdb serve), this reads through that process's API instead: --server URL
(default $PATRDB_SERVER) names it; without it, the address the owner wrote
next to the file (<db>.serve) is used when that server answers for this
very file. The output is the same either way.`

// remoteFlags are --server and --token-file of one read command.
type remoteFlags struct {
	server    string
	tokenFile string
}

// addRemoteFlags registers --server (default $PATRDB_SERVER) and
// --token-file (default $PATRDB_TOKEN_FILE) on a read command.
func addRemoteFlags(app *App, cmd *cobra.Command) *remoteFlags {
	rf := &remoteFlags{}
	fl := cmd.Flags()
	fl.StringVar(&rf.server, "server", app.getenv("PATRDB_SERVER"), "read from the patrdb serve API at this URL instead of the file (default $PATRDB_SERVER)")
	fl.StringVar(&rf.tokenFile, "token-file", app.getenv("PATRDB_TOKEN_FILE"), "bearer token for --server (default $PATRDB_TOKEN_FILE)")
	return rf
}

// remoteTimeout bounds each API call of a read command unless --timeout
// is given.
const remoteTimeout = 30 * time.Second

// remote returns the client a read command should use, or nil to read the
// file itself. In order: --server (or $PATRDB_SERVER) when given; else the
// server the file's owner announced in <db>.serve, if it answers for this
// very file; else nil. A stale <db>.serve (its owner crashed) is ignored,
// so the command falls back to the file.
func (a *App) remote(ctx context.Context, rf *remoteFlags) (*client.Client, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	token := ""
	if rf != nil && rf.tokenFile != "" {
		var err error
		if token, err = server.LoadToken(rf.tokenFile); err != nil {
			return nil, usageErrorf("--token-file: %v", err)
		}
	}
	hc := &http.Client{Timeout: remoteTimeout}
	if a.timeoutSet {
		hc.Timeout = a.timeout
	}
	if rf != nil && rf.server != "" {
		u, err := url.Parse(rf.server)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usageErrorf("--server %q: want a URL such as http://127.0.0.1:7878", rf.server)
		}
		c := client.New(rf.server)
		c.HTTP, c.Token = hc, token
		return c, nil
	}
	dctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	base, err := server.Discover(dctx, a.dbPath, &http.Client{Timeout: a.timeout})
	if err != nil {
		return nil, nil // no live server: read the file
	}
	c := client.New(base)
	c.HTTP, c.Token = hc, token
	return c, nil
}

// remoteError maps an API error to the CLI's exit codes: a 404 is "not
// found" (exit 1), as from the file; anything else, a refused connection
// included, is exit 2 and names the server.
func (a *App) remoteError(c *client.Client, err error) error {
	if err == nil {
		return nil
	}
	var ce *codeError
	if errors.As(err, &ce) {
		return err // the command's own verdict (not found, usage)
	}
	if errors.Is(err, errFileOnly) {
		return usageErrorf("%v, not the server at %s (run it after the owner stops, or on a copy of the file)", err, c.Base)
	}
	var ae *client.APIError
	if errors.As(err, &ae) {
		if ae.Status == http.StatusNotFound {
			return notFoundErrorf("%s (from %s)", ae.Message, c.Base)
		}
		return &codeError{exitUsage, fmt.Errorf("server %s: %s", c.Base, ae.Message)}
	}
	if errors.Is(err, model.ErrNotFound) {
		return notFoundErrorf("%v", err)
	}
	return &codeError{exitUsage, fmt.Errorf("server %s: %v", c.Base, err)}
}
