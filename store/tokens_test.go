package store_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// A token id of 2^31 or more is refused wherever ids enter the store — a
// turn's action or observation tokens, through AppendTurns and
// EncodeTurns alike, and a group's prompt tokens — with ErrInvalid naming
// the id, and the file is left exactly as it was. 2^31 − 1 is stored.
// Every length up to a few words and every position is tried, since the
// check reads two ids a word.
func TestTokenIDsAboveInt32AreRefused(t *testing.T) {
	db := storetest.Open(t)
	var node uint64
	update(t, db, func(tx *store.Tx) error {
		_, n, err := runWithRoot(tx)
		node = n.ID
		return err
	})
	appendTurn := func(tu model.Turn) error {
		return db.UpdateRun("r", func(r *store.RunTx) error {
			return r.AppendTurns(node, 0, tu)
		})
	}
	openGroup := func(prompt []uint32) error {
		return db.UpdateRun("r", func(r *store.RunTx) error {
			var err error
			_, err = r.OpenGroup(store.GroupSpec{Step: 2, PromptTokens: prompt})
			return err
		})
	}
	before := dumpDB(t, db)
	for n := 1; n <= 11; n++ {
		for at := range n {
			ids := make([]uint32, n)
			for i := range ids {
				ids[i] = uint32(i * 1000)
			}
			for _, wide := range []uint32{1 << 31, math.MaxUint32} {
				ids[at] = wide
				name := fmt.Sprintf("%d ids, %d at %d", n, wide, at)
				cases := []struct {
					what string
					err  error
				}{
					{"action token", appendTurn(model.Turn{Action: "a", ActionTokens: ids})},
					{"observation token", appendTurn(model.Turn{Action: "a", ObservationTokens: ids})},
					{"prompt token", openGroup(ids)},
				}
				_, encErr := store.EncodeTurns(model.Turn{Action: "a", ActionTokens: ids})
				cases = append(cases, struct {
					what string
					err  error
				}{"action token", encErr})
				for _, c := range cases {
					want := fmt.Sprintf("%s %d is %d", c.what, at, wide)
					if !errors.Is(c.err, model.ErrInvalid) || !strings.Contains(c.err.Error(), want) {
						t.Fatalf("%s, %s: %v, want ErrInvalid saying %q", name, c.what, c.err, want)
					}
				}
			}
		}
	}
	if after := dumpDB(t, db); !bytes.Equal(before, after) {
		t.Fatal("refused writes changed the file")
	}
	// The largest id that fits int32 is stored and read back.
	top := []uint32{0, store.MaxTokenID, 5}
	if err := appendTurn(model.Turn{Action: "a", ActionTokens: top, ObservationTokens: top}); err != nil {
		t.Fatal(err)
	}
	if err := openGroup(top); err != nil {
		t.Fatal(err)
	}
	inRun(t, db, false, "r", func(r *store.RunTx) error {
		tu, err := r.Turn(node, 0)
		if err != nil || tu.ActionTokens[1] != store.MaxTokenID || tu.ObservationTokens[1] != store.MaxTokenID {
			t.Errorf("turn with id 2^31-1: %+v, %v", tu, err)
		}
		gs, err := r.Groups(2)
		if err != nil || len(gs) != 1 || gs[0].PromptTokens[1] != store.MaxTokenID {
			t.Errorf("group with id 2^31-1: %+v, %v", gs, err)
		}
		return nil
	})
}
