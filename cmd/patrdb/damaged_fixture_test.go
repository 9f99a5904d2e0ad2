package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/store/storetest"
)

// The damaged fixtures in testdata/damaged/ are the golden fixture written
// with 1 KiB pages and compacted (base.db), so that its buckets have branch
// pages, and two copies with one branch element rewritten:
//
//	self-pointing.db    the nodes bucket's root branch page points at itself
//	parent-pointing.db  it points at the page of the run bucket that holds
//	                    the nodes bucket's header (a cycle through nesting)
//
// bbolt follows either forever: its cursors loop, and Bucket.Stats recurses
// until the Go stack overflows, which no recover catches. Regenerate with
// PATRDB_WRITE_FIXTURES=1 go test -run TestWriteDamagedFixtures ./cmd/patrdb/
// and then the goldens with -update.

const damagedPageSize = 1024

var damagedDir = filepath.Join("testdata", "damaged")

func TestWriteDamagedFixtures(t *testing.T) {
	if os.Getenv("PATRDB_WRITE_FIXTURES") == "" {
		t.Skip("set PATRDB_WRITE_FIXTURES=1 to rewrite testdata/damaged/")
	}
	src := filepath.Join(t.TempDir(), "src.db")
	o := storetest.Options()
	o.PageSize = damagedPageSize
	buildFixtureOpts(t, src, o)

	base := filepath.Join(damagedDir, "base.db")
	_ = os.Remove(base)
	sdb, err := bolt.Open(src, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	ddb, err := bolt.Open(base, 0o644, &bolt.Options{PageSize: damagedPageSize})
	if err != nil {
		t.Fatal(err)
	}
	if err := bolt.Compact(ddb, sdb, 0); err != nil {
		t.Fatal(err)
	}
	var nodesRoot, runRoot uint64
	err = ddb.View(func(tx *bolt.Tx) error {
		run := tx.Bucket([]byte("runs")).Bucket([]byte("patr-4x4"))
		nodesRoot, runRoot = uint64(run.Bucket([]byte("nodes")).Root()), uint64(run.Root())
		if p, err := tx.Page(int(nodesRoot)); err != nil || p.Type != "branch" {
			t.Fatalf("nodes root page %d is %+v, %v: want a branch (make the fixture bigger)", nodesRoot, p, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = ddb.Close()
	_ = sdb.Close()

	raw, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]uint64{"self-pointing.db": nodesRoot, "parent-pointing.db": runRoot} {
		b := append([]byte(nil), raw...)
		// The first branch element's child page id: header 16 B, then
		// pos u32, ksize u32, pgid u64.
		at := int(nodesRoot)*damagedPageSize + 16 + 8
		binary.NativeEndian.PutUint64(b[at:], target)
		if err := os.WriteFile(filepath.Join(damagedDir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: page %d element 0 -> page %d", name, nodesRoot, target)
	}
}
