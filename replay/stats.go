package replay

import (
	"github.com/patrdb/patrdb/model"
	"slices"

	"github.com/patrdb/patrdb/store"
)

// LeafStats summarises one kind of leaf.
type LeafStats struct {
	Count      int     `json:"count"`
	Rewarded   int     `json:"rewarded"` // leaves with an outcome reward
	RewardSum  float64 `json:"reward_sum"`
	MeanReward float64 `json:"mean_reward"` // over the rewarded ones; 0 when none
}

func (l *LeafStats) add(n *model.Node) {
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
	// Leaves, Rewarded and MeanReward are the store's figures of the
	// step (model.StepSummary, docs/json.md): the branches that ended —
	// completed, pruned, truncated — in open and closed groups, those with
	// an outcome reward, and the mean of those rewards (null when none).
	Leaves     int      `json:"leaves"`
	Rewarded   int      `json:"rewarded"`
	MeanReward *float64 `json:"mean_reward"`
	Active     int      `json:"active"` // the frontier
	Failed     int      `json:"failed"`
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
	ZeroVarBefore  int `json:"zero_variance_groups"`
	ZeroVarAfter   int `json:"zero_variance_after_groups"`
	UnlockedGroups int `json:"unlocked_groups"`
	// Policy versions of the turns sampled (0 when the writer recorded
	// none), and how many versions behind the run's current one the
	// step's turns were when written and its leaves when their groups
	// closed (StalenessTracker).
	MinPolicyVersion uint64 `json:"min_policy_version"`
	MaxPolicyVersion uint64 `json:"max_policy_version"`
	model.Staleness
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
	if o.MinPolicyVersion > 0 && (s.MinPolicyVersion == 0 || o.MinPolicyVersion < s.MinPolicyVersion) {
		s.MinPolicyVersion = o.MinPolicyVersion
	}
	s.MaxPolicyVersion = max(s.MaxPolicyVersion, o.MaxPolicyVersion)
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
	Buckets []model.BucketSize `json:"buckets"`
	Bytes   int64              `json:"bytes"`
}

// Stats computes a run's statistics. It reads the groups one at a time (so
// memory is bounded by the largest group) and walks the event log once for
// the rubric pools; the bucket sizes read every page of the run. Leaves
// and their mean reward are the run's summary's (store.RunTx.Summary), so
// every interface prints the one figure: for a run that dropped old steps
// they count those steps too, as the summary does.
func Stats(r *store.RunTx) (*RunStats, error) {
	sb := newStatsBuilder(r.ID(), r.LastSeq())
	err := r.ForEachGroup(0, func(g model.Group) error {
		nodes, err := r.GroupNodes(g)
		if err != nil {
			return err
		}
		advs, err := r.Advantages(g.Step, g.ID)
		if err != nil {
			return err
		}
		sb.addGroup(g, nodes, advs)
		return nil
	})
	if err != nil {
		return nil, err
	}
	rs := sb.finish()
	var pt PoolTracker
	var st StalenessTracker
	if _, err := pt.observeEvents(r, 1, nil, &st); err != nil {
		return nil, err
	}
	rs.Pools = pt.Sizes()
	rs.setStaleness(&st)
	sum, err := r.Summary(model.SummaryOptions{Steps: true, Buckets: true})
	if err != nil {
		return nil, err
	}
	rs.Buckets, rs.Bytes = sum.Buckets, sum.Bytes
	rs.Total.Leaves, rs.Total.Rewarded, rs.Total.MeanReward = sum.Leaves, sum.Rewarded, sum.MeanReward
	byStep := make(map[uint64]model.StepSummary, len(sum.Steps))
	for _, s := range sum.Steps {
		byStep[s.Step] = s
	}
	for i := range rs.Steps {
		s := byStep[rs.Steps[i].Step]
		rs.Steps[i].Leaves, rs.Steps[i].Rewarded, rs.Steps[i].MeanReward = s.Leaves, s.Rewarded, s.MeanReward
	}
	return rs, nil
}

// statsBuilder accumulates groups, in step order, into a RunStats.
type statsBuilder struct {
	rs  *RunStats
	cur *StepStats
}

// newStatsBuilder starts the statistics of run, whose log has events
// events.
func newStatsBuilder(run string, events uint64) *statsBuilder {
	return &statsBuilder{rs: &RunStats{Run: run, Events: events}}
}

// addGroup adds one group with every node of it and its advantage records.
// Groups must come in step order.
func (b *statsBuilder) addGroup(g model.Group, nodes []model.Node, advs []model.Advantage) {
	if b.cur == nil || b.cur.Step != g.Step {
		b.flush()
		b.cur = &StepStats{Step: g.Step}
	}
	gs := groupStats(nodes, advs)
	gs.Step = g.Step
	b.cur.merge(&gs)
}

func (b *statsBuilder) flush() {
	if b.cur != nil {
		b.rs.Total.merge(b.cur)
		b.cur.finish()
		b.rs.Steps = append(b.rs.Steps, *b.cur)
		b.cur = nil
	}
}

// finish closes the last step and the totals and returns the statistics
// (Pools, Buckets and Bytes are the caller's to fill).
func (b *statsBuilder) finish() *RunStats {
	b.flush()
	b.rs.Total.finish()
	return b.rs
}

// setStaleness fills each step's and the total's staleness figures from a
// tracker that followed the run's whole log.
func (rs *RunStats) setStaleness(t *StalenessTracker) {
	for i := range rs.Steps {
		rs.Steps[i].Staleness = t.Of(rs.Steps[i].Step)
	}
	rs.Total.Staleness = t.Total()
}

