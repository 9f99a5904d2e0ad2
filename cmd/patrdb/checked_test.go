package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// `tree RUN latest` checks what it reads, not the whole run: damage to a
// record, a turn or a page of the latest group fails it with one line and
// a non-zero exit; damage to another group leaves it printing the whole
// group, exactly as on the undamaged file, while the commands that read
// the damaged group (and check) still refuse. Every command runs in a
// child process under hangLimit.
func TestTreeLatestChecksWhatItReads(t *testing.T) {
	dir := t.TempDir()
	base := copyTo(t, filepath.Join(damagedDir, "base.db"), filepath.Join(dir, "base.db"))
	const run = "patr-4x4"
	latest, first := treeGroups(t, base, run)
	var leaf model.Node // the last node of the group with turns
	for _, n := range latest.nodes {
		if n.Turns > 0 {
			leaf = n
		}
	}
	// Its first turn's key: seq|node from format 3 on, node|index before.
	turnKey := append(u64be(leaf.ID), u64be(0)...)
	if len(leaf.TurnRanges) > 0 {
		turnKey = append(u64be(leaf.TurnRanges[0].Seq), u64be(leaf.ID)...)
	}
	treeLatest := []string{"tree", run, "latest"}
	clean := readUndamaged(t, base, treeLatest)
	if len(latest.nodes) < 2 || leaf.ID == 0 {
		t.Fatalf("fixture: the latest group has %d nodes, none with turns", len(latest.nodes))
	}
	leafAt := storetest.ValueAt(t, base, run, "nodes", u64be(leaf.ID))
	turnAt := storetest.ValueAt(t, base, run, "turns", turnKey)
	firstAt := storetest.ValueAt(t, base, run, "nodes", u64be(first.nodes[0].ID))
	page := func(at int) int { return at / damagedPageSize * damagedPageSize }
	firstStep := []string{"tree", run, "step:" + strconv.FormatUint(first.step, 10)}

	for _, c := range []struct {
		name    string
		damage  func(b []byte)
		onPath  bool
		mention string
	}{
		{"a node record of the latest group", func(b []byte) { b[leafAt+2] ^= 0x20 }, true, "nodes"},
		{"a turn of its leaf", func(b []byte) { b[turnAt+4] ^= 0x20 }, true, "turns"},
		{"the element count of the page holding its leaf", func(b []byte) { b[page(leafAt)+10]++ }, true, "nodes"},
		{"a node record of the first step", func(b []byte) { b[firstAt+2] ^= 0x20 }, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw, err := os.ReadFile(base)
			if err != nil {
				t.Fatal(err)
			}
			c.damage(raw)
			path := filepath.Join(t.TempDir(), "damaged.db")
			if err := os.WriteFile(path, raw, 0o600); err != nil {
				t.Fatal(err)
			}
			r, hung := readCommand(t, path, treeLatest)
			switch {
			case hung:
				t.Fatalf("tree latest hung for %v", hangLimit)
			case c.onPath && r.code == 0:
				t.Fatalf("tree latest exit 0 on damage it reads:\n%s", r.stdout)
			case c.onPath:
				oneErrorLine(t, r.stderr, "is damaged", c.mention, "patrdb check")
				if r.stdout != "" {
					t.Errorf("tree latest printed %q before failing", r.stdout)
				}
			case r.code != 0 || r.stdout != clean.stdout:
				t.Fatalf("damage off the read path: exit %d, stderr %q, output:\n%s", r.code, r.stderr, goldenDiff(clean.stdout, r.stdout))
			default:
				// The group that is damaged still refuses to print.
				r, hung := readCommand(t, path, firstStep)
				if hung || r.code == 0 {
					t.Errorf("%v on its damaged group: exit %d (hung %v)", firstStep, r.code, hung)
				} else {
					oneErrorLine(t, r.stderr, "is damaged", "nodes")
				}
			}
			if r, hung := readCommand(t, path, []string{"check"}); hung || r.code != 1 {
				t.Errorf("check: exit %d (hung %v), want 1", r.code, hung)
			}
		})
	}
}

// treeGroup is a group of the fixture with its nodes.
type treeGroup struct {
	step  uint64
	nodes []model.Node
}

// treeGroups reads the latest group of run and the first group of step 1.
func treeGroups(t *testing.T, path, run string) (latest, first treeGroup) {
	t.Helper()
	o := store.DefaultOptions()
	o.ReadOnly = true
	db, err := store.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.ViewRun(run, func(r *store.RunTx) error {
		g, err := r.LatestGroup()
		if err != nil {
			return err
		}
		latest.step = g.Step
		if latest.nodes, err = r.GroupNodes(g); err != nil {
			return err
		}
		gs, err := r.Groups(1)
		if err != nil {
			return err
		}
		first.step = 1
		first.nodes, err = r.GroupNodes(gs[0])
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if latest.step == first.step {
		t.Fatalf("fixture: the latest group is at step %d, the first step's too", latest.step)
	}
	return latest, first
}

func u64be(x uint64) []byte { return binary.BigEndian.AppendUint64(nil, x) }
