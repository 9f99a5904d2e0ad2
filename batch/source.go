package batch

import (
	"fmt"

	"github.com/patrdb/patrdb/model"
)

// Source is what a step's batch is built from: the step's closed groups
// with their prompts, the leaves that become rows with their paths and
// advantages, and the turns those paths cover, token arrays as the store
// holds them (little-endian 4-byte words). Assemble turns it into a Batch
// under any Options' layout, credit rule, normalisation and policy
// window; every figure the batch carries is computed there.
//
// Package batchdb reads a Source from the store (its arrays then alias
// the transaction's pages); package batch/sourcewire carries one over the
// wire, several times smaller than the batch it becomes, since a token
// several rows share travels once and the per-token arrays that follow
// from the turns (mask, positions, versions, coefficients) do not travel.
type Source struct {
	Run    string
	Step   uint64
	Groups []SourceGroup // the closed groups that hold the rows, in id order
	Open   []uint64      // the step's groups still open (no rows)
	// The rows: group after group (Group ascending), in leaf id order
	// within a group, every one's status one a row can have
	// (Options.Includes).
	Leaves []SourceLeaf
	// The turns the paths cover: Nodes[i] has Nodes[i].Count turns,
	// Turns holds them back to back, Nodes in id order. Every node on a
	// path is there, with at least the turns the path takes of it.
	Nodes []model.Segment
	Turns []SourceTurn
}

// SourceGroup is a closed group: its id and prompt.
type SourceGroup struct {
	ID           uint64
	PromptTokens []uint32
}

// SourceLeaf is a leaf that becomes a row.
type SourceLeaf struct {
	ID        uint64
	Group     int // index in Source.Groups
	Status    model.NodeStatus
	Reward    float64
	Advantage float64 // its GRPO advantage (model.Advantage); 0 when it has none
	Path      []model.Segment
}

// SourceTurn is a stored turn's token arrays and the scalars a batch
// carries of it.
type SourceTurn struct {
	ActionTokens      []byte // 4 bytes per token id
	ActionLogprobs    []byte // 4 bytes per logprob (float32 bits), one per action token, or empty
	ObservationTokens []byte
	Reward            float64
	PolicyVersion     uint64
}

// Check reports a turn whose arrays are not whole 4-byte words, or whose
// logprobs are neither one per action token nor absent.
func (t SourceTurn) Check() error {
	switch {
	case len(t.ActionTokens)%4 != 0 || len(t.ObservationTokens)%4 != 0 || len(t.ActionLogprobs)%4 != 0:
		return fmt.Errorf("token arrays of %d, %d and %d bytes, not whole 4-byte words", len(t.ActionTokens), len(t.ActionLogprobs), len(t.ObservationTokens))
	case len(t.ActionLogprobs) != 0 && len(t.ActionLogprobs) != len(t.ActionTokens):
		return fmt.Errorf("%d logprob bytes for %d action token bytes", len(t.ActionLogprobs), len(t.ActionTokens))
	}
	return nil
}

// validate reports the first thing in s that Assemble cannot build from
// (ErrSource): a source from the wire is checked whole before any of it is
// used. It returns where each node's turns start in s.Turns.
func (s *Source) validate() (map[uint64]int, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrSource, fmt.Sprintf(format, args...))
	}
	turnAt := make(map[uint64]int, len(s.Nodes))
	count := map[uint64]int{}
	at := 0
	for i, n := range s.Nodes {
		if i > 0 && n.Node <= s.Nodes[i-1].Node {
			return nil, bad("node %d listed after node %d", n.Node, s.Nodes[i-1].Node)
		}
		if n.Count < 0 {
			return nil, bad("node %d claims %d turns", n.Node, n.Count)
		}
		turnAt[n.Node], count[n.Node] = at, n.Count
		at += n.Count
	}
	if at != len(s.Turns) {
		return nil, bad("%d turns, %d claimed by nodes", len(s.Turns), at)
	}
	for i, t := range s.Turns {
		if err := t.Check(); err != nil {
			return nil, bad("turn %d: %v", i, err)
		}
	}
	for i, l := range s.Leaves {
		switch {
		case l.Group < 0 || l.Group >= len(s.Groups):
			return nil, bad("leaf %d in group %d of %d", l.ID, l.Group, len(s.Groups))
		case i > 0 && (l.Group < s.Leaves[i-1].Group || l.Group == s.Leaves[i-1].Group && l.ID <= s.Leaves[i-1].ID):
			return nil, bad("leaf %d of group %d listed after leaf %d of group %d", l.ID, l.Group, s.Leaves[i-1].ID, s.Leaves[i-1].Group)
		case !rowStatus(l.Status):
			return nil, bad("leaf %d is %q, not a status a row has", l.ID, l.Status)
		}
		for _, seg := range l.Path {
			if n, ok := count[seg.Node]; !ok || seg.Count < 0 || seg.Count > n {
				return nil, bad("the path of leaf %d takes %d turns of node %d, which has %d", l.ID, seg.Count, seg.Node, n)
			}
		}
	}
	return turnAt, nil
}

func rowStatus(s model.NodeStatus) bool {
	_, ok := statusCodes[s]
	return ok
}
