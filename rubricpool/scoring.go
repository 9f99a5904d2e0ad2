package rubricpool

import (
	"fmt"

	"github.com/patrdb/patrdb/grpo"
)

// Outcome is a pairwise judge's verdict on the pair (A, B) as the Judgement
// names it, whatever order the judge was shown.
type Outcome int

// The zero Outcome is deliberately invalid, so a Judgement whose result was
// never set (or decoded from a record that lacked it) is rejected rather than
// silently counted as a win for A.
const (
	AWins Outcome = iota + 1
	BWins
	Tie
)

// String returns "a", "b", "tie" or "Outcome(n)" for an invalid value.
func (o Outcome) String() string {
	switch o {
	case AWins:
		return "a"
	case BWins:
		return "b"
	case Tie:
		return "tie"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Valid reports whether o is one of AWins, BWins, Tie.
func (o Outcome) Valid() bool { return o == AWins || o == BWins || o == Tie }

// Judgement is one pairwise comparison under one rubric. A and B are
// trajectory indices within the group; Result is already expressed in terms
// of A and B (the caller undoes any swap). Swapped records that the judge was
// shown B first, so position bias can be audited later; WinRates ignores it.
type Judgement struct {
	A, B    int
	Result  Outcome
	Swapped bool
}

// Check reports why j cannot be scored in a group of n trajectories, or nil.
// Use it on judgements read from outside before passing them to WinRates.
func (j Judgement) Check(n int) error {
	switch {
	case j.A < 0 || j.A >= n || j.B < 0 || j.B >= n:
		return fmt.Errorf("rubricpool: judgement (%d, %d) outside a group of %d", j.A, j.B, n)
	case j.A == j.B:
		return fmt.Errorf("rubricpool: judgement compares trajectory %d with itself", j.A)
	case !j.Result.Valid():
		return fmt.Errorf("rubricpool: judgement (%d, %d) has invalid result %v", j.A, j.B, j.Result)
	}
	return nil
}

// splitmix64 is the finaliser of SplitMix64 (Steele, Lea & Flood 2014): a
// bijective mix in which every input bit affects every output bit, so
// consecutive keys (step 1, 2, 3 …) give independent-looking bits.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Swap decides whether the judge is shown the pair in B, A order. It is a
// pure function of the seed and the keys (for example step, group, rubric id
// and the two node ids), so a resumed or replayed run presents every pair
// exactly as the original did, with no random-number state to persist. The
// order of the keys matters. Over many keys about half the pairs are swapped,
// which cancels a judge's preference for the first (or second) position.
func Swap(seed int64, keys ...uint64) bool {
	h := splitmix64(uint64(seed))
	for _, k := range keys {
		h = splitmix64(h ^ k)
	}
	return h>>63 == 1
}

// WinRates returns each trajectory's win rate in a group of n: wins plus half
// the ties, over the comparisons it took part in. A trajectory in no
// comparison gets 0.5, the neutral score, so it is neither rewarded nor
// penalised once scores are centred. WinRates panics on a judgement that
// fails Check: an index out of range or an unset result is a caller bug and
// would otherwise misattribute reward.
func WinRates(n int, judgements []Judgement) []float64 {
	wins := make([]float64, n)
	games := make([]int, n)
	for _, j := range judgements {
		if err := j.Check(n); err != nil {
			panic(err)
		}
		games[j.A]++
		games[j.B]++
		switch j.Result {
		case AWins:
			wins[j.A]++
		case BWins:
			wins[j.B]++
		case Tie:
			wins[j.A] += 0.5
			wins[j.B] += 0.5
		}
	}
	for i := range wins {
		if games[i] == 0 {
			wins[i] = 0.5
		} else {
			wins[i] /= float64(games[i])
		}
	}
	return wins
}

// Centre returns xs minus its mean, in a new slice. Centring within the group
// makes the rubric term redistribute reward among the group's trajectories
// instead of shifting the whole group, which GRPO's normalisation would
// cancel anyway.
func Centre(xs []float64) []float64 {
	out := make([]float64, len(xs))
	if len(xs) == 0 {
		return out
	}
	m := grpo.Mean(xs)
	for i, x := range xs {
		out[i] = x - m
	}
	return out
}

// GroupScore is the rubric score s̃ of each of n trajectories: the mean of
// its per-rubric win rates over the active rubrics, centred within the group.
// perRubric[k][i] is trajectory i's win rate under rubric k. With no rubric
// every score is 0, so shaping leaves the base reward alone. It panics when a
// row's length is not n.
func GroupScore(n int, perRubric [][]float64) []float64 {
	avg := make([]float64, n)
	if len(perRubric) == 0 {
		return avg
	}
	for k, row := range perRubric {
		if len(row) != n {
			panic(fmt.Sprintf("rubricpool: GroupScore: rubric %d scores %d trajectories, want %d", k, len(row), n))
		}
		for i, x := range row {
			avg[i] += x
		}
	}
	for i := range avg {
		avg[i] /= float64(len(perRubric))
	}
	return Centre(avg)
}
