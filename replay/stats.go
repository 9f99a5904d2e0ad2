package replay

import (
	"github.com/patrdb/patrdb/store"
)

// LeafStats summarises one kind of leaf.
type LeafStats struct {
	Count      int     `json:"count"`
	Rewarded   int     `json:"rewarded"` // leaves with an outcome reward
	RewardSum  float64 `json:"reward_sum"`
	MeanReward float64 `json:"mean_reward"` // over the rewarded ones; 0 when none
}

func (l *LeafStats) add(n *store.Node) {
	l.Count++
	if n.HasReward {
		l.Rewarded++
		l.RewardSum += n.Reward
	}
}

func (l *LeafStats) merge(o LeafStats) {
	l.Count += o.Count
	l.Rewarded += o.Rewarded
	l.RewardSum += o.RewardSum
}

func (l *LeafStats) finish() {
	l.MeanReward = 0
	if l.Rewarded > 0 {
		l.MeanReward = l.RewardSum / float64(l.Rewarded)
	}
}

// StepStats are the figures of one step (or, in RunStats.Total, of the
// whole run, with Step 0).
type StepStats struct {
	Step   uint64 `json:"step"`
	Groups int    `json:"groups"`
	Nodes  int    `json:"nodes"`
	Leaves int    `json:"leaves"` // completed, pruned and truncated nodes
	Active int    `json:"active"` // the frontier
	Failed int    `json:"failed"`
	// TurnsStored is every node's own turns: what the file holds.
	// TurnsMaterialised is the sum of the leaves' path lengths: what a
	// flat dump of every leaf trajectory would hold. PrefixSharing is their
	// ratio (materialised / stored; 0 when nothing is stored).
	TurnsStored       int     `json:"turns_stored"`
	TurnsMaterialised int     `json:"turns_materialised"`
	PrefixSharing     float64 `json:"prefix_sharing"`
	// Routing decisions by action, and prunes by rule (max, median, repeat).
	Expansions   int            `json:"expansions"`
	Prunes       int            `json:"prunes"`
	Survivals    int            `json:"survivals"`
	PrunesByRule map[string]int `json:"prunes_by_rule,omitempty"`
	// Leaves per group: mean, min and max over the step's groups.
	LeavesPerGroup float64 `json:"leaves_per_group"`
	MinLeaves      int     `json:"min_leaves"`
	MaxLeaves      int     `json:"max_leaves"`
	// Leaves by how they ended, with their mean outcome rewards.
	Completed LeafStats `json:"completed"`
	Pruned    LeafStats `json:"pruned"`
	Truncated LeafStats `json:"truncated"`
	// From the advantage records: groups that have them, groups whose
	// outcome rewards had zero variance (no GRPO signal) before rubric
	// shaping and after it, and those shaping made informative.
	AdvGroups      int `json:"adv_groups"`
	ZeroVarBefore  int `json:"zero_var_before"`
	ZeroVarAfter   int `json:"zero_var_after"`
	UnlockedGroups int `json:"unlocked_groups"`
}

func (s *StepStats) merge(o *StepStats) {
	if o.Groups > 0 {
		if s.Groups == 0 || o.MinLeaves < s.MinLeaves {
			s.MinLeaves = o.MinLeaves
		}
		s.MaxLeaves = max(s.MaxLeaves, o.MaxLeaves)
	}
	s.Groups += o.Groups
	s.Nodes += o.Nodes
	s.Leaves += o.Leaves
	s.Active += o.Active
	s.Failed += o.Failed
	s.TurnsStored += o.TurnsStored
	s.TurnsMaterialised += o.TurnsMaterialised
	s.Expansions += o.Expansions
	s.Prunes += o.Prunes
	s.Survivals += o.Survivals
	for k, v := range o.PrunesByRule {
		if s.PrunesByRule == nil {
			s.PrunesByRule = map[string]int{}
		}
		s.PrunesByRule[k] += v
	}
	s.Completed.merge(o.Completed)
	s.Pruned.merge(o.Pruned)
	s.Truncated.merge(o.Truncated)
	s.AdvGroups += o.AdvGroups
	s.ZeroVarBefore += o.ZeroVarBefore
	s.ZeroVarAfter += o.ZeroVarAfter
	s.UnlockedGroups += o.UnlockedGroups
}

func (s *StepStats) finish() {
	s.PrefixSharing = 0
	if s.TurnsStored > 0 {
		s.PrefixSharing = float64(s.TurnsMaterialised) / float64(s.TurnsStored)
	}
	s.LeavesPerGroup = 0
	if s.Groups > 0 {
		s.LeavesPerGroup = float64(s.Leaves) / float64(s.Groups)
	}
	s.Completed.finish()
	s.Pruned.finish()
	s.Truncated.finish()
}

// PoolSizes is the rubric buffer at the end of a step: how many rubrics
// each pool held after the last event of that step.
type PoolSizes struct {
	Step      uint64 `json:"step"`
	Candidate int    `json:"candidate"`
	Public    int    `json:"public"`
	Retired   int    `json:"retired"`
	Merged    int    `json:"merged"`
}