// groupStats is the StepStats of one group (Groups = 1).
func groupStats(nodes []model.Node, advs []model.Advantage) StepStats {
	s := StepStats{Groups: 1, Nodes: len(nodes)}
	for i := range nodes {
		n := &nodes[i]
		s.TurnsStored += n.Turns
		if n.MinVersion > 0 && (s.MinPolicyVersion == 0 || n.MinVersion < s.MinPolicyVersion) {
			s.MinPolicyVersion = n.MinVersion
		}
		s.MaxPolicyVersion = max(s.MaxPolicyVersion, n.MaxVersion)
		if n.Status.Leaf() {
			s.Leaves++
			s.TurnsMaterialised += n.PathLen()
		}
		switch n.Status {
		case model.NodeCompleted:
			s.Completed.add(n)
		case model.NodePruned:
			s.Pruned.add(n)
		case model.NodeTruncated:
			s.Truncated.add(n)
		case model.NodeActive:
			s.Active++
		case model.NodeFailed:
			s.Failed++
		}
		for _, d := range n.Decisions {
			switch d.Action {
			case model.ActionExpand:
				s.Expansions++
			case model.ActionSurvive:
				s.Survivals++
			case model.ActionPrune:
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
		f := GroupFlags(advs)
		if f.ZeroVariance {
			s.ZeroVarBefore = 1
		}
		if f.ZeroVarianceAfter {
			s.ZeroVarAfter = 1
		}
		if f.Unlocked() {
			s.UnlockedGroups = 1
		}
	}
	return s
}

// GroupFlags is one group's zero-variance flags as its advantage records
// carry them: a record with only ZeroVariance (of the outcome rewards,
// before rubric shaping) and ZeroVarianceAfter (of the shaped totals) set,
// each true when any record says so; its Unlocked says whether shaping
// unlocked the group.
func GroupFlags(advs []model.Advantage) model.Advantage {
	var f model.Advantage
	for _, a := range advs {
		f.ZeroVariance = f.ZeroVariance || a.ZeroVariance
		f.ZeroVarianceAfter = f.ZeroVarianceAfter || a.ZeroVarianceAfter
	}
	return f
}

// PoolHistory walks run r's event log once and returns the rubric pool
// sizes at the end of every step, by PoolTracker's step rule.
func PoolHistory(r *store.RunTx) ([]PoolSizes, error) {
	var pt PoolTracker
	if _, err := pt.observeEvents(r, 1, nil, nil); err != nil {
		return nil, err
	}
	return pt.Sizes(), nil
}

// observeEvents feeds the tracker run r's events from seq from on, and
// returns the seq after the last one read. advSteps, when not nil, gets
// the step of every advantage record written in that stretch; stale, when
// not nil, follows the same events.
func (p *PoolTracker) observeEvents(r *store.RunTx, from uint64, advSteps map[uint64]bool, stale *StalenessTracker) (next uint64, err error) {
	next = from
	err = r.Events(from, func(e model.Event) error {
		if stale != nil {
			if err := stale.observe(e); err != nil {
				return err
			}
		}
		var rb *model.Rubric
		if e.Rubric != 0 { // a rubric's own events name it; the rest need no look-up
			if rec, ok := store.RecordFor(e.Kind).(*model.Rubric); ok {
				if err := store.DecodePayload(e, rec); err != nil {
					return err
				}
				rb = rec
			}
		}
		if e.Kind == model.EvAdvantage && advSteps != nil {
			advSteps[e.Step] = true
		}
		p.Observe(e.Step, rb)
		next = e.Seq + 1
		return nil
	})
	return next, err
}

// PoolTracker follows each rubric's pool through the event log and records
// the pool sizes at the end of every step. The step an event belongs to is
// the highest step any event so far carried: a rubric written for step s+1
// before s+1's first group opened (a trainer proposing rubrics as the step
// begins) is not part of step s's pools, and an event stamped with an
// earlier step (a late write for the last completed step) never takes the
// tracker back.
type PoolTracker struct {
	pool  map[uint64]model.RubricPool
	step  uint64
	sizes []PoolSizes
}

// Observe takes the next event's step and, for a rubric event, the rubric
// after it (nil otherwise).
func (p *PoolTracker) Observe(step uint64, rb *model.Rubric) {
	if step > p.step {
		p.emit()
		p.step = step
	}
	if rb != nil {
		if p.pool == nil {
			p.pool = map[uint64]model.RubricPool{}
		}
		p.pool[rb.ID] = rb.Pool
	}
}

func (p *PoolTracker) emit() {
	if ps, ok := p.current(); ok {
		p.sizes = append(p.sizes, ps)
	}
}

// current counts the pools as they stand in the step being followed.
func (p *PoolTracker) current() (PoolSizes, bool) {
	if p.step == 0 || len(p.pool) == 0 {
		return PoolSizes{}, false
	}
	ps := PoolSizes{Step: p.step}
	for _, pl := range p.pool {
		switch pl {
		case model.PoolCandidate:
			ps.Candidate++
		case model.PoolPublic:
			ps.Public++
		case model.PoolRetired:
			ps.Retired++
		case model.PoolMerged:
			ps.Merged++
		}
	}
	return ps, true
}

// Sizes closes the last step and returns the pool sizes per step.
func (p *PoolTracker) Sizes() []PoolSizes {
	p.emit()
	p.step = 0 // a second call adds nothing
	return p.sizes
}

// SizesSoFar returns the pool sizes per step, the step being followed
// counted as it stands, and leaves the tracker able to go on observing.
func (p *PoolTracker) SizesSoFar() []PoolSizes {
	out := slices.Clone(p.sizes)
	if ps, ok := p.current(); ok {
		out = append(out, ps)
	}
	return out
}
