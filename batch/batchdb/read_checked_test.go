package batchdb_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/patrdb/patrdb/batch"
	"github.com/patrdb/patrdb/batch/batchdb"
	"github.com/patrdb/patrdb/batch/internal/batchtest"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// A checked read (Tx.CheckReads) of a batch checks what it reads, so damage on the batch's
// way — a group record, an advantage record, a node of a group read, a
// turn on a row's path — is a
// *store.CorruptError before a row is built, while damage elsewhere in the
// run (another step, a group not chosen) does not stop the batch. Bad
// options and a chosen group not in the step are refused as ReadInto
// refuses them.
func TestCheckedReadOfABatch(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.patrdb")
	db := storetest.OpenPath(t, filepath.Join(dir, "built.patrdb"), storetest.Options())
	batchtest.BuildLLM(t, db, "llm", batchtest.LLMSpec{Steps: 3, Groups: 2, Roots: 2, Depth: 2, MaxTurns: 3, Tokens: 8, Seed: 7})
	var g1, g2 []model.Group // step 1's groups, step 2's
	var nodes [][2][]byte    // the inner nodes of g1[0] below its roots: key, value
	var adv []byte           // an advantage record of g2[1]
	var turn []byte          // the first turn of a root of g1[0]: on every row's path
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run("llm")
		if err != nil {
			return err
		}
		if g1, err = r.Groups(1); err != nil {
			return err
		}
		if g2, err = r.Groups(2); err != nil {
			return err
		}
		b := storetest.BoltTx(tx).Bucket([]byte("runs")).Bucket([]byte("llm"))
		ns, err := r.GroupNodes(g1[0])
		if err != nil {
			return err
		}
		for _, n := range ns {
			if n.Parent == 0 && turn == nil && len(n.TurnRanges) > 0 {
				turn = binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, n.TurnRanges[0].Seq), n.ID)
			}
			if n.Parent == 0 || (n.Status != model.NodeExpanded && n.Status != model.NodeFailed) {
				continue // roots are read with the group record, leaves with their advantages
			}
			k := binary.BigEndian.AppendUint64(nil, n.ID)
			nodes = append(nodes, [2][]byte{k, bytes.Clone(b.Bucket([]byte("nodes")).Get(k))})
		}
		prefix := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, 2), g2[1].ID)
		k, _ := b.Bucket([]byte("adv")).Cursor().Seek(prefix)
		if !bytes.HasPrefix(k, prefix) {
			t.Fatalf("no advantage record of group %d", g2[1].ID)
		}
		adv = bytes.Clone(k)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Compacted, so that no older version of a record lingers in a free
	// page and each record's bytes occur in the file once.
	if err := store.Compact(db, src, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// An inner node whose record occurs once in the file (two nodes may
	// be stored alike).
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var node []byte
	for _, kv := range nodes {
		if bytes.Count(raw, kv[1]) == 1 {
			node = kv[0]
			break
		}
	}
	if node == nil {
		t.Fatal("no node of the group is stored once in the file")
	}
	if turn == nil {
		t.Fatal("no root of the group has a turn")
	}
	groupKey := func(g model.Group) []byte {
		return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, g.Step), g.ID)
	}

	ids := func(gs ...model.Group) []uint64 {
		var out []uint64
		for _, g := range gs {
			out = append(out, g.ID)
		}
		return out
	}
	type check struct {
		step uint64
		opts batch.Options
		want error // nil, a *store.CorruptError (corrupt), or a sentinel
	}
	corrupt := &store.CorruptError{}
	for _, c := range []struct {
		name   string
		bucket string
		key    []byte
		checks []check
	}{
		{"an inner node of step 1's first group", "nodes", node, []check{
			{1, batch.Options{}, corrupt},
			{1, batch.Options{Groups: ids(g1[1], g1[0], g1[1])}, corrupt},
			{1, batch.Options{Groups: ids(g1[1])}, nil},
			{2, batch.Options{}, nil},
		}},
		{"a turn of a root of step 1's first group", "turns", turn, []check{
			{1, batch.Options{}, corrupt},
			{1, batch.Options{Groups: ids(g1[0])}, corrupt},
			{1, batch.Options{Groups: ids(g1[1])}, nil},
			{2, batch.Options{}, nil},
		}},
		{"step 1's second group record", "groups", groupKey(g1[1]), []check{
			{1, batch.Options{}, corrupt},
			{1, batch.Options{Groups: ids(g1[1])}, corrupt},
			{2, batch.Options{}, nil},
		}},
		{"an advantage record of step 2's second group", "adv", adv, []check{
			{2, batch.Options{}, corrupt},
			{2, batch.Options{Groups: ids(g2[1])}, corrupt},
			{2, batch.Options{Groups: ids(g2[0])}, nil},
			{1, batch.Options{}, nil},
		}},
		{"nothing", "", nil, []check{
			{1, batch.Options{}, nil},
			{2, batch.Options{Groups: ids(g2[1], g2[0])}, nil},
			{1, batch.Options{Layout: "packed"}, batch.ErrInvalidOptions},
			{1, batch.Options{Groups: ids(g2[0])}, model.ErrNotFound},
		}},
	} {
		ddb := storetest.OpenDamaged(t, src, "llm", c.bucket, c.key)
		for _, ck := range c.checks {
			err := ddb.View(func(tx *store.Tx) error {
				if err := tx.CheckReads(); err != nil {
					return err
				}
				r, err := tx.Run("llm")
				if err != nil {
					return err
				}
				_, err = batchdb.Read(r, ck.step, ck.opts)
				return err
			})
			var ce *store.CorruptError
			switch {
			case ck.want == corrupt && !errors.As(err, &ce):
				t.Errorf("%s damaged: step %d %+v: %v, want a CorruptError", c.name, ck.step, ck.opts, err)
			case ck.want == nil && err != nil:
				t.Errorf("%s damaged: step %d %+v: %v, want the batch's way clear", c.name, ck.step, ck.opts, err)
			case ck.want != nil && ck.want != corrupt && !errors.Is(err, ck.want):
				t.Errorf("%s damaged: step %d %+v: %v, want %v", c.name, ck.step, ck.opts, err, ck.want)
			}
		}
		ddb.Close()
	}
}
