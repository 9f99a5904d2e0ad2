package store_test

// The frontier (what a resume continues) always equals the set of active
// nodes, and writes a trainer repeats after a crash replace instead of
// duplicating.

import (
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

func TestFrontierFollowsStatus(t *testing.T) {
	db := storetest.Open(t)
	var g model.Group
	roots := make([]uint64, 4)
	update(t, db, func(tx *store.Tx) (err error) {
		r, err := tx.CreateRun("r", nil, nil)
		if err != nil {
			return err
		}
		other, err := tx.CreateRun("other", nil, nil) // its nodes must not show up in r's frontier
		if err != nil {
			return err
		}
		og, err := other.OpenGroup(store.GroupSpec{Step: 1})
		if err != nil {
			return err
		}
		if _, err := other.AddNode(store.NodeSpec{Step: 1, Group: og.ID}); err != nil {
			return err
		}
		if g, err = r.OpenGroup(store.GroupSpec{Step: 1}); err != nil {
			return err
		}
		for i := range roots {
			n, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Ordinal: i})
			if err != nil {
				return err
			}
			roots[i] = n.ID
			if err := r.AppendTurns(n.ID, 0, textTurns("t", 2)...); err != nil {
				return err
			}
		}
		return nil
	})
	frontier := func(label string, want []uint64) {
		t.Helper()
		inRun(t, db, false, "r", func(r *store.RunTx) error {
			ids, err := r.Frontier()
			if err != nil {
				return err
			}
			nodes, err := r.FrontierNodes()
			if err != nil {
				return err
			}
			if len(ids) == 0 {
				ids = nil
			}
			if !reflect.DeepEqual(ids, want) {
				t.Errorf("%s: frontier = %v, want %v", label, ids, want)
			}
			if len(nodes) != len(ids) {
				t.Fatalf("%s: FrontierNodes has %d records for %d ids", label, len(nodes), len(ids))
			}
			for i, n := range nodes {
				if n.ID != ids[i] || n.Status != model.NodeActive {
					t.Errorf("%s: FrontierNodes[%d] = %+v", label, i, n)
				}
			}
			return nil
		})
	}
	do := func(fn func(r *store.RunTx) error) { t.Helper(); inRun(t, db, true, "r", fn) }
	r1, r2, r3, r4 := roots[0], roots[1], roots[2], roots[3]
	frontier("four roots", []uint64{r1, r2, r3, r4})

	do(func(r *store.RunTx) error { return r.Route(r1, model.Decision{Action: model.ActionSurvive}) })
	frontier("r1 survives", []uint64{r1, r2, r3, r4})

	do(func(r *store.RunTx) error { return r.Route(r2, model.Decision{Action: model.ActionPrune}) })
	frontier("r2 pruned", []uint64{r1, r3, r4})

	var c1, c2 uint64
	do(func(r *store.RunTx) error {
		if err := r.Route(r3, model.Decision{Action: model.ActionExpand, Children: 2}); err != nil {
			return err
		}
		for i, dst := range []*uint64{&c1, &c2} {
			n, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Parent: r3, Fork: 2, Ordinal: i})
			if err != nil {
				return err
			}
			*dst = n.ID
			if err := r.AppendTurns(n.ID, 0, textTurn("c")); err != nil {
				return err
			}
		}
		return nil
	})
	frontier("r3 expanded into c1 c2", []uint64{r1, r4, c1, c2})

	do(func(r *store.RunTx) error { return r.SetNodeStatus(c1, model.NodeCompleted) })
	frontier("c1 completed", []uint64{r1, r4, c2})

	do(func(r *store.RunTx) error { return r.SetNodeStatus(r4, model.NodeFailed) })
	frontier("r4 failed", []uint64{r1, c2})

	do(func(r *store.RunTx) error { return r.SetNodeStatus(r4, model.NodeActive) })
	frontier("r4 retried", []uint64{r1, r4, c2})
	inRun(t, db, false, "r", func(r *store.RunTx) error {
		n, err := r.Node(r4)
		if err != nil {
			return err
		}
		if n.Attempt != 1 || n.Turns != 2 {
			t.Errorf("retried node = attempt %d turns %d, want attempt 1 with its 2 turns kept", n.Attempt, n.Turns)
		}
		return nil
	})

	// Several changes in one transaction; the frontier read inside it is
	// already the new one.
	do(func(r *store.RunTx) error {
		if err := r.SetNodeStatus(r1, model.NodeTruncated); err != nil {
			return err
		}
		if err := r.SetNodeStatus(r4, model.NodeCompleted); err != nil {
			return err
		}
		ids, err := r.Frontier()
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(ids, []uint64{c2}) {
			t.Errorf("frontier inside the writing tx = %v, want [%d]", ids, c2)
		}
		return r.SetNodeStatus(c2, model.NodeCompleted)
	})
	frontier("all final", nil)

	db.Close()
	db = storetest.OpenPath(t, db.Path(), storetest.Options())
	frontier("after reopen", nil)
	inRun(t, db, true, "r", func(r *store.RunTx) error { return r.CloseGroup(1, g.ID) })
	inRun(t, db, false, "other", func(r *store.RunTx) error {
		ids, err := r.Frontier()
		if err != nil || len(ids) != 1 {
			t.Errorf("other run's frontier = %v, %v", ids, err)
		}
		return nil
	})
}

