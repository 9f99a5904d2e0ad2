package replay

import (
	"github.com/patrdb/patrdb/model"
	"maps"
	"slices"

	"github.com/patrdb/patrdb/store"
)

// StalenessTracker follows a run's event log and measures, step by step,
// how stale its data was: each turns event against the run's policy
// version at that point of the log (the version the last run.version
// event before it published), and each closed group's leaves — their
// whole paths, inherited prefixes included — against the version when
// the group closed. It reads nothing but the log: each node's parent
// (node.add) and oldest version (node.turns), each group's leaves
// (adv.put). Feed it every event in log order with its decoded record
// (Observe).
type StalenessTracker struct {
	version uint64
	steps   map[uint64]*staleSums
	nodes   map[uint64]staleNode   // nodes of groups not closed yet
	groups  map[uint64]*staleGroup // open groups: their nodes and leaves
}

type staleNode struct{ parent, oldest uint64 }

type staleGroup struct{ nodes, leaves []uint64 }

type staleSums struct {
	sampled, sampledN   float64
	sampledMax          uint64
	consumed, consumedN float64
	consumedMax         uint64
}

func (t *StalenessTracker) step(s uint64) *staleSums {
	if t.steps == nil {
		t.steps = map[uint64]*staleSums{}
	}
	if t.steps[s] == nil {
		t.steps[s] = &staleSums{}
	}
	return t.steps[s]
}

// behind is how far version v lags current (0 when it does not, or when
// v says nothing).
func behind(current, v uint64) (uint64, bool) {
	if v == 0 {
		return 0, false
	}
	if v >= current {
		return 0, true
	}
	return current - v, true
}

// Observe feeds one event, with its payload's record decoded (a
// model.Run, *model.Node, *model.TurnsPayload or *model.Advantage for
// those kinds; nil for others).
func (t *StalenessTracker) Observe(e model.Event, rec any) {
	switch e.Kind {
	case model.EvRunVersion:
		if run, ok := rec.(*model.Run); ok {
			t.version = max(t.version, run.PolicyVersion)
		}
	case model.EvNodeAdd:
		if n, ok := rec.(*model.Node); ok {
			t.node(n.ID, n.Parent)
			g := t.group(e.Group)
			g.nodes = append(g.nodes, n.ID)
		}
	case model.EvTurns:
		p, ok := rec.(*model.TurnsPayload)
		if !ok {
			return
		}
		if n, ok := t.nodes[e.Node]; ok {
			n.oldest = p.MinVersion
			t.nodes[e.Node] = n
		}
		if lag, ok := behind(t.version, p.Oldest); ok && p.Count > 0 {
			s := t.step(e.Step)
			s.sampled += float64(lag) * float64(p.Count)
			s.sampledN += float64(p.Count)
			s.sampledMax = max(s.sampledMax, lag)
		}
	case model.EvAdvantage:
		if a, ok := rec.(*model.Advantage); ok {
			g := t.group(a.Group)
			g.leaves = append(g.leaves, a.Leaf)
		}
	case model.EvGroupClose:
		t.close(e.Step, e.Group)
	}
}

func (t *StalenessTracker) node(id, parent uint64) {
	if t.nodes == nil {
		t.nodes = map[uint64]staleNode{}
	}
	t.nodes[id] = staleNode{parent: parent}
}

func (t *StalenessTracker) group(id uint64) *staleGroup {
	if t.groups == nil {
		t.groups = map[uint64]*staleGroup{}
	}
	if t.groups[id] == nil {
		t.groups[id] = &staleGroup{}
	}
	return t.groups[id]
}

// close measures a closed group's leaves by the oldest version on their
// paths, and forgets the group.
func (t *StalenessTracker) close(step, id uint64) {
	g := t.groups[id]
	if g == nil {
		return
	}
	s := t.step(step)
	for _, leaf := range g.leaves {
		oldest := uint64(0)
		for id, hops := leaf, 0; id != 0 && hops <= len(g.nodes); hops++ {
			n, ok := t.nodes[id]
			if !ok {
				break
			}
			if n.oldest > 0 && (oldest == 0 || n.oldest < oldest) {
				oldest = n.oldest
			}
			id = n.parent
		}
		lag, ok := behind(t.version, oldest)
		if !ok {
			continue
		}
		s.consumed += float64(lag)
		s.consumedN++
		s.consumedMax = max(s.consumedMax, lag)
	}
	for _, n := range g.nodes {
		delete(t.nodes, n)
	}
	delete(t.groups, id)
}

// Of returns step's figures so far.
func (t *StalenessTracker) Of(step uint64) model.Staleness {
	s := t.steps[step]
	if s == nil {
		return model.Staleness{}
	}
	out := model.Staleness{SampledMax: s.sampledMax, ConsumedMax: s.consumedMax}
	if s.sampledN > 0 {
		out.SampledMean = s.sampled / s.sampledN
	}
	if s.consumedN > 0 {
		out.ConsumedMean = s.consumed / s.consumedN
	}
	return out
}

// Total returns the figures over every step observed.
func (t *StalenessTracker) Total() model.Staleness {
	var all staleSums
	for _, s := range t.steps {
		all.sampled += s.sampled
		all.sampledN += s.sampledN
		all.sampledMax = max(all.sampledMax, s.sampledMax)
		all.consumed += s.consumed
		all.consumedN += s.consumedN
		all.consumedMax = max(all.consumedMax, s.consumedMax)
	}
	t2 := StalenessTracker{steps: map[uint64]*staleSums{0: &all}}
	return t2.Of(0)
}

// observe feeds one event read from the file, decoding the records the
// tracker needs.
func (t *StalenessTracker) observe(e model.Event) error {
	var rec any
	switch e.Kind {
	case model.EvRunVersion, model.EvNodeAdd, model.EvTurns, model.EvAdvantage:
		rec = store.RecordFor(e.Kind)
		if err := store.DecodePayload(e, rec); err != nil {
			return err
		}
	case model.EvGroupClose: // the event alone
	default:
		return nil
	}
	t.Observe(e, rec)
	return nil
}

// clone is a copy of t that t's further observations leave alone.
func (t *StalenessTracker) clone() *StalenessTracker {
	c := &StalenessTracker{version: t.version, steps: make(map[uint64]*staleSums, len(t.steps)),
		nodes: maps.Clone(t.nodes), groups: make(map[uint64]*staleGroup, len(t.groups))}
	for k, v := range t.steps {
		s := *v
		c.steps[k] = &s
	}
	for k, g := range t.groups {
		c.groups[k] = &staleGroup{nodes: slices.Clone(g.nodes), leaves: slices.Clone(g.leaves)}
	}
	return c
}
