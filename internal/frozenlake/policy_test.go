package frozenlake

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"testing"
)

func sum4(v [NumActions]float64) float64 { return v[0] + v[1] + v[2] + v[3] }

func TestProbsSumToOne(t *testing.T) {
	p := NewPolicy(16)
	for pos := range 16 {
		for _, pr := range p.Probs(pos) {
			if pr != 0.25 {
				t.Fatalf("new policy not uniform at %d: %v", pos, p.Probs(pos))
			}
		}
	}
	p.Logits[3] = [4]float64{1000, -1000, 3, 0}
	p.Logits[4] = [4]float64{-2, 0.5, 7, 1}
	for pos := range 16 {
		pr := p.Probs(pos)
		if math.Abs(sum4(pr)-1) > 1e-12 {
			t.Errorf("pos %d: probs %v sum to %v", pos, pr, sum4(pr))
		}
		for a, v := range pr {
			if math.IsNaN(v) || v < 0 {
				t.Errorf("pos %d: bad prob %v", pos, v)
			}
			if lp := p.LogProb(pos, Action(a)); math.Abs(math.Exp(lp)-v) > 1e-12 {
				t.Errorf("pos %d: LogProb %v vs prob %v", pos, lp, v)
			}
		}
	}
	if p.Greedy(3) != Left || p.Greedy(4) != Right || p.Greedy(0) != Left {
		t.Error("Greedy: want argmax, ties to the lowest action")
	}
	if !math.IsInf(p.LogProb(0, Action(5)), -1) {
		t.Error("invalid action must have log-prob -Inf")
	}
	if h := NewPolicy(1).Entropy(0); math.Abs(h-math.Log(4)) > 1e-12 {
		t.Errorf("uniform entropy %v", h)
	}
	if NewPolicy(-3).NumStates() != 0 {
		t.Error("negative size")
	}
	defer func() {
		if recover() == nil {
			t.Error("out-of-range position must panic")
		}
	}()
	p.Probs(16)
}

func TestSampleInverseCDF(t *testing.T) {
	p := NewPolicy(1)
	p.Logits[0] = [4]float64{math.Log(0.1), math.Log(0.2), math.Log(0.3), math.Log(0.4)}
	for _, c := range []struct {
		u    float64
		want Action
	}{{0, Left}, {0.099, Left}, {0.1001, Down}, {0.299, Down}, {0.31, Right}, {0.599, Right}, {0.61, Up}, {math.Nextafter(1, 0), Up}, {1.5, Up}} {
		a, lp := p.Sample(0, c.u)
		if a != c.want || math.Abs(lp-p.LogProb(0, a)) > 1e-15 {
			t.Errorf("Sample(u=%v) = %v, %v; want %v", c.u, a, lp, c.want)
		}
	}
	// A zero-probability last action is never returned, even for u ≈ 1.
	p.Logits[0] = [4]float64{0, 0, 0, -1e6}
	if a, _ := p.Sample(0, math.Nextafter(1, 0)); a != Right {
		t.Errorf("u≈1 picked %v", a)
	}
	// Frequencies match the probabilities when u comes from Uniform.
	p.Logits[0] = [4]float64{math.Log(0.1), math.Log(0.2), math.Log(0.3), math.Log(0.4)}
	var counts [4]int
	const n = 40000
	for i := range uint64(n) {
		a, _ := p.Sample(0, Uniform(9, KeyAction, i))
		counts[a]++
	}
	for a, want := range []float64{0.1, 0.2, 0.3, 0.4} {
		if f := float64(counts[a]) / n; math.Abs(f-want) > 0.01 {
			t.Errorf("action %d frequency %v, want %v", a, f, want)
		}
	}
}

