package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/client"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/server"
	"github.com/patrdb/patrdb/store"
)

// Serve a store file over HTTP (here in-process; in production `patrdb
// serve`), then create a run, open a step and lease its branches as a
// worker would. Only the server side of the example imports server.
func Example() {
	dir, _ := os.MkdirTemp("", "patrdb-client-")
	defer os.RemoveAll(dir)
	db, err := store.Open(filepath.Join(dir, "runs.db"), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	h, err := server.NewHandler(db, server.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	ctx := context.Background()
	c := client.New(srv.URL)
	run, err := c.CreateRun(ctx, api.CreateRunRequest{ID: "exp-1", Tree: []byte(`{"b0":2,"k":3}`)})
	if err != nil {
		fmt.Println(err)
		return
	}
	v, _ := c.APIVersion(ctx)
	fmt.Println("created", run.ID, "on API", v[:2]+"x")
	step, err := c.OpenStep(ctx, "exp-1", api.OpenStepRequest{Step: 1, Tasks: []rollout.Task{{ID: "t1", Prompt: "Reach the goal."}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("group roots:", len(step.Groups[0].Roots))
	leases, err := c.Lease(ctx, "exp-1", api.LeaseRequest{Worker: "w1", Step: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("leased %d branches, %d turns each, then a score: %v\n", len(leases), leases[0].Turns, leases[0].Score)
	_, err = c.Run(ctx, "nope")
	fmt.Println("a missing run is model.ErrNotFound:", errors.Is(err, model.ErrNotFound))
	// Output:
	// created exp-1 on API 1.x
	// group roots: 2
	// leased 2 branches, 3 turns each, then a score: true
	// a missing run is model.ErrNotFound: true
}
