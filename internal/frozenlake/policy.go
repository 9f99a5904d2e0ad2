package frozenlake

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// Policy is a tabular softmax policy: one row of four logits per board
// position, π(a|pos) = softmax(Logits[pos])[a]. It is the demo trainer's
// stand-in for an LLM: small enough to checkpoint inline in the store, yet
// trained with the same clipped GRPO surrogate, so PaTR and plain GRPO can
// be compared on it at equal environment-step budget.
//
// Methods taking a position panic if it is outside [0, len(Logits)), like a
// slice index would: asking a 16-state policy about cell 40 means the wrong
// map was wired up, which no fallback could make right. A Policy is not safe
// for concurrent use while Update or UnmarshalBinary runs.
type Policy struct {
	Logits [][NumActions]float64
}

// NewPolicy returns the uniform policy (all logits zero) over nStates
// positions; a negative count is treated as zero.
func NewPolicy(nStates int) *Policy {
	return &Policy{Logits: make([][NumActions]float64, max(nStates, 0))}
}

// NumStates is the number of positions the policy covers.
func (p *Policy) NumStates() int { return len(p.Logits) }

// Clone returns a deep copy, e.g. the "old" policy a PPO epoch loop keeps.
func (p *Policy) Clone() *Policy {
	return &Policy{Logits: append([][NumActions]float64(nil), p.Logits...)}
}

func (p *Policy) row(pos int) *[NumActions]float64 {
	if pos < 0 || pos >= len(p.Logits) {
		panic(fmt.Sprintf("frozenlake: position %d outside policy of %d states", pos, len(p.Logits)))
	}
	return &p.Logits[pos]
}

// logSumExp is computed around the largest logit so that large logits
// neither overflow nor lose the small probabilities entirely.
func logSumExp(z *[NumActions]float64) float64 {
	m := z[0]
	for _, v := range z[1:] {
		m = math.Max(m, v)
	}
	var s float64
	for _, v := range z {
		s += math.Exp(v - m)
	}
	return m + math.Log(s)
}

// LogProbs returns log π(·|pos).
func (p *Policy) LogProbs(pos int) [NumActions]float64 {
	z := p.row(pos)
	lse := logSumExp(z)
	var out [NumActions]float64
	for i, v := range z {
		out[i] = v - lse
	}
	return out
}

// Probs returns π(·|pos); the entries are non-negative and sum to 1 up to
// rounding.
func (p *Policy) Probs(pos int) [NumActions]float64 {
	lp := p.LogProbs(pos)
	var out [NumActions]float64
	for i, v := range lp {
		out[i] = math.Exp(v)
	}
	return out
}

// LogProb returns log π(a|pos), or −Inf for an invalid action (which the
// policy never takes).
func (p *Policy) LogProb(pos int, a Action) float64 {
	if !a.Valid() {
		p.row(pos) // keep the position check consistent
		return math.Inf(-1)
	}
	return p.LogProbs(pos)[a]
}

// Entropy returns the entropy of π(·|pos) in nats (log 4 for a uniform row),
// a cheap signal of how settled the policy is at a cell.
func (p *Policy) Entropy(pos int) float64 {
	lp := p.LogProbs(pos)
	var h float64
	for _, v := range lp {
		if pv := math.Exp(v); pv > 0 {
			h -= pv * v
		}
	}
	return h
}

// Sample draws an action from π(·|pos) by inverse CDF on the caller's
// uniform u ∈ [0,1) (see [Uniform]), and returns it with its log-probability
// — the OldLogProb a later [Sample] record needs. Taking u from the caller
// keeps sampling reproducible on resume. A u at or beyond the rounded total
// mass falls to the last action with non-zero probability.
func (p *Policy) Sample(pos int, u float64) (Action, float64) {
	lp := p.LogProbs(pos)
	var cum float64
	last := Action(0)
	for i, v := range lp {
		pr := math.Exp(v)
		if pr == 0 {
			continue
		}
		last = Action(i)
		cum += pr
		if u < cum {
			return last, v
		}
	}
	return last, lp[last]
}

// Greedy returns the most probable action at pos; ties go to the lowest
// action number so evaluation is deterministic.
func (p *Policy) Greedy(pos int) Action {
	z := p.row(pos)
	best := 0
	for i := 1; i < NumActions; i++ {
		if z[i] > z[best] {
			best = i
		}
	}
	return Action(best)
}

// Sample is one (state, action) of a trajectory for the policy update:
// the action's log-probability under the policy that generated it and the
// advantage of the trajectory it belongs to (GRPO gives every step of a
// trajectory the trajectory's group-normalised advantage).
type Sample struct {
	Pos        int
	Action     Action
	OldLogProb float64
	Advantage  float64
}

