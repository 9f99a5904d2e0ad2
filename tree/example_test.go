package tree_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/tree"
)

// A walk to cell 3: the policy always steps right, the episode ends there
// with reward 1, and the scorer rates progress.
type rightPolicy struct{}

func (rightPolicy) ActBatch(_ context.Context, reqs []rollout.ActRequest) ([]rollout.Move, error) {
	out := make([]rollout.Move, len(reqs))
	for i := range reqs {
		out[i] = rollout.Move{Text: "right", Tokens: []uint32{1}, Logprobs: []float32{-0.1}}
	}
	return out, nil
}

type walkEnv struct{}

type walk struct{ pos int }

func (walkEnv) Reset(context.Context, rollout.Task) (rollout.Episode, error) { return &walk{}, nil }

func (walkEnv) Restore(_ context.Context, _ rollout.Task, hist []model.Turn, _ []byte) (rollout.Episode, error) {
	return &walk{pos: len(hist)}, nil
}

func (w *walk) Step(context.Context, rollout.TurnKey, rollout.Move) (rollout.Observation, error) {
	w.pos++
	if w.pos == 3 {
		return rollout.Observation{Text: "goal", Reward: 1, Done: true}, nil
	}
	return rollout.Observation{Text: fmt.Sprint("at ", w.pos)}, nil
}

func (w *walk) State() []byte { return nil }

type progress struct{}

func (progress) Score(_ context.Context, _ rollout.Task, hist []model.Turn) (float64, error) {
	return float64(len(hist)) / 3, nil
}

// Grow one rollout step into a store: one tree per task, every turn,
// score, decision and advantage recorded.
func ExampleEngine() {
	dir, _ := os.MkdirTemp("", "patrdb-example-")
	defer os.RemoveAll(dir)
	db, err := store.Open(filepath.Join(dir, "run.db"), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()

	cfg := tree.DefaultConfig()
	cfg.B0, cfg.K = 2, 2
	conf, _ := json.Marshal(map[string]any{"tree": cfg})
	if err := db.Update(func(tx *store.Tx) error { _, err := tx.CreateRun("demo", conf, nil); return err }); err != nil {
		fmt.Println(err)
		return
	}
	e, err := tree.New(db, "demo", tree.Options{Config: cfg, BatchPolicy: rightPolicy{}, Env: walkEnv{}, Scorer: progress{}})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := e.Rollout(context.Background(), 1, []rollout.Task{{ID: "walk", Prompt: "reach cell 3"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	g := res.Groups[0]
	fmt.Printf("%d turns in %d policy calls; group %d: %d leaves, mean reward %.1f\n",
		res.EnvSteps, res.PolicyCalls, g.Group.ID, len(g.Leaves), g.Advantages[0].Mean)
	// Output: 8 turns in 3 policy calls; group 1: 4 leaves, mean reward 1.0
}
