package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/patrdb/patrdb/store/storetest"
)

// `batch RUN --step N` checks what the batch reads, not the whole run: a
// damaged node record of the step fails it with one line and no file,
// where reading on would build a batch missing rows (the damage a
// byte-flip trial once found: a children-index key, a row dropped, exit
// 0); damage in another step leaves the batch exactly as on the
// undamaged file.
func TestBatchChecksWhatItReads(t *testing.T) {
	dir := t.TempDir()
	base := copyTo(t, filepath.Join(damagedDir, "base.db"), filepath.Join(dir, "base.db"))
	const run = "patr-4x4"
	latest, first := treeGroups(t, base, run)
	if latest.step == first.step {
		t.Fatalf("fixture: one step only (%d)", first.step)
	}
	batchOf := func(step uint64) []string {
		return []string{"batch", run, "--step", strconv.FormatUint(step, 10), "--out", "$OUT/b.safetensors"}
	}
	inStep := storetest.ValueAt(t, base, run, "nodes", u64be(first.nodes[len(first.nodes)-1].ID))
	// A children-index entry of the step's group: its key is parent|child.
	raw, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	childAt := -1
	for _, n := range first.nodes {
		if n.Parent == 0 {
			continue
		}
		// The same 16 bytes end the leaf's advantage key step|group|leaf
		// when the parent's id is the group's; those are passed over.
		key := append(u64be(n.Parent), u64be(n.ID)...)
		var at []int
		for i := 0; ; {
			j := bytes.Index(raw[i:], key)
			if j < 0 {
				break
			}
			if i+j < 8 || !bytes.Equal(raw[i+j-8:i+j], u64be(first.step)) {
				at = append(at, i+j)
			}
			i += j + 1
		}
		if len(at) == 1 {
			childAt = at[0] + 3 - 2 // the parent's fourth byte, flipped below at +2
			break
		}
	}
	if childAt < 0 {
		t.Fatal("fixture: no children-index key of the step's group occurs once in the file")
	}
	elsewhere := storetest.ValueAt(t, base, run, "nodes", u64be(latest.nodes[0].ID))
	clean := readUndamaged(t, base, batchOf(first.step))

	for _, c := range []struct {
		name   string
		at     int
		onPath bool
	}{
		{"a node record of the step", inStep, true},
		{"a children-index key of the step", childAt, true},
		{"a node record of another step", elsewhere, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw, err := os.ReadFile(base)
			if err != nil {
				t.Fatal(err)
			}
			raw[c.at+2] ^= 0x20
			path := filepath.Join(t.TempDir(), "damaged.db")
			if err := os.WriteFile(path, raw, 0o600); err != nil {
				t.Fatal(err)
			}
			r, hung := readCommand(t, path, batchOf(first.step))
			switch {
			case hung:
				t.Fatalf("batch hung for %v", hangLimit)
			case c.onPath && r.code == 0:
				t.Fatalf("batch exit 0 on damage it reads:\n%s", r.stdout)
			case c.onPath:
				oneErrorLine(t, r.stderr, "is damaged", "patrdb check")
			case r.code != 0 || r.stdout != clean.stdout:
				t.Fatalf("damage in another step: exit %d, stderr %q, output %q, want %q", r.code, r.stderr, r.stdout, clean.stdout)
			}
		})
	}
}
