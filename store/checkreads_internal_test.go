package store

import (
	"reflect"
	"testing"

	"github.com/patrdb/patrdb/model"
)

// Once the whole run has checked clean in a checked-mode transaction (a
// read with no narrow check ran it: ForEachGroup here), the run's reads
// are the plain ones: GroupNodes reads what it reads without walking a
// page or checking a record again, so a command that reads the whole run
// pays for the check once (stats on 200k nodes: 5.4 s → 2.3 s). What they
// return is what the plain reads return.
func TestReadsAfterAWholeCheckArePlain(t *testing.T) {
	db := openWithGroup(t, func(r *RunTx, group uint64) error {
		for i := 1; i <= 3; i++ {
			n, err := r.AddNode(NodeSpec{Step: 1, Group: group, Ordinal: i})
			if err != nil {
				return err
			}
			if err := r.AppendTurns(n.ID, 0, model.Turn{Action: "a", Observation: "o"}); err != nil {
				return err
			}
		}
		return nil
	})
	var plain [][]model.Node
	inRunR(t, db, false, func(r *RunTx) error {
		return r.ForEachGroup(0, func(g model.Group) error {
			ns, err := r.GroupNodes(g)
			plain = append(plain, ns)
			return err
		})
	})
	err := db.View(func(tx *Tx) error {
		if err := tx.CheckReads(); err != nil {
			return err
		}
		r, err := tx.Run("r")
		if err != nil {
			return err
		}
		var groups []model.Group
		if err := r.ForEachGroup(0, func(g model.Group) error { groups = append(groups, g); return nil }); err != nil {
			return err
		}
		if !r.chk.whole || r.chk.sound != nil {
			t.Fatalf("ForEachGroup in checked mode did not check the whole run: %v", r.chk.sound)
		}
		pages, records := r.chk.paths.Pages(), len(r.chk.done)
		var checked [][]model.Node
		for _, g := range groups {
			ns, err := r.GroupNodes(g)
			if err != nil {
				return err
			}
			checked = append(checked, ns)
		}
		if p, n := r.chk.paths.Pages(), len(r.chk.done); p != pages || n != records {
			t.Errorf("reads after the whole run checked clean walked %d pages and checked %d records again", p-pages, n-records)
		}
		if !reflect.DeepEqual(checked, plain) {
			t.Errorf("reads after the whole check: %v, the plain reads: %v", checked, plain)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
