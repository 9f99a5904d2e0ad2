package frozenlake

import (
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/tree"
)

// RubricShaper builds the ARBOR shaper for a demo run. Until the rubric
// buffer is wired in it returns nil, and the trainer runs unshaped.
func RubricShaper(db *store.DB, run string, cfg TrainConfig, m Map) (tree.Shaper, error) {
	return nil, nil
}
