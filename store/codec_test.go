package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"
)

// The value frame: what each kind of damage is reported as, and the
// encoder's promise that a record always encodes to the same bytes.

func framed(payload []byte) []byte {
	out := append([]byte{valueFormatV1, 0, 0, 0, 0}, payload...)
	binary.BigEndian.PutUint32(out[1:5], crc32.Checksum(payload, castagnoli))
	return out
}

func TestFrameDamage(t *testing.T) {
	good, err := encodeValue(&model.Checkpoint{Step: 3})
	if err != nil {
		t.Fatal(err)
	}
	badCRC := bytes.Clone(good)
	badCRC[len(badCRC)-1] ^= 1
	otherFormat := bytes.Clone(good)
	otherFormat[0] = 2
	cases := []struct {
		name   string
		raw    []byte
		reason string // "" for a sound value
	}{
		{"sound", good, ""},
		{"empty", nil, "value shorter than its header"},
		{"4 bytes", good[:4], "value shorter than its header"},
		{"header only", framed(nil), "decode: a length exceeds the value"},
		{"other format byte", otherFormat, "unknown value format byte"},
		{"CRC mismatch", badCRC, "CRC32C mismatch"},
		{"length past the value", framed([]byte{0x96, 0x01, 0xc4, 0x09, 1}), "decode: a length exceeds the value"},
		{"not a checkpoint", framed([]byte{0xa1, 'x'}), "decode: "},
	}
	for _, c := range cases {
		var ck model.Checkpoint
		err := decodeValue("ckpt", []byte("k"), c.raw, &ck)
		_, ferr := checkFrame("ckpt", []byte("k"), c.raw)
		if c.reason == "" {
			if err != nil || ferr != nil || ck.Step != 3 {
				t.Errorf("%s: decode %v (step %d), frame %v", c.name, err, ck.Step, ferr)
			}
			continue
		}
		var ce *CorruptError
		if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) || ce.Bucket != "ckpt" || string(ce.Key) != "k" || !bytes.HasPrefix([]byte(ce.Reason), []byte(c.reason)) {
			t.Errorf("%s: decodeValue = %v, want ErrCorrupt for ckpt key k: %q", c.name, err, c.reason)
		}
		if c.reason != "decode: " && (!errors.As(ferr, &ce) || ce.Reason != c.reason) {
			t.Errorf("%s: checkFrame = %v, want %q", c.name, ferr, c.reason)
		}
	}
}

// TestEncodeValueCanonical: map keys sorted, integers in their smallest
// form, the CRC over the payload — the same record, the same bytes.
func TestEncodeValueCanonical(t *testing.T) {
	ck := model.Checkpoint{Step: 300, Meta: map[string]string{"b": "2", "a": "1", "c": "3"}, CreatedAt: -1}
	want := []byte{0x96, 0xcd, 0x01, 0x2c, 0xc0, 0xa0, 0xa0,
		0x83, 0xa1, 'a', 0xa1, '1', 0xa1, 'b', 0xa1, '2', 0xa1, 'c', 0xa1, '3', 0xff}
	for range 20 { // map iteration order is random: every run must sort
		got, err := encodeValue(&ck)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, framed(want)) {
			t.Fatalf("encodeValue = % x\nwant          % x", got, framed(want))
		}
	}
}

func TestCloneBytes(t *testing.T) {
	if cloneBytes(nil) != nil {
		t.Error("cloneBytes(nil) is not nil")
	}
	src := []byte{1, 2, 3}
	c := cloneBytes(src)
	src[0] = 9
	if !bytes.Equal(c, []byte{1, 2, 3}) {
		t.Errorf("cloneBytes shares memory: %v", c)
	}
	if e := cloneBytes([]byte{}); e == nil || len(e) != 0 {
		t.Errorf("cloneBytes of an empty slice = %v", e)
	}
}

