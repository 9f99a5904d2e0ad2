package tree_test

import (
	"errors"
	"github.com/patrdb/patrdb/model"
	"testing"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	"github.com/patrdb/patrdb/tree"
)

// A run created without any config gets the tree config its first
// coordinator is given recorded, and a later coordinator given none
// resumes with it; with nothing recorded and nothing given there is no
// config to run with.
func TestCoordinatorRecordsConfigOfBareRun(t *testing.T) {
	db := storetest.Open(t)
	update := func(fn func(*store.Tx) error) {
		t.Helper()
		if err := db.Update(fn); err != nil {
			t.Fatal(err)
		}
	}
	update(func(tx *store.Tx) error { _, err := tx.CreateRun("bare", nil, nil); return err })
	if _, err := tree.NewCoordinator(db, "bare", nil, nil); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("no config given or recorded: %v, want ErrInvalid", err)
	}
	cfg := tree.DefaultConfig()
	cfg.B0, cfg.K = 3, 5
	if _, err := tree.NewCoordinator(db, "bare", &cfg, nil); err != nil {
		t.Fatalf("config given for a bare run: %v", err)
	}
	var got tree.Config
	var has bool
	if err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run("bare")
		if err != nil {
			return err
		}
		info, err := r.Info()
		if err != nil {
			return err
		}
		got, has, err = tree.RecordedConfig(info)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !has || got != cfg {
		t.Errorf("recorded %+v (%v), want %+v", got, has, cfg)
	}
	if _, err := tree.NewCoordinator(db, "bare", nil, nil); err != nil {
		t.Errorf("resuming with the recorded config: %v", err)
	}
}
