package store

import (
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
