package server

import (
	"github.com/patrdb/patrdb/runconfig"
	"github.com/patrdb/patrdb/store"
)

// configOf reads the config of run r (runconfig.Of). A run created through
// the API records both members; a run another trainer wrote may lack them,
// and the defaults stand in.
func configOf(r *store.RunTx) (runconfig.Config, error) {
	info, err := r.Info()
	if err != nil {
		return runconfig.Config{}, err
	}
	cfg, _, err := runconfig.Of(info)
	return cfg, err
}
