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
//
// derivedFixtures are more copies of base.db, each damaged at test time by
// one change that damageDerived describes (their goldens are committed).

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

// derivedFixtures name the damage damageDerived does to a copy of base.db,
// each in run patr-4x4 (run grpo-4x4 is left whole):
//
//	run-header-root-0    the run bucket's header says root 0 and has no
//	                     inline page after it (bbolt indexed past it: the
//	                     runs list failed for every run)
//	nodes-header-root-0  the same in the nodes bucket's header
//	events-sequence-0    the events bucket's sequence is 0 (show printed
//	                     "events 0"; a writer overwrote event 1)
//	rubrics-leaf-short   the rubrics' last leaf page lost one element from
//	                     its count (show counted one rubric fewer)
var derivedFixtures = []string{"run-header-root-0", "nodes-header-root-0", "events-sequence-0", "rubrics-leaf-short"}

// damageDerived damages the copy of base.db at path as derivedFixtures
// says of name.
func damageDerived(t *testing.T, path, name string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ne := binary.NativeEndian
	switch name {
	case "run-header-root-0":
		ne.PutUint64(b[storetest.HeaderAt(t, path, "runs/patr-4x4"):], 0)
	case "nodes-header-root-0":
		ne.PutUint64(b[storetest.HeaderAt(t, path, "runs/patr-4x4/nodes"):], 0)
	case "events-sequence-0":
		ne.PutUint64(b[storetest.HeaderAt(t, path, "runs/patr-4x4/events")+8:], 0)
	case "rubrics-leaf-short":
		id := ne.Uint64(b[storetest.HeaderAt(t, path, "runs/patr-4x4/rubrics"):])
		for hops := 0; ne.Uint16(b[int(id)*damagedPageSize+8:]) == 0x01; hops++ { // a branch: its last child
			if hops > 8 {
				t.Fatal("rubrics: no leaf found")
			}
			pg := b[int(id)*damagedPageSize:]
			id = ne.Uint64(pg[16+16*(int(ne.Uint16(pg[10:]))-1)+8:])
		}
		at := int(id)*damagedPageSize + 10
		if n := ne.Uint16(b[at:]); n < 2 {
			t.Fatalf("rubrics leaf %d holds %d elements", id, n)
		}
		ne.PutUint16(b[at:], ne.Uint16(b[at:])-1)
	default:
		t.Fatalf("no derived fixture %q", name)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
