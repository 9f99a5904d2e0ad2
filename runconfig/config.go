// Package runconfig is the one shape of a run's recorded configuration,
// model.Run.Config: a JSON object whose "tree" member is the PaTR routing
// config (tree.Config) and whose "rubric" member is the ARBOR rubric
// buffer's (rubricpool.Config). Every writer (the HTTP API, the demo
// trainer, your own trainer) records this object and every reader (the
// server, replay, the demo's resume, tree's coordinator) reads it through
// Of, so a run read back has the config it was written with.
//
// Rules:
//   - Members a writer does not know about (a trainer's learning rate, its
//     mode) are its own; the store keeps the object as it is, and Of ignores
//     them.
//   - A missing "tree" member means the run recorded no routing config
//     (tree.RecordedConfig's rule, which the coordinator also uses);
//     members the "tree" object lacks keep tree.DefaultConfig's values.
//   - A missing "rubric" member means the run uses no rubric buffer (Rubric
//     is nil); members the object lacks keep rubricpool.DefaultConfig's.
//   - A member of the wrong type is model.ErrInvalid: a config that does not
//     parse is refused, not replaced by defaults.
package runconfig

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rubricpool"
	"github.com/patrdb/patrdb/tree"
)

// Config is a run's recorded configuration.
type Config struct {
	Tree tree.Config `json:"tree"`
	// Rubric is the rubric buffer's config; nil when the run has none.
	Rubric *rubricpool.Config `json:"rubric,omitempty"`
}

// Default is tree.DefaultConfig with rubricpool.DefaultConfig.
func Default() Config {
	rc := rubricpool.DefaultConfig()
	return Config{Tree: tree.DefaultConfig(), Rubric: &rc}
}

// Validate checks both halves; the error wraps tree.ErrInvalidConfig or
// rubricpool.ErrInvalidConfig.
func (c Config) Validate() error {
	if err := c.Tree.Validate(); err != nil {
		return err
	}
	if c.Rubric != nil {
		return c.Rubric.Validate()
	}
	return nil
}

// RubricOrDefault is the rubric buffer's config, rubricpool.DefaultConfig
// when the run recorded none.
func (c Config) RubricOrDefault() rubricpool.Config {
	if c.Rubric == nil {
		return rubricpool.DefaultConfig()
	}
	return *c.Rubric
}

// JSON is c as a run records it (model.Run.Config).
func (c Config) JSON() []byte {
	b, err := json.Marshal(c)
	if err != nil { // only plain numbers, strings and bools: cannot fail
		panic(err)
	}
	return b
}

// Of reads the config run recorded under the rules of the package doc.
// hasTree is false when it recorded no "tree" member; cfg.Tree is then
// tree.DefaultConfig.
func Of(run model.Run) (cfg Config, hasTree bool, err error) {
	cfg.Tree, hasTree, err = tree.RecordedConfig(run)
	if err != nil {
		return Config{}, false, err
	}
	if !hasTree {
		cfg.Tree = tree.DefaultConfig()
	}
	if len(bytes.TrimSpace(run.Config)) == 0 {
		return cfg, false, nil
	}
	var probe struct {
		Rubric json.RawMessage `json:"rubric"`
	}
	if err := json.Unmarshal(run.Config, &probe); err != nil {
		return Config{}, false, fmt.Errorf("%w: run %q config is not a JSON object: %v", model.ErrInvalid, run.ID, err)
	}
	if len(probe.Rubric) > 0 && string(probe.Rubric) != "null" {
		rc := rubricpool.DefaultConfig()
		if err := json.Unmarshal(probe.Rubric, &rc); err != nil {
			return Config{}, false, fmt.Errorf("%w: run %q rubric config: %v", model.ErrInvalid, run.ID, err)
		}
		cfg.Rubric = &rc
	}
	return cfg, hasTree, nil
}
