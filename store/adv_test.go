package store_test

import (
	"errors"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// Writing a leaf's advantage reads the group's first advantage record (the
// group's zero-variance count follows it); when that record is damaged the
// write is refused as corrupt instead of miscounting.
func TestPutAdvantageRefusesDamagedGroup(t *testing.T) {
	db := storetest.OpenPath(t, goodFile(t), syncOptions())
	f := readFixture(t, db)
	err := db.Update(func(tx *store.Tx) error {
		b := rawBucket(t, tx, "r1", "adv")
		k, _ := b.Cursor().First()
		if k == nil {
			t.Fatal("the fixture has no advantage records")
		}
		if err := b.Put(append([]byte(nil), k...), []byte{0x01, 0, 0, 0, 0, 0x90}); err != nil {
			t.Fatal(err)
		}
		r, err := tx.Run("r1")
		if err != nil {
			t.Fatal(err)
		}
		return r.PutAdvantage(model.Advantage{Step: fixtureStep, Group: f.G1.ID, Leaf: f.C, Outcome: 1, Total: 1,
			Mean: 0.5, Std: 0.5, Advantage: 1})
	})
	if !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("PutAdvantage next to a damaged record: %v, want ErrCorrupt", err)
	}
}