// Each record's encoder sizes its buffer up front from the record's
// variable parts, so a typical record (ids and counts of a few bytes,
// strings, tokens, scores, map entries) is framed with one allocation: the
// write path encodes a record per node, turn and event it touches. (A
// group's meta map costs one more: its keys, sorted.)
func TestEncodersAllocateOnce(t *testing.T) {
	n := &model.Node{ID: 70000, Step: 12, Group: 300, Parent: 69999, Ordinal: 2, Fork: 3, Base: 40, Depth: 4,
		Status: model.NodeActive, Turns: 5, HasReward: true, Reward: 0.5, Attempt: 1,
		Scores:    make([]model.Score, 8),
		Decisions: make([]model.Decision, 8),
		EnvState:  make([]byte, 200), Worker: "worker-17@" + strings.Repeat("rack4.node17.cluster.example/", 5), Error: "env reset failed: " + strings.Repeat("worker lost its sandbox; ", 12),
		MinVersion: 7, MaxVersion: 9}
	g := &model.Group{ID: 300, Step: 12, Task: "frozenlake-8x8", Prompt: "You are on a frozen lake; reach the goal.",
		Gold: "RRDDRD", Roots: []uint64{69990, 69991, 69992, 69993}, Interval: 2,
		Meta: map[string]string{"seed": "42", "split": "train",
			"instructions": strings.Repeat("Avoid the holes and step only on frozen tiles. ", 4)},
		PromptTokens: make([]uint32, 64)}
	// A long rollout whose turns were appended between other nodes'.
	for i := range 60 {
		n.TurnRanges = append(n.TurnRanges, model.TurnRange{Seq: uint64(1000 + 500*i), Count: 3})
		n.Turns += 3
	}
	for i := range n.Scores {
		n.Scores[i] = model.Score{Interval: i + 1, Value: 0.25}
		n.Decisions[i] = model.Decision{Interval: i + 1, Action: model.ActionSurvive, Score: 0.5, Delta: 0.1, Rule: "mid", Children: 1}
	}
	e := &model.Event{Seq: 123456, Time: 1_764_600_000_000_000_000, Kind: model.EvTurns, Step: 12, Group: 300, Node: 70000,
		Payload: make([]byte, 40)}
	tn := &model.Turn{Action: "move right", ActionTokens: make([]uint32, 30), ActionLogprobs: make([]float32, 30),
		Observation: "You moved right; the ice holds.", ObservationTokens: make([]uint32, 50), Reward: 0.25,
		PolicyVersion: 9}
	bare := *g
	bare.Meta = nil
	// Ids past 32 bits take msgpack's widest integers: the buffer sized up
	// front must still hold them.
	adv := &model.Advantage{Step: 1 << 40, Group: 1 << 41, Leaf: 1 << 42, Outcome: 1, RubricScore: 0.5, Lambda: 0.3,
		Total: 1.15, Mean: 0.4, Std: 0.2, Advantage: 3.75, Rubrics: []uint64{1 << 43, 1 << 44, 1 << 45},
		ZeroVariance: true, ZeroVarianceAfter: false}
	for _, c := range []struct {
		name string
		enc  func()
		want float64
	}{
		{"node", func() { encodeNode(n) }, 1},
		{"group", func() { encodeGroup(g) }, 2},
		{"group without meta", func() { encodeGroup(&bare) }, 1},
		{"event", func() { encodeEvent(e) }, 1},
		{"advantage", func() { encodeAdvantage(adv) }, 1},
		{"turn", func() {
			if _, err := encodeTurn(tn); err != nil {
				t.Fatal(err)
			}
		}, 1},
	} {
		if a := testing.AllocsPerRun(20, c.enc); a != c.want {
			t.Errorf("encoding a %s: %v allocations, want %v", c.name, a, c.want)
		}
	}
}

// Decoding a node interns its status and its decisions' actions: a node of
// any status decodes with as many allocations as an active one.
func TestNodeDecodeInternsStatus(t *testing.T) {
	allocs := func(s model.NodeStatus) float64 {
		raw := encodeNode(&model.Node{ID: 9, Step: 1, Group: 2, Status: s})
		payload := raw[headerLen:]
		return testing.AllocsPerRun(20, func() {
			var n model.Node
			if !decodeNodeMsgp(payload, &n) || n.Status != s {
				t.Fatalf("%s node did not decode", s)
			}
		})
	}
	base := allocs(model.NodeActive)
	for _, s := range []model.NodeStatus{model.NodeExpanded, model.NodeCompleted, model.NodePruned, model.NodeTruncated, model.NodeFailed} {
		if a := allocs(s); a != base {
			t.Errorf("decoding a %s node: %v allocations, an active one %v", s, a, base)
		}
	}
}

// Decoding an event interns its kind when the store wrote it: an event of
// any of the store's kinds, without a payload, decodes with no
// allocation, and a kind of the caller's own still decodes (into a
// string of its own).
func TestEventDecodeInternsStoreKinds(t *testing.T) {
	for _, k := range append(EventKinds(), "caller.kind") {
		raw := encodeEvent(&model.Event{Seq: 300, Time: 1 << 40, Kind: k, Step: 2, Group: 70_000, Node: 1 << 33})
		var e model.Event
		a := testing.AllocsPerRun(20, func() {
			if err := decodeEvent("events", nil, raw, &e, nil); err != nil || e.Kind != k {
				t.Fatalf("%s event: %+v, %v", k, e, err)
			}
		})
		if want := float64(b2i(k == "caller.kind")); a != want {
			t.Errorf("decoding a %s event: %v allocations, want %v", k, a, want)
		}
		if e.Seq != 300 || e.Time != 1<<40 || e.Step != 2 || e.Group != 70_000 || e.Node != 1<<33 || e.Payload != nil {
			t.Errorf("%s event decodes as %+v", k, e)
		}
	}
}

// An event decoded through the generic record path (decodeValue,
// DecodePayload) holds a copy of its payload, not the bytes it was decoded
// from, which belong to a transaction.
func TestDecodedEventPayloadIsACopy(t *testing.T) {
	raw := encodeEvent(&model.Event{Seq: 1, Kind: model.EvNodeScore, Payload: []byte{1, 2, 3}})
	var e model.Event
	if err := decodeValue("events", nil, raw, &e); err != nil {
		t.Fatal(err)
	}
	for i := range raw {
		raw[i] = 0
	}
	if string(e.Payload) != "\x01\x02\x03" {
		t.Errorf("payload %x after its source was overwritten, want 010203", e.Payload)
	}
}

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