func TestUpdateDirection(t *testing.T) {
	p := NewPolicy(2)
	before0, before1 := p.Probs(0)[Right], p.Probs(1)[Up]
	st := p.Update([]Sample{
		{Pos: 0, Action: Right, OldLogProb: math.Log(0.25), Advantage: 1},
		{Pos: 1, Action: Up, OldLogProb: math.Log(0.25), Advantage: -1},
	}, 1, 0.2)
	if st.Samples != 2 || st.Skipped != 0 || st.ClipFraction != 0 || math.Abs(st.MeanRatio-1) > 1e-12 || st.GradNorm <= 0 {
		t.Errorf("stats %+v", st)
	}
	if after := p.Probs(0)[Right]; after <= before0 {
		t.Errorf("positive advantage: p(right) %v -> %v", before0, after)
	}
	if after := p.Probs(1)[Up]; after >= before1 {
		t.Errorf("negative advantage: p(up) %v -> %v", before1, after)
	}
	// The other actions at pos 0 lose mass evenly (softmax gradient).
	pr := p.Probs(0)
	if !(pr[Left] == pr[Down] && pr[Down] == pr[Up] && pr[Left] < 0.25) {
		t.Errorf("other actions %v", pr)
	}
	// Analytic gradient: A·r·(e_a − π)/n with r = 1, π uniform, n = 2.
	if got, want := p.Logits[0][Right], 1*(1-0.25)/2; math.Abs(got-want) > 1e-12 {
		t.Errorf("logit %v, want %v", got, want)
	}
}

// TestUpdateMatchesFiniteDifference checks the analytic gradient against a
// numerical derivative of the clipped surrogate, clipped and unclipped
// samples mixed.
func TestUpdateMatchesFiniteDifference(t *testing.T) {
	base := NewPolicy(3)
	base.Logits[0] = [4]float64{0.3, -0.2, 0.8, 0}
	base.Logits[1] = [4]float64{-1, 0.4, 0.1, 0.9}
	samples := []Sample{
		{Pos: 0, Action: Right, OldLogProb: math.Log(0.2), Advantage: 1.3},  // r > 1.2, clipped
		{Pos: 0, Action: Down, OldLogProb: math.Log(0.18), Advantage: -0.7}, // unclipped
		{Pos: 1, Action: Up, OldLogProb: math.Log(0.4), Advantage: 0.5},     // unclipped
		{Pos: 1, Action: Left, OldLogProb: math.Log(0.2), Advantage: -2},    // r < 0.8, clipped
		{Pos: 2, Action: Left, OldLogProb: math.Log(0.25), Advantage: 0.9},
	}
	objective := func(p *Policy) float64 {
		c := p.Clone()
		return c.Update(samples, 0, 0.2).Objective
	}
	p := base.Clone()
	const lr = 1e-3
	st := p.Update(samples, lr, 0.2)
	if st.ClipFraction != 2.0/5 {
		t.Errorf("clip fraction %v, want 0.4", st.ClipFraction)
	}
	for pos := range 3 {
		for a := range NumActions {
			plus, minus := base.Clone(), base.Clone()
			plus.Logits[pos][a] += 1e-6
			minus.Logits[pos][a] -= 1e-6
			num := (objective(plus) - objective(minus)) / 2e-6
			got := (p.Logits[pos][a] - base.Logits[pos][a]) / lr
			if math.Abs(num-got) > 1e-6 {
				t.Errorf("d/dz[%d][%d]: analytic %v, numeric %v", pos, a, got, num)
			}
		}
	}
}

// TestClipStopsGrowth repeats the same batch many times (many epochs on
// stale data): the ratio may overshoot 1+ε by at most one step, after which
// the clip removes the gradient and the logits stop moving.
func TestClipStopsGrowth(t *testing.T) {
	const eps = 0.2
	for _, adv := range []float64{1, -1} {
		p := NewPolicy(1)
		s := []Sample{{Pos: 0, Action: Down, OldLogProb: math.Log(0.25), Advantage: adv}}
		var st UpdateStats
		for range 500 {
			st = p.Update(s, 0.05, eps)
		}
		r := math.Exp(p.LogProb(0, Down) - math.Log(0.25))
		if st.ClipFraction != 1 || st.GradNorm != 0 {
			t.Errorf("A=%v: still moving after 500 epochs: %+v", adv, st)
		}
		if adv > 0 && (r <= 1+eps || r > 1+eps+0.05) {
			t.Errorf("A>0: ratio %v, want just above %v", r, 1+eps)
		}
		if adv < 0 && (r >= 1-eps || r < 1-eps-0.05) {
			t.Errorf("A<0: ratio %v, want just below %v", r, 1-eps)
		}
		frozen := p.Clone()
		p.Update(s, 0.05, eps)
		if p.Logits[0] != frozen.Logits[0] {
			t.Errorf("A=%v: clipped update changed logits", adv)
		}
	}
}