// UpdateStats reports one Update, measured with the parameters before the
// step, as PPO implementations log them.
type UpdateStats struct {
	// Samples is how many samples were used; Skipped how many were ignored
	// for an out-of-range position, an invalid action or a non-finite value.
	Samples, Skipped int
	// Objective is the mean clipped surrogate min(r·A, clip(r)·A).
	Objective float64
	// MeanRatio is the mean importance ratio r = π/π_old.
	MeanRatio float64
	// ClipFraction is the share of samples whose gradient the clip removed.
	ClipFraction float64
	// ApproxKL is the mean of OldLogProb − log π, an estimate of
	// KL(π_old‖π) that grows as epochs move the policy away from the data.
	ApproxKL float64
	// GradNorm is the Euclidean norm of the gradient applied to the logits.
	GradNorm float64
}

// Update takes one gradient-ascent step of size lr on the clipped surrogate
//
//	L = mean_i min(r_i·A_i, clip(r_i, 1−ε, 1+ε)·A_i),  r_i = exp(log π(a_i|s_i) − OldLogProb_i)
//
// with ε = clipEps (negative values count as 0). The gradient is analytic:
// for a sample whose unclipped term is the minimum, ∂(r·A)/∂z_s = A·r·(e_a −
// π(·|s)) on the logits z_s of its position; a sample is clipped — and adds
// nothing — when A > 0 and r > 1+ε or when A < 0 and r < 1−ε, which is
// exactly when the min selects the constant clipped term. That is what stops
// one batch from pushing a probability ratio far past 1+ε however many
// epochs the caller runs. The gradient of every sample is computed before
// any logit moves, so the step does not depend on the order of samples
// (beyond floating-point rounding).
//
// Samples with an out-of-range position, an invalid action or non-finite
// numbers are skipped and counted, not fatal: they come from stored records.
// A non-finite or non-positive lr computes the statistics but changes
// nothing.
func (p *Policy) Update(samples []Sample, lr, clipEps float64) UpdateStats {
	var st UpdateStats
	eps := math.Max(clipEps, 0)
	if math.IsNaN(eps) {
		eps = 0
	}
	type term struct {
		pos  int
		a    Action
		coef float64 // A·r when the unclipped term is active, else 0
	}
	terms := make([]term, 0, len(samples))
	for _, s := range samples {
		if s.Pos < 0 || s.Pos >= len(p.Logits) || !s.Action.Valid() || !finite(s.OldLogProb) || !finite(s.Advantage) {
			st.Skipped++
			continue
		}
		lp := p.LogProbs(s.Pos)[s.Action]
		r := math.Exp(lp - s.OldLogProb)
		if !finite(r) {
			st.Skipped++
			continue
		}
		A := s.Advantage
		rc := math.Min(math.Max(r, 1-eps), 1+eps)
		st.Objective += math.Min(r*A, rc*A)
		st.MeanRatio += r
		st.ApproxKL += s.OldLogProb - lp
		clipped := (A > 0 && r > 1+eps) || (A < 0 && r < 1-eps)
		t := term{pos: s.Pos, a: s.Action}
		if clipped {
			st.ClipFraction++
		} else {
			t.coef = A * r
		}
		terms = append(terms, t)
	}
	st.Samples = len(terms)
	if st.Samples == 0 {
		return st
	}
	n := float64(st.Samples)
	st.Objective /= n
	st.MeanRatio /= n
	st.ApproxKL /= n
	st.ClipFraction /= n
	// A dense gradient table (the policy is tabular and small) keeps the
	// summation order, and so every bit of the result, deterministic.
	grad := make([][NumActions]float64, len(p.Logits))
	for _, t := range terms {
		if t.coef == 0 {
			continue
		}
		g := &grad[t.pos]
		pi := p.Probs(t.pos)
		c := t.coef / n
		for b := range NumActions {
			ind := 0.0
			if Action(b) == t.a {
				ind = 1
			}
			g[b] += c * (ind - pi[b])
		}
	}
	var norm2 float64
	for _, g := range grad {
		for _, v := range g {
			norm2 += v * v
		}
	}
	st.GradNorm = math.Sqrt(norm2)
	if !finite(lr) || lr <= 0 {
		return st
	}
	for pos := range grad {
		for b, v := range grad[pos] {
			p.Logits[pos][b] += lr * v
		}
	}
	return st
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// Binary form: "FLPL" | version u16 | actions u16 | states u32 | states×4
// float64 logits | CRC32C of everything before it, all little-endian. The
// checksum matters because the policy rides inline in a checkpoint record,
// and a torn or bit-flipped copy must be refused, not trained on.
const (
	policyMagic   = "FLPL"
	policyVersion = 1
	policyHeader  = 12
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrBadPolicy is returned (wrapped with the reason) by UnmarshalBinary for
// any input that is not a policy this package wrote.
var ErrBadPolicy = errors.New("frozenlake: bad policy encoding")

// AppendBinary appends the binary form of the policy to b.
func (p *Policy) AppendBinary(b []byte) ([]byte, error) {
	start := len(b)
	b = append(b, policyMagic...)
	b = binary.LittleEndian.AppendUint16(b, policyVersion)
	b = binary.LittleEndian.AppendUint16(b, NumActions)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(p.Logits)))
	for _, row := range p.Logits {
		for _, v := range row {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli)), nil
}

