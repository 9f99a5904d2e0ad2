package server_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/patrdb/patrdb/model"
	"net"
	"os"
	"path/filepath"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/client"
	"github.com/patrdb/patrdb/runconfig"
	"github.com/patrdb/patrdb/server"
	"github.com/patrdb/patrdb/store"
)

// Serve a store over HTTP on a loopback address, the only kind that may
// serve without a token (CheckBind), and talk to it with the Go client: a
// run created through the API records the defaults under the members it was
// not given, and a run that does not exist is model.ErrNotFound on the
// client side too.
func ExampleNewHandler() {
	dir, _ := os.MkdirTemp("", "patrdb-serve-")
	defer os.RemoveAll(dir)
	db, err := store.Open(filepath.Join(dir, "runs.db"), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()

	fmt.Println("public without a token:", server.CheckBind("0.0.0.0:7878", "") != nil)
	h, err := server.NewHandler(db, server.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a free loopback port
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := server.NewHTTPServer(ln.Addr().String(), h)
	go srv.Serve(ln)
	defer srv.Close()

	ctx := context.Background()
	c := client.New("http://" + ln.Addr().String())
	run, err := c.CreateRun(ctx, api.CreateRunRequest{ID: "exp-1", Tree: []byte(`{"b0":4,"k":3}`)})
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg, _, _ := runconfig.Of(run.Record())
	fmt.Printf("created %s: b0 %d, k %d, m %d (default), rubric lambda %v (default)\n", run.ID, cfg.Tree.B0, cfg.Tree.K, cfg.Tree.M, cfg.Rubric.Lambda)
	runs, err := c.Runs(ctx)
	fmt.Println("runs:", len(runs), err)
	_, err = c.Run(ctx, "nope")
	fmt.Println("missing run is ErrNotFound:", errors.Is(err, model.ErrNotFound))
	// Output:
	// public without a token: true
	// created exp-1: b0 4, k 3, m 2 (default), rubric lambda 0.1 (default)
	// runs: 1 <nil>
	// missing run is ErrNotFound: true
}
