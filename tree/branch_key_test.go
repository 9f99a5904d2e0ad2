package tree

import (
	"encoding/binary"
	"hash/fnv"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// TurnKey.Branch is FNV-1a over the group id and the ordinals from the root
// down, each 8 bytes little-endian: policies seed from it, so the same tree
// position must give the same key in every run and every version.
func TestBranchKeyHashesOrdinalsRootDown(t *testing.T) {
	db := storetest.Open(t)
	err := db.Update(func(tx *store.Tx) error {
		r, err := tx.CreateRun("k", nil, nil)
		if err != nil {
			return err
		}
		g, err := r.OpenGroup(store.GroupSpec{Step: 1})
		if err != nil {
			return err
		}
		if _, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID}); err != nil {
			return err
		}
		root, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Ordinal: 1})
		if err != nil {
			return err
		}
		if err := r.AppendTurns(root.ID, 0, model.Turn{Action: "a", Observation: "o"}); err != nil {
			return err
		}
		child, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Parent: root.ID, Fork: 1, Ordinal: 0})
		if err != nil {
			return err
		}
		grand, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Parent: child.ID, Ordinal: 2})
		if err != nil {
			return err
		}
		great, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Parent: grand.ID, Ordinal: 3})
		if err != nil {
			return err
		}
		want := func(ords ...uint64) uint64 {
			h := fnv.New64a()
			for _, x := range append([]uint64{g.ID}, ords...) {
				h.Write(binary.LittleEndian.AppendUint64(nil, x))
			}
			return h.Sum64()
		}
		for _, c := range []struct {
			n    model.Node
			want uint64
		}{{root, want(1)}, {child, want(1, 0)}, {grand, want(1, 0, 2)}, {great, want(1, 0, 2, 3)}} {
			got, err := branchKeyOf(r, c.n)
			if err != nil {
				return err
			}
			if got != c.want {
				t.Errorf("node %d (depth %d): branch key %x, want %x", c.n.ID, c.n.Depth, got, c.want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
