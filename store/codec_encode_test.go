package store

import (
	"bytes"
	"github.com/patrdb/patrdb/model"
	"math/rand/v2"
	"slices"
	"testing"
)

// The hand-written encoders against msgpack/v5's reflective encoder, which
// they replaced: the same framed bytes for every record.

func randTurnRanges(rng *rand.Rand) model.TurnRanges {
	var rs model.TurnRanges
	seq := uint64(0)
	for range rng.IntN(4) {
		seq += 1 + uint64(randInt(rng))&0xffffffff
		rs = append(rs, model.TurnRange{Seq: seq, Count: 1 + rng.IntN(300)})
		seq += uint64(rs[len(rs)-1].Count)
	}
	return rs
}

func randGroup(rng *rand.Rand) model.Group {
	g := model.Group{ID: uint64(randInt(rng)), Step: uint64(randInt(rng)), Task: randString(rng, rng.IntN(40)),
		Prompt: randString(rng, edgeLens[rng.IntN(6)]), Gold: randString(rng, rng.IntN(3)),
		Status: []model.GroupStatus{model.GroupOpen, model.GroupClosed, "", "other"}[rng.IntN(4)], Interval: int(randInt(rng))}
	switch rng.IntN(3) {
	case 0:
		g.Roots = []uint64{}
	case 1:
		for range rng.IntN(20) {
			g.Roots = append(g.Roots, uint64(randInt(rng)))
		}
	}
	switch rng.IntN(3) {
	case 0:
		g.Meta = map[string]string{}
	case 1:
		g.Meta = map[string]string{}
		for range 1 + rng.IntN(20) {
			g.Meta[randString(rng, rng.IntN(10))] = randString(rng, rng.IntN(40))
		}
	}
	switch rng.IntN(3) {
	case 0:
		g.PromptTokens = model.TokenIDs{}
	case 1:
		for range rng.IntN(100) {
			g.PromptTokens = append(g.PromptTokens, rng.Uint32())
		}
	}
	return g
}

func TestRecordEncodeMatchesMsgpack(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	same := func(kind string, got []byte, v any) {
		t.Helper()
		want, err := encodeValue(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s %+v:\n got %x\nwant %x", kind, v, got, want)
		}
	}
	for range 2000 {
		n := randNode(rng)
		n.Error = randString(rng, rng.IntN(50))
		n.MinVersion, n.MaxVersion = uint64(randInt(rng)), uint64(randInt(rng))
		n.TurnRanges = randTurnRanges(rng)
		same("node", encodeNode(&n), &n)
		e := randEvent(rng)
		same("event", encodeEvent(&e), &e)
		g := randGroup(rng)
		same("group", encodeGroup(&g), &g)
		if !compareRecordDecode[model.Group](t, encodeGroup(&g)[headerLen:]) {
			t.Fatalf("the fast decoder did not take a group the store wrote: %+v", g)
		}
		for _, m := range mutations(rng, encodeGroup(&g)[headerLen:], 5) {
			compareRecordDecode[model.Group](t, m)
		}
		p := model.TurnsPayload{From: int(randInt(rng)), Count: int(randInt(rng)), Turns: int(randInt(rng)),
			MinVersion: uint64(randInt(rng)), MaxVersion: uint64(randInt(rng)), Seq: uint64(randInt(rng))}
		same("turns payload", encodeTurnsPayload(&p), &p)
		a := model.Advantage{Step: uint64(randInt(rng)), Group: uint64(randInt(rng)), Leaf: uint64(randInt(rng)),
			Outcome: rng.NormFloat64(), RubricScore: rng.NormFloat64(), Lambda: rng.Float64(), Total: rng.NormFloat64(),
			Mean: rng.NormFloat64(), Std: rng.Float64(), Advantage: rng.NormFloat64(),
			ZeroVariance: rng.IntN(2) == 0, ZeroVarianceAfter: rng.IntN(2) == 0}
		switch rng.IntN(3) {
		case 1:
			a.Rubrics = []uint64{}
		case 2:
			for range 1 + rng.IntN(20) {
				a.Rubrics = append(a.Rubrics, uint64(randInt(rng)))
			}
		}
		same("advantage", encodeAdvantage(&a), &a)
	}
}

// TestTurnRangesPacking: ranges survive their packed form, and damaged
// packings (a zero count, touching or overlapping ranges, a seq of 0, a
// cut varint) are refused.
func TestTurnRangesPacking(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for range 1000 {
		rs := randTurnRanges(rng)
		got, err := unpackTurnRanges(packTurnRanges(nil, rs))
		if err != nil || len(got) != len(rs) || (len(rs) > 0 && !slices.Equal(got, rs)) || turnRangesLen(rs) != len(packTurnRanges(nil, rs)) {
			t.Fatalf("%v: unpacked %v, %v", rs, got, err)
		}
	}
	for name, b := range map[string][]byte{
		"zero count":   {1, 0},
		"seq 0":        {0, 3},
		"touching":     {1, 2, 0, 1},
		"cut varint":   {1, 0x80},
		"no count":     {5},
		"count > 2^31": {1, 0x80, 0x80, 0x80, 0x80, 0x10},
	} {
		if rs, err := unpackTurnRanges(b); err == nil {
			t.Errorf("%s: %x unpacked to %v", name, b, rs)
		}
	}
	var rs model.TurnRanges
	rs = rs.Extend(5, 2).Extend(7, 1).Extend(10, 3)
	if !slices.Equal(rs, model.TurnRanges{{Seq: 5, Count: 3}, {Seq: 10, Count: 3}}) || rs.Total() != 6 {
		t.Errorf("extend: %v", rs)
	}
}
