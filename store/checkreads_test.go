package store_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// A writable transaction cannot read in checked mode: its changed pages
// are in memory, not in the file the page walks read. CheckReads says so
// with ErrInvalid and leaves the transaction as it was, so the write goes
// on and commits.
func TestCheckReadsRefusesAWritableTransaction(t *testing.T) {
	db := storetest.Open(t)
	update(t, db, func(tx *store.Tx) error {
		if err := tx.CheckReads(); !errors.Is(err, model.ErrInvalid) {
			t.Errorf("CheckReads in Update: %v, want ErrInvalid", err)
		}
		_, err := tx.CreateRun("r", nil, nil)
		return err
	})
	if err := db.View(func(tx *store.Tx) error { _, err := tx.Run("r"); return err }); err != nil {
		t.Fatalf("the write after the refused CheckReads: %v", err)
	}
}

// A checked read maps the file for its page walks and ends the mapping
// with its transaction: a server answering thousands of requests in
// checked mode keeps no mapping of them (the process's maps, on Linux,
// hold as many of the file after a hundred checked reads as before).
func TestCheckedReadsLeaveNoMappingBehind(t *testing.T) {
	maps := func() int {
		b, err := os.ReadFile("/proc/self/maps")
		if err != nil {
			t.Skip("no /proc/self/maps on this platform")
		}
		return strings.Count(string(b), filepath.Base(t.Name()))
	}
	maps()
	db, err := store.Open(filepath.Join(t.TempDir(), t.Name()+".db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var root model.Node
	update(t, db, func(tx *store.Tx) error {
		_, n, err := runWithRoot(tx)
		root = n
		return err
	})
	before := maps()
	for range 100 {
		err := db.View(func(tx *store.Tx) error {
			r, err := checkedRun(tx, "r")
			if err == nil {
				_, err = r.Node(root.ID)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if after := maps(); after != before {
		t.Errorf("mappings of the file: %d before the checked reads, %d after", before, after)
	}
}
