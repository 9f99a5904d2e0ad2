package server

import (
	"encoding/json"
	"fmt"

	"github.com/patrdb/patrdb/rubricpool"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/tree"
)

// RunConfig is what a run created through the API stores in store.Run.Config:
// {"tree": <tree.Config>, "rubric": <RubricConfig>}. Runs written by other
// trainers (the demo) may hold more members; the server reads only these two.
type RunConfig struct {
	Tree   tree.Config  `json:"tree"`
	Rubric RubricConfig `json:"rubric"`
}

// RubricConfig is rubricpool.Config with the snake_case names of the API.
type RubricConfig struct {
	VarMin         float64 `json:"var_min"`
	RhoMin         float64 `json:"rho_min"`
	ConsolidateAt  int     `json:"consolidate_at"`
	RetireStreak   int     `json:"retire_streak"`
	MinActivations int     `json:"min_activations"`
	Active         int     `json:"active"`
	Lambda         float64 `json:"lambda"`
	DedupJaccard   float64 `json:"dedup_jaccard"`
	Seed           int64   `json:"seed"`
}

// Pool converts to the rubricpool package's type.
func (c RubricConfig) Pool() rubricpool.Config {
	return rubricpool.Config{VarMin: c.VarMin, RhoMin: c.RhoMin, ConsolidateAt: c.ConsolidateAt,
		RetireStreak: c.RetireStreak, MinActivations: c.MinActivations, Active: c.Active,
		Lambda: c.Lambda, DedupJaccard: c.DedupJaccard, Seed: c.Seed}
}

func rubricConfigOf(p rubricpool.Config) RubricConfig {
	return RubricConfig{VarMin: p.VarMin, RhoMin: p.RhoMin, ConsolidateAt: p.ConsolidateAt,
		RetireStreak: p.RetireStreak, MinActivations: p.MinActivations, Active: p.Active,
		Lambda: p.Lambda, DedupJaccard: p.DedupJaccard, Seed: p.Seed}
}

// DefaultRunConfig is tree.DefaultConfig and rubricpool.DefaultConfig. A
// create-run request overlays the fields it gives on these defaults.
func DefaultRunConfig() RunConfig {
	return RunConfig{Tree: tree.DefaultConfig(), Rubric: rubricConfigOf(rubricpool.DefaultConfig())}
}

// Validate checks both halves and reports every problem at once.
func (c RunConfig) Validate() error {
	if err := c.Tree.Validate(); err != nil {
		return err
	}
	return c.Rubric.Pool().Validate()
}

// storedConfig reads the config a run was created with. A run without a
// "tree" member (written by a trainer that keeps its own config) cannot be
// routed by the server; hasTree says so.
func storedConfig(run store.Run) (cfg RunConfig, hasTree bool, err error) {
	cfg = DefaultRunConfig()
	if len(run.Config) == 0 {
		return cfg, false, nil
	}
	var probe struct {
		Tree   json.RawMessage `json:"tree"`
		Rubric json.RawMessage `json:"rubric"`
	}
	if err := json.Unmarshal(run.Config, &probe); err != nil {
		return cfg, false, fmt.Errorf("%w: run %q config is not a JSON object: %v", store.ErrInvalid, run.ID, err)
	}
	if len(probe.Tree) > 0 && string(probe.Tree) != "null" {
		if err := json.Unmarshal(probe.Tree, &cfg.Tree); err != nil {
			return cfg, false, fmt.Errorf("%w: run %q tree config: %v", store.ErrInvalid, run.ID, err)
		}
		hasTree = true
	}
	if len(probe.Rubric) > 0 && string(probe.Rubric) != "null" {
		// Other trainers may keep a differently shaped rubric member;
		// the defaults stand in for what does not decode.
		var rc RubricConfig = cfg.Rubric
		if json.Unmarshal(probe.Rubric, &rc) == nil {
			cfg.Rubric = rc
		}
	}
	return cfg, hasTree, nil
}

// configOf reads the config of run r (storedConfig of its record).
func configOf(r *store.RunTx) (RunConfig, error) {
	info, err := r.Info()
	if err != nil {
		return RunConfig{}, err
	}
	cfg, _, err := storedConfig(info)
	return cfg, err
}
