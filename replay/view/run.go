package view

import (
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// StepEnv is one step's environment work: the turns its groups sampled
// (each stored once, however many leaves share it) and the run's total up
// to and including the step. Curves plotted against EnvStepsTotal compare
// runs by the interaction they paid for rather than by optimizer steps.
type StepEnv struct {
	Step          uint64 `json:"step"`
	Groups        int    `json:"groups"`
	Nodes         int    `json:"nodes"`
	EnvSteps      int    `json:"env_steps"`
	EnvStepsTotal int    `json:"env_steps_total"`
}

// EnvSteps returns every step's StepEnv in step order, from the run's
// per-step counters (store.RunTx.Summary): no node is read.
func EnvSteps(r *store.RunTx) ([]StepEnv, error) {
	sum, err := r.Summary(model.SummaryOptions{Steps: true})
	if err != nil {
		return nil, err
	}
	out := make([]StepEnv, 0, len(sum.Steps))
	total := 0
	for _, s := range sum.Steps {
		total += s.Turns
		out = append(out, StepEnv{Step: s.Step, Groups: s.Groups, Nodes: s.Nodes, EnvSteps: s.Turns, EnvStepsTotal: total})
	}
	return out, nil
}
