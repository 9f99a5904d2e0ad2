package store

import (
	"errors"
	"reflect"
	"testing"

	"github.com/patrdb/patrdb/model"
)

// A change to a node the transaction already changed costs the store no
// allocation on top of bbolt's Put of its event: the record is changed in
// place (editable), the event and the record's payload are encoded into
// the transaction's chunks, and the slices the change leaves alone
// (scores, decisions, turn ranges, env state) are not copied. Replacing a
// score copies the scores once.
func TestNodeChangeAllocations(t *testing.T) {
	openWithGroup(t, func(r *RunTx, group uint64) error {
		n, err := r.AddNode(NodeSpec{Step: 1, Group: group, EnvState: []byte("env")})
		if err != nil {
			return err
		}
		if err := r.AppendTurns(n.ID, 0, model.Turn{Action: "a", ActionTokens: []uint32{1}}); err != nil {
			return err
		}
		if err := r.Score(n.ID, model.Score{Interval: 0, Turn: 1, Value: 0.5}); err != nil {
			return err
		}
		if err := r.Route(n.ID, model.Decision{Interval: 0, Action: model.ActionSurvive}); err != nil {
			return err
		}
		events, err := r.bucket(bEvents)
		if err != nil {
			return err
		}
		val := encodeNode(&n)
		key := uint64(1 << 40) // past every event's key
		put := testing.AllocsPerRun(200, func() {
			key++
			if err := events.Put(r.tx.putKey1(key), val); err != nil {
				t.Fatal(err)
			}
		})
		reward := 0.0
		rewardAllocs := testing.AllocsPerRun(200, func() {
			reward += 0.001
			if err := r.SetReward(n.ID, reward); err != nil {
				t.Fatal(err)
			}
		})
		scoreAllocs := testing.AllocsPerRun(200, func() {
			reward += 0.001
			if err := r.Score(n.ID, model.Score{Interval: 0, Turn: 1, Value: reward}); err != nil {
				t.Fatal(err)
			}
		})
		if rewardAllocs > put || scoreAllocs > put+1 {
			t.Errorf("allocations per change: SetReward %v, Score %v; bbolt's Put alone %v", rewardAllocs, scoreAllocs, put)
		}
		return nil
	})
}

// A change to a node copies only what it changes (Node.edit): the record
// the cache shares with other transactions must still read as it was when
// a later transaction replaces a score or decision of the same interval,
// adds them, extends its turn ranges or changes its env state.
func TestNodeChangesLeaveSharedRecordAlone(t *testing.T) {
	var id uint64
	turn := model.Turn{Action: "a", ActionTokens: []uint32{1}}
	db := openWithGroup(t, func(r *RunTx, group uint64) error {
		n, err := r.AddNode(NodeSpec{Step: 1, Group: group, EnvState: []byte("env")})
		if err != nil {
			return err
		}
		id = n.ID
		if err := r.AppendTurns(id, 0, turn, turn); err != nil {
			return err
		}
		if err := r.Score(id, model.Score{Interval: 0, Turn: 2, Value: 0.25}); err != nil {
			return err
		}
		return r.Route(id, model.Decision{Interval: 0, Action: model.ActionSurvive, Score: 0.25})
	})
	inRunR(t, db, false, func(r *RunTx) error {
		shared, err := r.nodeRef(id)
		if err != nil {
			return err
		}
		before := cloneNode(shared)
		inRunR(t, db, true, func(w *RunTx) error {
			if p, err := w.nodeRef(id); err != nil || p != shared {
				t.Fatalf("the writer does not read the shared record (%v): the test proves nothing", err)
			}
			for _, change := range []func() error{
				func() error { return w.Score(id, model.Score{Interval: 0, Turn: 2, Value: 0.75}) },
				func() error { return w.Score(id, model.Score{Interval: 1, Turn: 3, Value: 0.5}) },
				func() error {
					return w.Route(id, model.Decision{Interval: 0, Action: model.ActionSurvive, Score: 0.75})
				},
				func() error { return w.Route(id, model.Decision{Interval: 1, Action: model.ActionSurvive, Score: 0.5}) },
				func() error { return w.AppendTurns(id, 2, turn) },
				func() error { return w.SetEnvState(id, []byte("ENV")) },
			} {
				if err := change(); err != nil {
					return err
				}
			}
			return nil
		})
		if !reflect.DeepEqual(*shared, before) {
			t.Errorf("shared record changed under its reader:\n got %+v\nwant %+v", *shared, before)
		}
		return nil
	})
	inRunR(t, db, false, func(r *RunTx) error {
		n, err := r.Node(id)
		if err != nil {
			return err
		}
		want := model.Node{Turns: 3, TurnRanges: model.TurnRanges{{Seq: 1, Count: 3}},
			Scores:    []model.Score{{Interval: 0, Turn: 2, Value: 0.75}, {Interval: 1, Turn: 3, Value: 0.5}},
			Decisions: []model.Decision{{Interval: 0, Action: model.ActionSurvive, Score: 0.75}, {Interval: 1, Action: model.ActionSurvive, Score: 0.5}},
			EnvState:  []byte("ENV")}
		got := model.Node{Turns: n.Turns, TurnRanges: n.TurnRanges, Scores: n.Scores, Decisions: n.Decisions, EnvState: n.EnvState}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("after the changes:\n got %+v\nwant %+v", got, want)
		}
		return nil
	})
}

