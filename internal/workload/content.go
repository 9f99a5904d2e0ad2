package workload

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/patrdb/patrdb/model"
)

// vocab is the size of the token id space, that of a current open-weight
// tokenizer, so token ids have realistic digit counts in JSON.
const vocab = 151_936

// pool holds the bytes turns are cut from. Generated turns reference slices
// of it, so a batch of trees costs little memory until Materialize copies a
// transaction's turns into fresh memory, the way a trainer would hold them.
type pool struct {
	text   string // words, code-like punctuation, newlines and quotes
	tokens []uint32
	lps    []float32
}

func newPool(rng *rand.Rand, textBytes, nTokens int) *pool {
	const letters = "abcdefghijklmnopqrstuvwxyz"
	punct := []string{"{", "}", "(", ")", ";", ":=", "==", "\n", "\n\t", "\"", "//", "->", "_", "."}
	words := make([]string, 512)
	for i := range words {
		n := 2 + rng.IntN(9)
		var b strings.Builder
		for range n {
			b.WriteByte(letters[rng.IntN(len(letters))])
		}
		words[i] = b.String()
	}
	var b strings.Builder
	b.Grow(textBytes + 16)
	for b.Len() < textBytes {
		if rng.IntN(6) == 0 {
			b.WriteString(punct[rng.IntN(len(punct))])
		} else {
			b.WriteString(words[rng.IntN(len(words))])
		}
		b.WriteByte(' ')
	}
	p := &pool{text: b.String(), tokens: make([]uint32, nTokens), lps: make([]float32, nTokens)}
	for i := range p.tokens {
		p.tokens[i] = uint32(rng.IntN(vocab))
		// Sampled tokens are mostly confident: logprobs near 0 with a tail.
		p.lps[i] = float32(-rng.ExpFloat64() * 0.6)
	}
	return p
}

// sweTurn cuts one swe-like turn out of the pool: about meanAct action
// tokens with logprobs, about meanObs observation tokens, and ~4 bytes of
// text per token for both.
func (p *pool) sweTurn(rng *rand.Rand, meanAct, meanObs, bytesPerToken int) model.Turn {
	na := clampInt(int(float64(meanAct)+rng.NormFloat64()*float64(meanAct)/4), 16, 4*meanAct)
	// Observations (tool output, file views) are heavier-tailed: log-normal
	// with the requested mean.
	const sigma = 0.4
	no := clampInt(int(float64(meanObs)*math.Exp(rng.NormFloat64()*sigma-sigma*sigma/2)), 16, 4*meanObs)
	return model.Turn{
		Action:            p.cutText(rng, na*bytesPerToken),
		ActionTokens:      p.cutTokens(rng, na),
		ActionLogprobs:    p.cutLogprobs(rng, na),
		Observation:       p.cutText(rng, no*bytesPerToken),
		ObservationTokens: p.cutTokens(rng, no),
	}
}

func (p *pool) cutText(rng *rand.Rand, n int) string {
	n = min(n, len(p.text))
	off := rng.IntN(len(p.text) - n + 1)
	return p.text[off : off+n]
}

func (p *pool) cutTokens(rng *rand.Rand, n int) []uint32 {
	n = min(n, len(p.tokens))
	off := rng.IntN(len(p.tokens) - n + 1)
	return p.tokens[off : off+n : off+n]
}

func (p *pool) cutLogprobs(rng *rand.Rand, n int) []float32 {
	n = min(n, len(p.lps))
	off := rng.IntN(len(p.lps) - n + 1)
	return p.lps[off : off+n : off+n]
}

// FrozenLake actions and observations, as the demo trainer writes them.
var (
	lakeActions = []string{"LEFT", "DOWN", "RIGHT", "UP"}
	lakeObs     = func() []string {
		out := make([]string, 64)
		for i := range out {
			out[i] = "state " + strconv.Itoa(i)
		}
		return out
	}()
)

func lakeTurn(rng *rand.Rand) model.Turn {
	a := rng.IntN(len(lakeActions))
	s := rng.IntN(16)
	return model.Turn{
		Action:            lakeActions[a],
		ActionTokens:      []uint32{uint32(a)},
		ActionLogprobs:    []float32{float32(-rng.ExpFloat64() * 0.5)},
		Observation:       lakeObs[s],
		ObservationTokens: []uint32{uint32(s)},
	}
}

// MaterializeTurn returns a deep copy of t in fresh memory.
func MaterializeTurn(t model.Turn) model.Turn {
	return model.Turn{
		Action:            strings.Clone(t.Action),
		ActionTokens:      slices.Clone(t.ActionTokens),
		ActionLogprobs:    slices.Clone(t.ActionLogprobs),
		Observation:       strings.Clone(t.Observation),
		ObservationTokens: slices.Clone(t.ObservationTokens),
		Reward:            t.Reward,
		Done:              t.Done,
	}
}

// TurnBytes is a turn's logical size: its text plus 4 bytes per token id
// and logprob plus its reward and done flag. Every contender is credited
// with the same bytes for the same turn.
func TurnBytes(t *model.Turn) int {
	return len(t.Action) + len(t.Observation) + 4*(len(t.ActionTokens)+len(t.ActionLogprobs)+len(t.ObservationTokens)) + 9
}

func clampInt(x, lo, hi int) int { return max(lo, min(hi, x)) }

func clamp01(x float64) float64 { return max(0, min(1, x)) }