func TestUpdateSkipsBadSamples(t *testing.T) {
	p := NewPolicy(4)
	st := p.Update([]Sample{
		{Pos: -1, Action: Left, OldLogProb: -1, Advantage: 1},
		{Pos: 4, Action: Left, OldLogProb: -1, Advantage: 1},
		{Pos: 0, Action: Action(4), OldLogProb: -1, Advantage: 1},
		{Pos: 0, Action: Left, OldLogProb: math.NaN(), Advantage: 1},
		{Pos: 0, Action: Left, OldLogProb: math.Inf(-1), Advantage: 1},
		{Pos: 0, Action: Left, OldLogProb: -1, Advantage: math.Inf(1)},
		{Pos: 0, Action: Left, OldLogProb: -2000, Advantage: 1}, // ratio overflows
	}, 1, 0.2)
	if st.Samples != 0 || st.Skipped != 7 {
		t.Errorf("stats %+v", st)
	}
	if p.Logits[0] != [4]float64{} {
		t.Error("bad samples moved the policy")
	}
	st = p.Update([]Sample{{Pos: 0, Action: Left, OldLogProb: math.Log(0.25), Advantage: 1}}, math.NaN(), 0.2)
	if st.Samples != 1 || p.Logits[0] != [4]float64{} {
		t.Error("NaN lr must not move the policy")
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	p := NewPolicy(64)
	for i := range p.Logits {
		for a := range NumActions {
			p.Logits[i][a] = Uniform(5, uint64(i), uint64(a))*20 - 10
		}
	}
	data, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 12+64*32+4 {
		t.Errorf("size %d", len(data))
	}
	var q Policy
	if err := q.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	if len(q.Logits) != 64 {
		t.Fatalf("states %d", len(q.Logits))
	}
	for i := range p.Logits {
		if p.Logits[i] != q.Logits[i] {
			t.Fatalf("row %d differs", i)
		}
	}
	pre := []byte("prefix")
	app, _ := p.AppendBinary(pre)
	if !bytes.Equal(app[len(pre):], data) {
		t.Error("AppendBinary differs from MarshalBinary")
	}
	var e Policy
	if data, _ := NewPolicy(0).MarshalBinary(); e.UnmarshalBinary(data) != nil || len(e.Logits) != 0 {
		t.Error("empty policy round trip")
	}
}

func TestUnmarshalRejectsGarbage(t *testing.T) {
	good, _ := NewPolicy(16).MarshalBinary()
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 0x40
		return b
	}
	resum := func(b []byte) []byte {
		return binary.LittleEndian.AppendUint32(b[:len(b)-4], crcOf(b[:len(b)-4]))
	}
	nan := bytes.Clone(good)
	binary.LittleEndian.PutUint64(nan[12+8:], math.Float64bits(math.NaN()))
	huge := bytes.Clone(good)
	binary.LittleEndian.PutUint32(huge[8:], math.MaxUint32)
	version := bytes.Clone(good)
	version[4] = 9
	actions := bytes.Clone(good)
	actions[6] = 5
	bad := map[string][]byte{
		"nil":       nil,
		"short":     good[:10],
		"truncated": good[:len(good)-1],
		"extra":     append(bytes.Clone(good), 0),
		"magic":     flip(0),
		"logit bit": flip(40),
		"crc bit":   flip(len(good) - 1),
		"nan logit": resum(nan),
		"huge n":    resum(huge),
		"version":   resum(version),
		"actions":   resum(actions),
		"garbage":   []byte("this is not a policy at all, not even close"),
	}
	for name, b := range bad {
		p := NewPolicy(2)
		p.Logits[1][2] = 7
		err := p.UnmarshalBinary(b)
		if !errors.Is(err, ErrBadPolicy) {
			t.Errorf("%s: err %v, want ErrBadPolicy", name, err)
		}
		if len(p.Logits) != 2 || p.Logits[1][2] != 7 {
			t.Errorf("%s: failed decode modified the policy", name)
		}
	}
}