// MarshalBinary encodes the policy (see AppendBinary for the layout).
func (p *Policy) MarshalBinary() ([]byte, error) {
	return p.AppendBinary(make([]byte, 0, policyHeader+len(p.Logits)*NumActions*8+4))
}

// UnmarshalBinary replaces the policy with the decoded one. Any malformed
// input — short, wrong magic, version or action count, a length that does
// not match the state count, a bad checksum, or a non-finite logit — returns
// an error wrapping ErrBadPolicy and leaves p untouched; it never panics.
func (p *Policy) UnmarshalBinary(data []byte) error {
	if len(data) < policyHeader+4 {
		return fmt.Errorf("%w: %d bytes, need at least %d", ErrBadPolicy, len(data), policyHeader+4)
	}
	if string(data[:4]) != policyMagic {
		return fmt.Errorf("%w: magic %q", ErrBadPolicy, data[:4])
	}
	if v := binary.LittleEndian.Uint16(data[4:]); v != policyVersion {
		return fmt.Errorf("%w: version %d, this build reads %d", ErrBadPolicy, v, policyVersion)
	}
	if k := binary.LittleEndian.Uint16(data[6:]); k != NumActions {
		return fmt.Errorf("%w: %d actions, want %d", ErrBadPolicy, k, NumActions)
	}
	n := uint64(binary.LittleEndian.Uint32(data[8:]))
	if want := policyHeader + n*NumActions*8 + 4; uint64(len(data)) != want {
		return fmt.Errorf("%w: %d bytes for %d states, want %d", ErrBadPolicy, len(data), n, want)
	}
	body := data[:len(data)-4]
	if got, want := crc32.Checksum(body, castagnoli), binary.LittleEndian.Uint32(data[len(data)-4:]); got != want {
		return fmt.Errorf("%w: checksum %08x, stored %08x", ErrBadPolicy, got, want)
	}
	logits := make([][NumActions]float64, n)
	off := policyHeader
	for i := range logits {
		for b := range NumActions {
			v := math.Float64frombits(binary.LittleEndian.Uint64(data[off:]))
			if !finite(v) {
				return fmt.Errorf("%w: logit %d/%d is %v", ErrBadPolicy, i, b, v)
			}
			logits[i][b] = v
			off += 8
		}
	}
	p.Logits = logits
	return nil
}

// Evaluate returns the greedy policy's success rate over episodes episodes
// on m: the fraction that reach the goal within the step limit. Slips draw
// from Uniform(seed, KeySlip, episode, turn), so the figure is reproducible
// and two policies evaluated with the same seed face the same ice. It
// returns 0 for episodes ≤ 0, and panics if p covers fewer positions than m
// has cells (the wrong map for this policy).
func (p *Policy) Evaluate(m Map, slippery bool, episodes int, seed int64) float64 {
	return p.evaluate(m, slippery, episodes, seed, false)
}

// EvaluateSampled is Evaluate with actions sampled from the policy, as the
// rollouts sample them (draws from Uniform(seed, KeyAction, episode, turn)).
// Undiscounted GRPO never penalises a harmless wall bump, so the greedy
// action can loop in place where the sampled policy walks on; the two
// figures together say which happened.
func (p *Policy) EvaluateSampled(m Map, slippery bool, episodes int, seed int64) float64 {
	return p.evaluate(m, slippery, episodes, seed, true)
}

func (p *Policy) evaluate(m Map, slippery bool, episodes int, seed int64, sampled bool) float64 {
	if episodes <= 0 {
		return 0
	}
	wins := 0
	for ep := range episodes {
		s := m.Start()
		for !s.Done {
			var u float64
			if slippery {
				u = Uniform(seed, KeySlip, uint64(ep), uint64(s.Steps))
			}
			a := p.Greedy(s.Pos)
			if sampled {
				a, _ = p.Sample(s.Pos, Uniform(seed, KeyAction, uint64(ep), uint64(s.Steps)))
			}
			s = m.Step(s, a, slippery, u)
		}
		if s.Reward == 1 {
			wins++
		}
	}
	return float64(wins) / float64(episodes)
}
