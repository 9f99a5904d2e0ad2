package frozenlake

import (
	"sort"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/store"
)

// StepFigures are what one training step's rollouts did, read back from the
// store. A group the env-step budget cut (some branch of it ended in a
// refused move) is counted in Groups, CutGroups and EnvSteps only: its
// rewards say where the budget ran out, not how the policy acts, so it is
// neither trained on nor counted as a success, a failure or a zero-variance
// group.
type StepFigures struct {
	Step      uint64  `json:"step"`
	Groups    int     `json:"groups"`
	CutGroups int     `json:"cut_groups"`
	Leaves    int     `json:"leaves"`    // of the uncut groups
	Successes int     `json:"successes"` // leaves that reached the goal
	RewardSum float64 `json:"reward_sum"`
	EnvSteps  int     `json:"env_steps"` // moves the environment played
	// ZeroVariance counts groups whose outcome rewards were all equal, so
	// plain GRPO learns nothing from them; Unlocked those of them that
	// rubric shaping made informative.
	ZeroVariance int `json:"zero_variance_groups"`
	Unlocked     int `json:"unlocked_groups"`
}

func (f *StepFigures) add(o StepFigures) {
	f.Groups += o.Groups
	f.CutGroups += o.CutGroups
	f.Leaves += o.Leaves
	f.Successes += o.Successes
	f.RewardSum += o.RewardSum
	f.EnvSteps += o.EnvSteps
	f.ZeroVariance += o.ZeroVariance
	f.Unlocked += o.Unlocked
}

// groupFigures reads one group's figures, and returns its advantage records
// unless the budget cut it (nil then: nothing to train on).
func groupFigures(r *store.RunTx, g model.Group) (StepFigures, []model.Advantage, error) {
	f := StepFigures{Step: g.Step, Groups: 1}
	nodes, err := r.GroupNodes(g)
	if err != nil {
		return f, nil, err
	}
	cut := false
	for _, n := range nodes {
		c, err := cutLeaf(r, n)
		if err != nil {
			return f, nil, err
		}
		f.EnvSteps += n.Turns
		if c {
			f.EnvSteps--
			cut = true
		}
	}
	if cut {
		f.CutGroups = 1
		return f, nil, nil
	}
	advs, err := r.Advantages(g.Step, g.ID)
	if err != nil {
		return f, nil, err
	}
	for _, a := range advs {
		f.Leaves++
		f.RewardSum += a.Outcome
		if a.Outcome > 0 { // only the goal pays
			f.Successes++
		}
	}
	if zv := replay.GroupFlags(advs); zv.ZeroVariance {
		f.ZeroVariance = 1
		if zv.Unlocked() {
			f.Unlocked = 1
		}
	}
	return f, advs, nil
}

// RunFigures returns a run's StepFigures, one per step that has groups, in
// step order; an open step counts what it committed.
func RunFigures(r *store.RunTx) ([]StepFigures, error) {
	by := map[uint64]*StepFigures{}
	err := r.ForEachGroup(0, func(g model.Group) error {
		f, _, err := groupFigures(r, g)
		if err != nil {
			return err
		}
		if by[g.Step] == nil {
			by[g.Step] = &StepFigures{Step: g.Step}
		}
		by[g.Step].add(f)
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]StepFigures, 0, len(by))
	for _, f := range by {
		out = append(out, *f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Step < out[j].Step })
	return out, nil
}