func FuzzUnmarshalPolicy(f *testing.F) {
	good, _ := NewPolicy(4).MarshalBinary()
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte("FLPL\x01\x00\x04\x00\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var p Policy
		if err := p.UnmarshalBinary(data); err != nil {
			return
		}
		again, err := p.MarshalBinary()
		if err != nil || !bytes.Equal(again, data) {
			t.Fatalf("accepted input does not re-encode identically")
		}
	})
}

func TestEvaluate(t *testing.T) {
	m := mustMap(t, "4x4")
	p := NewPolicy(m.NumStates())
	if got := p.Evaluate(m, false, 3, 1); got != 0 {
		t.Errorf("all-left policy succeeds %v", got)
	}
	// The route 0 →down 4 →down 8 →right 9 →down 13 →right 14 →right 15.
	for pos, a := range map[int]Action{0: Down, 4: Down, 8: Right, 9: Down, 13: Right, 14: Right} {
		p.Logits[pos][a] = 1
	}
	if got := p.Evaluate(m, false, 5, 1); got != 1 {
		t.Errorf("optimal route succeeds %v", got)
	}
	s1, s2 := p.Evaluate(m, true, 200, 7), p.Evaluate(m, true, 200, 7)
	if s1 != s2 || s1 <= 0 || s1 >= 1 {
		t.Errorf("slippery evaluation %v, %v: want reproducible and strictly between 0 and 1", s1, s2)
	}
	if p.Evaluate(m, false, 0, 1) != 0 {
		t.Error("zero episodes")
	}
}

// TestGRPOTrainsNonSlippery4x4 is the end-to-end sanity check: plain GRPO
// (groups of sampled episodes, outcome reward, group-normalised advantage,
// a couple of clipped epochs per batch) from the uniform policy learns to
// walk the non-slippery 4x4 board.
func TestGRPOTrainsNonSlippery4x4(t *testing.T) {
	for _, seed := range []int64{1, 2, 3, 11} {
		trainGRPO(t, seed)
	}
}

func trainGRPO(t *testing.T, seed int64) {
	m := mustMap(t, "4x4")
	p := NewPolicy(m.NumStates())
	const (
		group   = 16
		iters   = 400
		epochs  = 2
		lr      = 2.0
		clipEps = 0.2
	)
	solvedAt := -1
	for it := range uint64(iters) {
		var batch []Sample
		rewards := make([]float64, group)
		trajs := make([][]Sample, group)
		for g := range uint64(group) {
			s := m.Start()
			for !s.Done {
				a, lp := p.Sample(s.Pos, Uniform(seed, KeyAction, it, g, uint64(s.Steps)))
				trajs[g] = append(trajs[g], Sample{Pos: s.Pos, Action: a, OldLogProb: lp})
				s = m.Step(s, a, false, 0)
			}
			rewards[g] = s.Reward
		}
		mean, std := meanStd(rewards)
		if std == 0 {
			continue // zero-variance group: no gradient, as in GRPO
		}
		for g, tr := range trajs {
			adv := (rewards[g] - mean) / (std + 1e-6)
			for _, smp := range tr {
				smp.Advantage = adv
				batch = append(batch, smp)
			}
		}
		for range epochs {
			p.Update(batch, lr, clipEps)
		}
		if p.Evaluate(m, false, 1, 0) == 1 {
			solvedAt = int(it)
			break
		}
	}
	if solvedAt < 0 {
		t.Fatalf("seed %d: greedy policy did not reach the goal after %d iterations", seed, iters)
	}
	t.Logf("seed %d: greedy success 1.0 after %d iterations", seed, solvedAt+1)
}

func meanStd(x []float64) (mean, std float64) {
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	for _, v := range x {
		std += (v - mean) * (v - mean)
	}
	return mean, math.Sqrt(std / float64(len(x)))
}

func crcOf(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }
