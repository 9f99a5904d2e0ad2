package store_test

// Full-trajectory materialisation: a node's path is each ancestor's first
// Fork own turns, then its own, and every turn says which node stores it.

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// origin is where a trajectory turn is stored: (node, own index).
type origin struct {
	Node  uint64
	Index int
}

func TestTrajectoryAcrossForks(t *testing.T) {
	db := storetest.Open(t)
	// A(5) ─┬─ B fork 3 (4) ── E fork 2 (3) ─┬─ H fork 3 = E's last (2)
	//       │                               └─ I fork 1 (1)
	//       ├─ C fork 0 (2)
	//       └─ D fork 5 = A's last (1)
	// plus S, forked from A at 2 while A was still active and growing.
	ids := map[string]uint64{}
	update(t, db, func(tx *store.Tx) error {
		r, err := tx.CreateRun("r", nil, nil)
		if err != nil {
			return err
		}
		g, err := r.OpenGroup(store.GroupSpec{Step: 1})
		if err != nil {
			return err
		}
		add := func(name, parent string, fork, ordinal, turns int) error {
			n, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Parent: ids[parent], Fork: fork, Ordinal: ordinal})
			if err != nil {
				return fmt.Errorf("add %s: %w", name, err)
			}
			ids[name] = n.ID
			return r.AppendTurns(n.ID, 0, textTurns(name, turns)...)
		}
		expand := func(name string) error {
			return r.Route(ids[name], model.Decision{Action: model.ActionExpand, Rule: "max"})
		}
		if err := add("A", "", 0, 0, 3); err != nil {
			return err
		}
		// S forks from A at 2 while A is active; A then grows to 5 turns.
		if err := add("S", "A", 2, 9, 1); err != nil {
			return err
		}
		if err := r.AppendTurns(ids["A"], 3, textTurn("A3"), textTurn("A4")); err != nil {
			return err
		}
		for _, step := range []func() error{
			func() error { return expand("A") },
			func() error { return add("B", "A", 3, 0, 4) },
			func() error { return add("C", "A", 0, 1, 2) },
			func() error { return add("D", "A", 5, 2, 1) },
			func() error { return expand("B") },
			func() error { return add("E", "B", 2, 0, 3) },
			func() error { return expand("E") },
			func() error { return add("H", "E", 3, 0, 2) },
			func() error { return add("I", "E", 1, 1, 1) },
		} {
			if err := step(); err != nil {
				return err
			}
		}
		return nil
	})
	type want struct {
		actions []string
		origins []origin
		path    []model.Segment
		base    int
		depth   int
	}
	seg := func(name string, count int) model.Segment { return model.Segment{Node: ids[name], Count: count} }
	// expect builds the wanted trajectory from (node, count) segments.
	expect := func(segs ...model.Segment) want {
		var w want
		names := map[uint64]string{}
		for k, v := range ids {
			names[v] = k
		}
		for _, s := range segs {
			for i := range s.Count {
				w.actions = append(w.actions, fmt.Sprintf("act %s%d", names[s.Node], i))
				w.origins = append(w.origins, origin{s.Node, i})
			}
		}
		w.path = segs
		last := segs[len(segs)-1]
		w.base = len(w.actions) - last.Count
		w.depth = len(segs) - 1
		return w
	}
	cases := map[string]want{
		"A": expect(seg("A", 5)),
		"S": expect(seg("A", 2), seg("S", 1)),
		"B": expect(seg("A", 3), seg("B", 4)),
		"C": expect(seg("A", 0), seg("C", 2)), // fork at 0: nothing inherited, the root still on the path
		"D": expect(seg("A", 5), seg("D", 1)), // fork at the parent's last turn
		"E": expect(seg("A", 3), seg("B", 2), seg("E", 3)),
		"H": expect(seg("A", 3), seg("B", 2), seg("E", 3), seg("H", 2)), // three levels of forks
		"I": expect(seg("A", 3), seg("B", 2), seg("E", 1), seg("I", 1)),
	}
	check := func(label string, db *store.DB) {
		inRun(t, db, false, "r", func(r *store.RunTx) error {
			for name, w := range cases {
				traj, err := r.Trajectory(ids[name])
				if err != nil {
					return fmt.Errorf("trajectory of %s: %w", name, err)
				}
				var actions []string
				var origins []origin
				for _, pt := range traj {
					actions = append(actions, pt.Action)
					origins = append(origins, origin{pt.Node, pt.Index})
					// The whole turn, not only its action, is the stored one.
					if want := textTurn(pt.Action[len("act "):]); !reflect.DeepEqual(pt.Turn, want) {
						t.Errorf("%s: %s: turn %+v, want %+v", label, name, pt.Turn, want)
					}
				}
				if !reflect.DeepEqual(actions, w.actions) || !reflect.DeepEqual(origins, w.origins) {
					t.Errorf("%s: trajectory of %s\n got %v %v\nwant %v %v", label, name, actions, origins, w.actions, w.origins)
				}
				path, err := r.Path(ids[name])
				if err != nil {
					return err
				}
				if !reflect.DeepEqual(path, w.path) {
					t.Errorf("%s: Path(%s) = %v, want %v", label, name, path, w.path)
				}
				n, err := r.Node(ids[name])
				if err != nil {
					return err
				}
				if n.Base != w.base || n.Depth != w.depth || n.PathLen() != len(w.actions) {
					t.Errorf("%s: %s base %d depth %d pathlen %d, want %d %d %d", label, name, n.Base, n.Depth, n.PathLen(), w.base, w.depth, len(w.actions))
				}
			}
			if _, err := r.Trajectory(999); !errors.Is(err, model.ErrNotFound) {
				t.Errorf("%s: trajectory of an unknown node: %v, want ErrNotFound", label, err)
			}
			if _, err := r.Path(999); !errors.Is(err, model.ErrNotFound) {
				t.Errorf("%s: path of an unknown node: %v, want ErrNotFound", label, err)
			}
			return nil
		})
	}
	check("open", db)
	check("warm", db) // every ancestor now from the LRU
	db.Close()
	// After reopening, through a cache too small to hold one path.
	o := storetest.Options()
	o.CacheNodes = 2
	check("reopened, tiny cache", storetest.OpenPath(t, db.Path(), o))
}

// Reading a trajectory inside the writing transaction sees the turns and
// nodes that transaction added.
func TestTrajectoryInsideWriteTx(t *testing.T) {
	db := storetest.Open(t)
	update(t, db, func(tx *store.Tx) error {
		r, err := tx.CreateRun("r", nil, nil)
		if err != nil {
			return err
		}
		g, err := r.OpenGroup(store.GroupSpec{Step: 1})
		if err != nil {
			return err
		}
		root, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID})
		if err != nil {
			return err
		}
		if err := r.AppendTurns(root.ID, 0, textTurns("r", 2)...); err != nil {
			return err
		}
		kid, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Parent: root.ID, Fork: 2})
		if err != nil {
			return err
		}
		if err := r.AppendTurns(kid.ID, 0, textTurn("k0")); err != nil {
			return err
		}
		traj, err := r.Trajectory(kid.ID)
		if err != nil {
			return err
		}
		var got []string
		for _, pt := range traj {
			got = append(got, pt.Action)
		}
		if want := []string{"act r0", "act r1", "act k0"}; !reflect.DeepEqual(got, want) {
			t.Errorf("trajectory in the writing tx = %v, want %v", got, want)
		}
		return nil
	})
}