// Several changes to one node in one transaction change the transaction's
// own version in place: each event must still carry the node as that
// change left it, and a refused change must leave it as it was.
func TestNodeChangesInOneTransaction(t *testing.T) {
	var id uint64
	db := openWithGroup(t, func(r *RunTx, group uint64) error {
		n, err := r.AddNode(NodeSpec{Step: 1, Group: group})
		if err != nil {
			return err
		}
		id = n.ID
		turn := model.Turn{Action: "a", ActionTokens: []uint32{1}}
		for _, change := range []func() error{
			func() error { return r.AppendTurns(id, 0, turn) },
			func() error { return r.Score(id, model.Score{Interval: 0, Turn: 1, Value: 0.25}) },
			func() error { return r.AppendTurns(id, 1, turn) },
			func() error { return r.Score(id, model.Score{Interval: 0, Turn: 2, Value: 0.75}) },
			func() error { return r.SetReward(id, 1) },
		} {
			if err := change(); err != nil {
				return err
			}
		}
		return nil
	})
	err := db.Update(func(tx *Tx) error {
		r, err := tx.Run("r")
		if err != nil {
			return err
		}
		if err := r.SetReward(id, 2); err != nil {
			return err
		}
		before, err := r.Node(id)
		if err != nil {
			return err
		}
		if err := r.SetNodeStatus(id, model.NodeActive); err == nil {
			t.Fatal("active -> active was accepted")
		}
		if after, err := r.Node(id); err != nil || !reflect.DeepEqual(after, before) {
			t.Errorf("a refused change left the node changed (%v):\n got %+v\nwant %+v", err, after, before)
		}
		return nil
	})
	if !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("the transaction with a refused change returned %v, want ErrInvalid", err)
	}
	type seen struct {
		turns  int
		scores []model.Score
		reward bool
	}
	var got []seen
	inRunR(t, db, false, func(r *RunTx) error {
		return r.Events(0, func(e model.Event) error {
			if e.Node != id || e.Kind == model.EvTurns {
				return nil
			}
			var n model.Node
			if err := DecodePayload(e, &n); err != nil {
				return err
			}
			got = append(got, seen{n.Turns, n.Scores, n.HasReward})
			return nil
		})
	})
	first, second := []model.Score{{Interval: 0, Turn: 1, Value: 0.25}}, []model.Score{{Interval: 0, Turn: 2, Value: 0.75}}
	want := []seen{{0, nil, false}, {1, first, false}, {2, second, false}, {2, second, true}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("node events:\n got %+v\nwant %+v", got, want)
	}
}
