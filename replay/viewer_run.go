package replay

import "github.com/patrdb/patrdb/store"

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

// EnvSteps returns every step's StepEnv in step order. It reads the group
// records and their nodes (no turn, no event).
func EnvSteps(r *store.RunTx) ([]StepEnv, error) {
	out := []StepEnv{}
	err := r.ForEachGroup(0, func(g store.Group) error {
		if len(out) == 0 || out[len(out)-1].Step != g.Step {
			out = append(out, StepEnv{Step: g.Step})
		}
		s := &out[len(out)-1]
		s.Groups++
		nodes, err := r.GroupNodes(g)
		if err != nil {
			return err
		}
		s.Nodes += len(nodes)
		for _, n := range nodes {
			s.EnvSteps += n.Turns
		}
		return nil
	})
	total := 0
	for i := range out {
		total += out[i].EnvSteps
		out[i].EnvStepsTotal = total
	}
	return out, err
}