// RunStats are a run's statistics.
type RunStats struct {
	Run    string      `json:"run"`
	Events uint64      `json:"events"`
	Total  StepStats   `json:"total"`
	Steps  []StepStats `json:"steps"`
	// Pools over steps, from the rubric events (one entry per step that
	// wrote any event, once the run has a rubric).
	Pools []PoolSizes `json:"pools,omitempty"`
	// Buckets are the run's sub-buckets on disk; Bytes their sum.
	Buckets []store.BucketSize `json:"buckets"`
	Bytes   int64              `json:"bytes"`
}

// Stats computes a run's statistics. It reads the groups one at a time (so
// memory is bounded by the largest group) and walks the event log once for
// the rubric pools; the bucket sizes read every page of the run.
func Stats(r *store.RunTx) (*RunStats, error) {
	rs := &RunStats{Run: r.ID(), Events: r.LastSeq()}
	var cur *StepStats
	flush := func() {
		if cur != nil {
			rs.Total.merge(cur)
			cur.finish()
			rs.Steps = append(rs.Steps, *cur)
			cur = nil
		}
	}
	err := r.ForEachGroup(0, func(g store.Group) error {
		if cur == nil || cur.Step != g.Step {
			flush()
			cur = &StepStats{Step: g.Step}
		}
		nodes, err := r.GroupNodes(g)
		if err != nil {
			return err
		}
		advs, err := r.Advantages(g.Step, g.ID)
		if err != nil {
			return err
		}
		gs := groupStats(nodes, advs)
		gs.Step = g.Step
		cur.merge(&gs)
		return nil
	})
	if err != nil {
		return nil, err
	}
	flush()
	rs.Total.finish()
	if rs.Pools, err = poolHistory(r); err != nil {
		return nil, err
	}
	if rs.Buckets, err = r.BucketSizes(); err != nil {
		return nil, err
	}
	for _, b := range rs.Buckets {
		rs.Bytes += b.Bytes
	}
	return rs, nil
}

// groupStats is the StepStats of one group (Groups = 1).
func groupStats(nodes []store.Node, advs []store.Advantage) StepStats {
	s := StepStats{Groups: 1, Nodes: len(nodes)}
	for i := range nodes {
		n := &nodes[i]
		s.TurnsStored += n.Turns
		if n.Status.Leaf() {
			s.Leaves++
			s.TurnsMaterialised += n.PathLen()
		}
		switch n.Status {
		case store.NodeCompleted:
			s.Completed.add(n)
		case store.NodePruned:
			s.Pruned.add(n)
		case store.NodeTruncated:
			s.Truncated.add(n)
		case store.NodeActive:
			s.Active++
		case store.NodeFailed:
			s.Failed++
		}
		for _, d := range n.Decisions {
			switch d.Action {
			case store.ActionExpand:
				s.Expansions++
			case store.ActionSurvive:
				s.Survivals++
			case store.ActionPrune:
				s.Prunes++
				if s.PrunesByRule == nil {
					s.PrunesByRule = map[string]int{}
				}
				s.PrunesByRule[d.Rule]++
			}
		}
	}
	s.MinLeaves, s.MaxLeaves = s.Leaves, s.Leaves
	if len(advs) > 0 {
		s.AdvGroups = 1
		before, after := false, false
		for _, a := range advs {
			before = before || a.ZeroVariance
			after = after || a.ZeroVarianceAfter
		}
		if before {
			s.ZeroVarBefore = 1
		}
		if after {
			s.ZeroVarAfter = 1
		}
		if before && !after {
			s.UnlockedGroups = 1
		}
	}
	return s
}

// poolHistory walks the events once, tracking each rubric's pool. The
// step an event belongs to is the highest step any event so far carried:
// rubric events carry the rubric's creation step, run events the last
// completed one, so neither runs ahead of the step the trainer is in.
func poolHistory(r *store.RunTx) ([]PoolSizes, error) {
	var out []PoolSizes
	pool := map[uint64]store.RubricPool{}
	var step uint64
	emit := func() {
		if step == 0 || len(pool) == 0 {
			return
		}
		p := PoolSizes{Step: step}
		for _, pl := range pool {
			switch pl {
			case store.PoolCandidate:
				p.Candidate++
			case store.PoolPublic:
				p.Public++
			case store.PoolRetired:
				p.Retired++
			case store.PoolMerged:
				p.Merged++
			}
		}
		out = append(out, p)
	}
	err := r.Events(1, func(e store.Event) error {
		if e.Step > step {
			emit()
			step = e.Step
		}
		switch e.Kind {
		case store.EvRubricPut, store.EvRubricUpdate, store.EvRubricMove:
			var rb store.Rubric
			if err := store.DecodePayload(e, &rb); err != nil {
				return err
			}
			pool[rb.ID] = rb.Pool
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	emit()
	return out, nil
}
