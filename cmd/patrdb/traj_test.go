package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/store"
)

// trajGoldens are the golden cases of traj; remote_test.go runs them
// through a server too.
var trajGoldens = []goldenCase{
	{name: "traj", args: []string{"traj", "patr-4x4", "4"}},
	{name: "traj_json", args: []string{"traj", "patr-4x4", "4", "--json"}},
	{name: "traj_deep", args: []string{"traj", "patr-4x4", "11"}},
}

func TestTrajGolden(t *testing.T) { checkGoldens(t, trajGoldens) }

// The JSON trajectory is the store's, turn for turn, with one marker line
// per inherited prefix in the text.
func TestTrajMatchesStore(t *testing.T) {
	path := fixture(t)
	for _, node := range []string{"1", "4", "5", "11", "12"} {
		var out trajOutput
		if err := json.Unmarshal([]byte(cli(t, "--db", path, "traj", "patr-4x4", node, "--json").ok(t).stdout), &out); err != nil {
			t.Fatal(err)
		}
		o := store.DefaultOptions()
		o.ReadOnly = true
		db, err := store.Open(path, o)
		if err != nil {
			t.Fatal(err)
		}
		err = db.View(func(tx *store.Tx) error {
			r, _ := tx.Run("patr-4x4")
			want, err := r.Trajectory(out.Node.ID)
			if err != nil {
				return err
			}
			if len(out.Turns) != len(want) || out.Node.PathLen() != len(want) {
				t.Fatalf("node %s: %d turns, store has %d", node, len(out.Turns), len(want))
			}
			for i, w := range want {
				g := out.Turns[i]
				if g.Action != w.Action || g.Observation != w.Observation || g.Node != w.Node || g.Index != w.Index ||
					len(g.ActionLogprobs) != len(w.ActionLogprobs) || g.ActionTokens[0] != w.ActionTokens[0] || (i < out.Inherited) != (w.Node != out.Node.ID) {
					t.Errorf("node %s turn %d: %+v, store %+v", node, i, g, w)
				}
			}
			return nil
		})
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		text := cli(t, "--db", path, "traj", "patr-4x4", node).ok(t).stdout
		if got := strings.Count(text, "own turns begin"); got != len(out.Segments)-1 {
			t.Errorf("node %s: %d marker lines for %d segments", node, got, len(out.Segments))
		}
	}
}

func TestTrajErrors(t *testing.T) {
	path := fixture(t)
	cli(t, "--db", path, "traj", "patr-4x4", "99").fails(t, 1, "node 99 not found", "patr-4x4")
	cli(t, "--db", path, "traj", "grpo-4x4", "4").fails(t, 1, "node 4 not found", "grpo-4x4")
	cli(t, "--db", path, "traj", "patr-4x4", "0").fails(t, 2, `NODE "0"`)
	cli(t, "--db", path, "traj", "patr-4x4", "x").fails(t, 2, `NODE "x"`)
	cli(t, "--db", path, "traj", "patr-4x4", "-1").fails(t, 2)
}