// A trainer that crashed mid-interval rewrites the same turns, scores and
// routing decisions; they replace what is there.
func TestRewritesReplace(t *testing.T) {
	db := storetest.Open(t)
	f := buildFixture(t, db)
	node := f.B // active, 2 turns
	inRun(t, db, true, f.Run, func(r *store.RunTx) error {
		if err := r.AppendTurns(node, 0, textTurn("b0-again")); err != nil {
			return err
		}
		if n, err := r.Node(node); err != nil || n.Turns != 2 {
			t.Errorf("after rewriting turn 0 the node has %d turns (%v), want 2", n.Turns, err)
		}
		if err := r.AppendTurns(node, 1, textTurn("b1-again"), textTurn("b2")); err != nil {
			return err
		}
		// Same interval twice: the second score and decision replace the first.
		if err := r.Score(node, model.Score{Interval: 1, Turn: 3, Value: 0.2}); err != nil {
			return err
		}
		if err := r.Score(node, model.Score{Interval: 1, Turn: 3, Value: 0.9}); err != nil {
			return err
		}
		if err := r.Route(node, model.Decision{Interval: 1, Action: model.ActionSurvive, Score: 0.2}); err != nil {
			return err
		}
		return r.Route(node, model.Decision{Interval: 1, Action: model.ActionSurvive, Score: 0.9})
	})
	inRun(t, db, true, f.Run, func(r *store.RunTx) error { // and again in a later transaction
		if err := r.AppendTurns(node, 2, textTurn("b2-final")); err != nil {
			return err
		}
		return r.Score(node, model.Score{Interval: 1, Turn: 3, Value: 0.8})
	})
	inRun(t, db, false, f.Run, func(r *store.RunTx) error {
		n, err := r.Node(node)
		if err != nil {
			return err
		}
		if n.Turns != 3 {
			t.Errorf("turn count = %d, want 3", n.Turns)
		}
		if len(n.Scores) != 1 || n.Scores[0].Value != 0.8 {
			t.Errorf("scores = %+v, want one score 0.8", n.Scores)
		}
		if len(n.Decisions) != 1 || n.Decisions[0].Score != 0.9 {
			t.Errorf("decisions = %+v, want one decision with score 0.9", n.Decisions)
		}
		turns, err := r.Turns(node)
		if err != nil {
			return err
		}
		var got []string
		for _, tn := range turns {
			got = append(got, tn.Action)
		}
		if want := []string{"act b0-again", "act b1-again", "act b2-final"}; !reflect.DeepEqual(got, want) {
			t.Errorf("turns = %v, want %v", got, want)
		}
		return nil
	})
	// Stored once each: the raw turns bucket holds exactly 3 keys for the
	// node (a duplicate would be a second key, not a changed value).
	view(t, db, func(tx *store.Tx) error {
		keys := 0
		c := rawBucket(t, tx, f.Run, "turns").Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if binary.BigEndian.Uint64(k[8:]) == node { // seq|node
				keys++
			}
		}
		if keys != 3 {
			t.Errorf("turns bucket holds %d keys for the node, want 3", keys)
		}
		return nil
	})
}
