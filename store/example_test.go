package store_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/patrdb/patrdb/model"

	"github.com/patrdb/patrdb/store"
)

// Open a store, write a turn in one transaction, and see a bad write
// refused with a typed error that leaves the file as it was.
func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "patrdb-example-")
	defer os.RemoveAll(dir)
	db, err := store.Open(filepath.Join(dir, "run.db"), nil) // nil: DefaultOptions()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	var node uint64
	err = db.Update(func(tx *store.Tx) error {
		r, err := tx.CreateRun("exp-1", []byte(`{"tree":{"b0":4}}`), nil)
		if err != nil {
			return err
		}
		g, err := r.OpenGroup(store.GroupSpec{Step: 1, Task: "q-17", Prompt: "list the files"})
		if err != nil {
			return err
		}
		n, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID})
		if err != nil {
			return err
		}
		node = n.ID
		return r.AppendTurns(n.ID, 0, model.Turn{Action: "ls", ActionTokens: []uint32{4, 9}, ActionLogprobs: []float32{-0.1, -0.3},
			Observation: "a.go b.go", PolicyVersion: 1})
	})
	fmt.Println("first write:", err)
	err = db.UpdateRun("exp-1", func(r *store.RunTx) error { // Update, then Tx.Run
		return r.AppendTurns(node, 1, model.Turn{Action: "cat", ActionTokens: []uint32{7}, ActionLogprobs: []float32{0.5}})
	})
	fmt.Println("positive logprob refused:", errors.Is(err, model.ErrInvalid))
	_ = db.ViewRun("exp-1", func(r *store.RunTx) error {
		traj, _ := r.Trajectory(node)
		fmt.Printf("%d turn stored: %s → %s\n", len(traj), traj[0].Action, traj[0].Observation)
		return nil
	})
	// Output:
	// first write: <nil>
	// positive logprob refused: true
	// 1 turn stored: ls → a.go b.go
}
