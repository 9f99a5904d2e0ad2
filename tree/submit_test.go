package tree_test

import (
	"errors"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	"github.com/patrdb/patrdb/tree"
)

// A failure report whose error the store refuses (text that is not UTF-8)
// is refused by Submit itself with ErrInvalid — as a retry is, and as a
// branch with no attempt left is — and nothing is written.
func TestSubmitRefusesAFailureTheStoreRefuses(t *testing.T) {
	for _, attempts := range []int{1, 3} {
		db := storetest.Open(t)
		c := coordinator(t, db, "r", tree.DefaultConfig(), &tree.CoordinatorOptions{MaxAttempts: attempts})
		openStep(t, c, 1, tasks(1))
		l := lease(t, c, tree.LeaseRequest{Worker: "w", Max: 1})[0]
		before := dumpRun(t, db, "r")
		var subErr error
		err := db.Update(func(tx *store.Tx) error {
			_, subErr = c.Submit(tx, []rollout.Submission{{Lease: l.ID, Worker: "w", Node: l.Node, Error: "env \xff crashed"}})
			return subErr
		})
		if !errors.Is(subErr, model.ErrInvalid) || err == nil {
			t.Errorf("max attempts %d: a failure report that is not UTF-8: Submit %v, Update %v; want ErrInvalid", attempts, subErr, err)
		}
		if d := diffDump(dumpRun(t, db, "r"), before); d != "" {
			t.Errorf("max attempts %d: the refused report wrote: %s", attempts, d)
		}
	}
}
