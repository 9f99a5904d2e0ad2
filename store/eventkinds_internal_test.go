package store

import (
	"testing"

	"github.com/patrdb/patrdb/model"
)

// Every kind of the table is found at its own place, as a string and as
// the bytes an event decodes from; any other kind, however close to one
// of them, is the caller's own (-1), and the lookup ends.
func TestKindIndexFindsEveryKindAndNoOther(t *testing.T) {
	for i, k := range eventKinds {
		if got := kindIndex(k.kind); got != i {
			t.Errorf("kindIndex(%q) = %d, want %d", k.kind, got, i)
		}
		if got, ok := decodedKind([]byte(k.kind)); !ok || got != k.kind {
			t.Errorf("decodedKind(%q) = %q, %v", k.kind, got, ok)
		}
		for _, other := range []string{string(k.kind) + ".", string(k.kind)[1:], string(k.kind)[:len(k.kind)-1] + "x"} {
			if got := kindIndex(other); got >= 0 {
				t.Errorf("kindIndex(%q) = %d (%q), want -1", other, got, eventKinds[got].kind)
			}
		}
	}
	for _, other := range []model.EventKind{"", "x", "rubric.judge", "node", "NODE.ADD"} {
		if got := kindIndex(other); got >= 0 {
			t.Errorf("kindIndex(%q) = %d, want -1", other, got)
		}
		if _, ok := decodedKind([]byte(other)); ok {
			t.Errorf("decodedKind(%q) found a kind", other)
		}
	}
}

// BenchmarkDecodeEventHead decodes the head of eight events of the kinds
// a replay meets most: the part of RunTx.Events beyond the CRC and the
// payload's copy.
func BenchmarkDecodeEventHead(b *testing.B) {
	var vals [][]byte
	for i, k := range []model.EventKind{model.EvNodeScore, model.EvNodeRoute, model.EvTurns, model.EvNodeAdd,
		model.EvNodeStatus, model.EvNodeReward, model.EvAdvantage, model.EvGroupClose} {
		e := model.Event{Seq: uint64(1000 + i), Time: 1_764_000_000_000_000_000 + int64(i), Kind: k, Step: 12,
			Group: 300 + uint64(i), Node: 70000 + uint64(i)}
		vals = append(vals, append(appendEventHead(nil, &e), 0xc4, 3, 1, 2, 3))
	}
	var e model.Event
	for b.Loop() {
		for _, v := range vals {
			if !decodeEventMsgp(v, &e) {
				b.Fatal("decode")
			}
		}
	}
}
