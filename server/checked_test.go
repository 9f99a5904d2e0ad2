package server

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// The group, node and trajectory endpoints read a run they have not
// checked through store.CheckedRun: on a file whose first group has a
// damaged node record, the latest group, one of its nodes and a
// trajectory answer exactly as on the undamaged file, before and after
// the whole-run check of another endpoint found the damage; the damaged
// group answers 500 "damaged".
func TestCheckedEndpointsAnswerWhatIsSound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "patr.db")
	o := storetest.Options()
	o.PageSize = 1024
	db, err := store.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	var first, latest store.Group
	var leaf uint64
	for step := uint64(1); step <= 10; step++ {
		err := db.Update(func(tx *store.Tx) error {
			r, err := tx.Run("r")
			if err != nil {
				r, err = tx.CreateRun("r", nil, nil)
			}
			if err != nil {
				return err
			}
			g, err := r.OpenGroup(store.GroupSpec{Step: step, Task: "t"})
			if err != nil {
				return err
			}
			root, err := r.AddNode(store.NodeSpec{Step: step, Group: g.ID})
			if err != nil {
				return err
			}
			if err := r.AppendTurns(root.ID, 0, turn("a", 0), turn("b", 0)); err != nil {
				return err
			}
			for i := range 3 {
				n, err := r.AddNode(store.NodeSpec{Step: step, Group: g.ID, Parent: root.ID, Fork: 2, Ordinal: i})
				if err != nil {
					return err
				}
				if err := r.AppendTurns(n.ID, 0, turn("c", 1)); err != nil {
					return err
				}
				if err := r.SetNodeStatus(n.ID, store.NodeCompleted); err != nil {
					return err
				}
				leaf = n.ID
			}
			if err := r.SetNodeStatus(root.ID, store.NodeExpanded); err != nil {
				return err
			}
			if latest, err = r.GroupAt(g.Step, g.ID); step == 1 {
				first = latest
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	paths := []string{
		fmt.Sprintf("/api/v1/runs/r/groups/%d", latest.ID),
		fmt.Sprintf("/api/v1/runs/r/nodes/%d", leaf),
		fmt.Sprintf("/api/v1/runs/r/nodes/%d/trajectory", leaf),
	}
	answers := func(path string) map[string]string {
		db, err := store.Open(path, storetest.Options())
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		e := newEnvDB(t, db, Options{})
		out := map[string]string{}
		for _, p := range paths {
			st, _, body := e.call(http.MethodGet, p, nil)
			out[p] = fmt.Sprintf("%d %s", st, body)
		}
		return out
	}
	clean := answers(path)

	// Flip a byte of the first group's root record.
	at := storetest.ValueAt(t, path, "r", "nodes", []byte{0, 0, 0, 0, 0, 0, 0, byte(first.Roots[0])})
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[at+2] ^= 0x20
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}

	db, err = store.Open(path, storetest.Options())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	e := newEnvDB(t, db, Options{})
	for round, whole := range []string{"", "/api/v1/runs/r"} {
		if whole != "" {
			if st, _, body := e.call(http.MethodGet, whole, nil); st != http.StatusInternalServerError || !bytes.Contains(body, []byte("damaged")) {
				t.Fatalf("GET %s: %d %s, want 500 damaged", whole, st, body)
			}
		}
		for _, p := range paths {
			st, _, body := e.call(http.MethodGet, p, nil)
			if got := fmt.Sprintf("%d %s", st, body); got != clean[p] {
				t.Errorf("round %d GET %s: %.200s\nwant %.200s", round, p, got, clean[p])
			}
		}
		p := fmt.Sprintf("/api/v1/runs/r/groups/%d", first.ID)
		if st, _, body := e.call(http.MethodGet, p, nil); st != http.StatusInternalServerError || !bytes.Contains(body, []byte("damaged")) {
			t.Errorf("round %d GET %s: %d %s, want 500 damaged", round, p, st, body)
		}
	}
}
