package replay

import (
	"fmt"
	"sort"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// AdvKey identifies an advantage record: one leaf of one group of a step.
type AdvKey struct {
	Step, Group, Leaf uint64
}

// State is a run as it stood right after one event of its log: every
// record the store keeps, rebuilt from the events alone. Records are values
// owned by the State; Apply replaces them as events arrive.
//
// Turns themselves are not part of it: a node's Turns count is, and the
// turn bodies are the same bytes at every point of the log (turn keys are
// deterministic, a rewrite after a crash writes the same turn again).
type State struct {
	Run string // run id
	Seq uint64 // the last event applied; 0 before any

	Info        model.Run
	Groups      map[uint64]model.Group
	Nodes       map[uint64]model.Node
	Rubrics     map[uint64]model.Rubric
	Advantages  map[AdvKey]model.Advantage
	Checkpoints map[uint64]model.Checkpoint
	// Custom counts the events of kinds defined above the store (e.g.
	// "rubric.judge"); they carry no record the store keeps.
	Custom map[model.EventKind]int

	children map[uint64][]uint64 // parent → child ids in creation (= id) order
}

// NewState returns the empty state of run id, before its first event.
func NewState(id string) *State {
	return &State{
		Run:         id,
		Groups:      map[uint64]model.Group{},
		Nodes:       map[uint64]model.Node{},
		Rubrics:     map[uint64]model.Rubric{},
		Advantages:  map[AdvKey]model.Advantage{},
		Checkpoints: map[uint64]model.Checkpoint{},
		Custom:      map[model.EventKind]int{},
		children:    map[uint64][]uint64{},
	}
}

// StateAt rebuilds the run as it stood right after event seq (0: before
// the first). A seq past the run's last event is ErrSeqRange.
func StateAt(r *store.RunTx, seq uint64) (*State, error) {
	s := NewState(r.ID())
	if seq == 0 {
		return s, nil
	}
	if last := r.LastSeq(); seq > last {
		return nil, fmt.Errorf("%w: event %d, run %q ends at event %d", ErrSeqRange, seq, r.ID(), last)
	}
	err := Iterate(r, 1, seq, s.Apply)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func logErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %w: %s", ErrLog, store.ErrCorrupt, fmt.Sprintf(format, args...))
}

// Apply advances the state by one event, which must come after the last
// one applied. An event that refers to a group or parent no earlier event
// created is ErrLog.
func (s *State) Apply(e Event) error {
	if e.Seq <= s.Seq {
		return logErrorf("event %d after event %d", e.Seq, s.Seq)
	}
	if e.Record == nil {
		var err error
		if e, err = Decode(e.Event); err != nil {
			return err
		}
	}
	switch rec := e.Record.(type) {
	case *model.Run:
		s.Info = *rec
	case *model.Group:
		s.Groups[rec.ID] = *rec
	case *model.Node:
		if err := s.applyNode(e, rec); err != nil {
			return err
		}
	case *model.TurnsPayload:
		n, ok := s.Nodes[e.Node]
		if !ok {
			return logErrorf("event %d: turns of node %d, which no event created", e.Seq, e.Node)
		}
		rec.Apply(&n)
		s.Nodes[e.Node] = n
	case *model.Advantage:
		s.Advantages[AdvKey{rec.Step, rec.Group, rec.Leaf}] = *rec
	case *model.Rubric:
		s.Rubrics[rec.ID] = *rec
	case *model.Checkpoint:
		s.Checkpoints[rec.Step] = *rec
	default:
		s.Custom[e.Kind]++
	}
	s.Seq = e.Seq
	return nil
}

func (s *State) applyNode(e Event, n *model.Node) error {
	if e.Kind != model.EvNodeAdd {
		if _, ok := s.Nodes[n.ID]; !ok {
			return logErrorf("event %d (%s): node %d, which no event created", e.Seq, e.Kind, n.ID)
		}
		s.Nodes[n.ID] = *n
		return nil
	}
	if _, ok := s.Nodes[n.ID]; ok {
		return logErrorf("event %d: node %d added twice", e.Seq, n.ID)
	}
	// AddNode rewrites the group's root list without an event of its own,
	// and the parent's child index has no record at all: both follow from
	// the node's parent pointer.
	if n.Parent == 0 {
		g, ok := s.Groups[n.Group]
		if !ok {
			return logErrorf("event %d: root node %d of group %d, which no event opened", e.Seq, n.ID, n.Group)
		}
		g.Roots = append(append([]uint64(nil), g.Roots...), n.ID)
		s.Groups[n.Group] = g
	} else {
		if _, ok := s.Nodes[n.Parent]; !ok {
			return logErrorf("event %d: node %d under parent %d, which no event created", e.Seq, n.ID, n.Parent)
		}
		s.children[n.Parent] = append(s.children[n.Parent], n.ID)
	}
	s.Nodes[n.ID] = *n
	return nil
}

// Frontier returns the ids of the active nodes in id order: what a resume
// at this point would continue.
func (s *State) Frontier() []uint64 {
	var out []uint64
	for id, n := range s.Nodes {
		if n.Status == model.NodeActive {
			out = append(out, id)
		}
	}
	sortIDs(out)
	return out
}

// Children returns a node's children in id order.
func (s *State) Children(id uint64) []uint64 {
	return append([]uint64(nil), s.children[id]...)
}

// GroupList returns the groups in (step, id) order, the store's key order.
func (s *State) GroupList() []model.Group {
	out := make([]model.Group, 0, len(s.Groups))
	for _, g := range s.Groups {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Step != out[j].Step {
			return out[i].Step < out[j].Step
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// GroupNodes returns the nodes of group id, roots first, then breadth-first
// (the order of store.RunTx.GroupNodes).
func (s *State) GroupNodes(id uint64) []model.Node {
	g, ok := s.Groups[id]
	if !ok {
		return nil
	}
	var out []model.Node
	queue := append([]uint64(nil), g.Roots...)
	for len(queue) > 0 {
		n := s.Nodes[queue[0]]
		queue = append(queue[1:], s.children[n.ID]...)
		out = append(out, n)
	}
	return out
}

// Pools returns the rubric ids in each pool, in id order.
func (s *State) Pools() map[model.RubricPool][]uint64 {
	out := map[model.RubricPool][]uint64{}
	for id, rb := range s.Rubrics {
		out[rb.Pool] = append(out[rb.Pool], id)
	}
	for _, ids := range out {
		sortIDs(ids)
	}
	return out
}

func sortIDs(ids []uint64) { sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] }) }
