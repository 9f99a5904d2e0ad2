package store

import (
	"github.com/patrdb/patrdb/model"
	"strings"
	"testing"
)

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
