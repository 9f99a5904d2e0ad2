package tree

import (
	"fmt"
	"math"
)

// The rules of a shaping, kept for every caller (a Shaper in the engine,
// the HTTP API, a trainer closing groups itself): each score is a win rate
// centred within the group, so it lies in [-1, 1]; Lambda is finite and
// >= 0, since a negative weight would reward what the rubrics rank worst;
// and there is exactly one score per leaf.

// check holds s's own values to the rules, before the group is read.
func (s *Shaping) check(group uint64) error {
	if !(s.Lambda >= 0) || math.IsInf(s.Lambda, 0) {
		return fmt.Errorf("%w: group %d: lambda %v, want a finite value >= 0", ErrInvalidShaping, group, s.Lambda)
	}
	for i, sc := range s.Scores {
		if !(sc >= -1 && sc <= 1) {
			return fmt.Errorf("%w: group %d: score %d is %v, outside [-1,1] (scores are win rates centred within the group)", ErrInvalidShaping, group, i, sc)
		}
	}
	if s.Leaf != nil && len(s.Leaf) != len(s.Scores) {
		return fmt.Errorf("%w: group %d: %d scores for %d named leaves", ErrInvalidShaping, group, len(s.Scores), len(s.Leaf))
	}
	return nil
}

// aligned returns s's scores in the order of leaves: as they are, or, when
// s names its leaves, looked up by id, each leaf exactly once.
func (s *Shaping) aligned(group uint64, leaves []Leaf) ([]float64, error) {
	if s.Leaf == nil {
		if len(s.Scores) != len(leaves) {
			return nil, fmt.Errorf("%w: %d shaping scores for %d leaves of group %d", ErrInvalidShaping, len(s.Scores), len(leaves), group)
		}
		return s.Scores, nil
	}
	at := make(map[uint64]int, len(s.Leaf))
	for i, id := range s.Leaf {
		if _, dup := at[id]; dup {
			return nil, fmt.Errorf("%w: group %d: leaf %d is scored twice", ErrInvalidShaping, group, id)
		}
		at[id] = i
	}
	out := make([]float64, len(leaves))
	for i, l := range leaves {
		j, ok := at[l.Node.ID]
		if !ok {
			return nil, fmt.Errorf("%w: group %d: no score for leaf %d", ErrInvalidShaping, group, l.Node.ID)
		}
		out[i] = s.Scores[j]
		delete(at, l.Node.ID)
	}
	for _, id := range s.Leaf {
		if _, left := at[id]; left {
			return nil, fmt.Errorf("%w: group %d: node %d is scored but is not one of its %d leaves", ErrInvalidShaping, group, id, len(leaves))
		}
	}
	return out, nil
}
