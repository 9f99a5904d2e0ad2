package store

import (
	"bytes"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"
)

// Events are encoded straight into values carved from the transaction's
// chunks, their payload's bin header sized after the payload. Each value
// written must be byte for byte what encodeEvent frames for the event it
// decodes to, whichever header width the payload takes, and no value may
// spill into the next one (the CRC of every value is checked on the way).
func TestWrittenEventsAreCanonical(t *testing.T) {
	// Node payloads that take a bin8, bin16 and bin32 header, one larger
	// than a chunk, and many small events sharing chunks.
	states := [][]byte{nil, make([]byte, 300), make([]byte, 70_000), make([]byte, valueChunk/8)}
	db := openWithGroup(t, func(r *RunTx, group uint64) error {
		for i, st := range states {
			for j := range st {
				st[j] = byte(i + j)
			}
			n, err := r.AddNode(NodeSpec{Step: 1, Group: group, Ordinal: i, EnvState: st})
			if err != nil {
				return err
			}
			for k := range 50 {
				if err := r.Score(n.ID, model.Score{Interval: k, Turn: k, Value: 0.5}); err != nil {
					return err
				}
			}
			if err := r.AppendTurns(n.ID, 0, model.Turn{Action: "a", ActionTokens: []uint32{1, 2}}); err != nil {
				return err
			}
			if err := r.SetNodeStatus(n.ID, model.NodeCompleted); err != nil {
				return err
			}
			if err := r.PutAdvantage(model.Advantage{Step: 1, Group: group, Leaf: n.ID, Outcome: 1, Rubrics: []uint64{1 << 40}}); err != nil {
				return err
			}
		}
		return r.SetGroupInterval(1, group, 3)
	})
	seen := 0
	inRunR(t, db, false, func(r *RunTx) error {
		b, err := r.bucket(bEvents)
		if err != nil {
			return err
		}
		return b.ForEach(func(k, v []byte) error {
			var e model.Event
			if err := decodeEvent("events", k, v, &e, nil); err != nil {
				return err
			}
			if want := encodeEvent(&e); !bytes.Equal(v, want) {
				t.Errorf("event %d (%s): written % x\nwant % x", e.Seq, e.Kind, head(v), head(want))
			}
			if strings.HasPrefix(string(e.Kind), "node.") && e.Kind != model.EvTurns {
				var n model.Node
				if err := DecodePayload(e, &n); err != nil {
					return err
				}
				if want := appendNodeMsgp(nil, &n); !bytes.Equal(e.Payload, want) {
					t.Errorf("event %d (%s): node payload is not the record's encoding", e.Seq, e.Kind)
				}
			}
			seen++
			return nil
		})
	})
	if want := 3 + len(states)*(1+50+1+1+1); seen != want {
		t.Fatalf("%d events, want %d", seen, want)
	}
	// The records written from the same chunks: each is its encoding.
	records := map[string]func([]byte) ([]byte, error){
		bNodes: func(v []byte) ([]byte, error) {
			var n model.Node
			err := decodeValue("nodes", nil, v, &n)
			return encodeNode(&n), err
		},
		bGroups: func(v []byte) ([]byte, error) {
			var g model.Group
			err := decodeValue("groups", nil, v, &g)
			return encodeGroup(&g), err
		},
		bAdv: func(v []byte) ([]byte, error) {
			var a model.Advantage
			err := decodeValue("adv", nil, v, &a)
			return encodeAdvantage(&a), err
		},
	}
	inRunR(t, db, false, func(r *RunTx) error {
		for name, reencode := range records {
			b, err := r.bucket(name)
			if err != nil {
				return err
			}
			count := 0
			err = b.ForEach(func(k, v []byte) error {
				want, err := reencode(v)
				if err != nil {
					return err
				}
				if count++; !bytes.Equal(v, want) {
					t.Errorf("%s record %x: written % x\nwant % x", name, k, head(v), head(want))
				}
				return nil
			})
			if err != nil {
				return err
			}
			if count == 0 {
				t.Errorf("no %s records", name)
			}
		}
		return nil
	})
}

func head(b []byte) []byte { return b[:min(len(b), 48)] }

// appendBinOf writes what appendBin writes, for every header width.
func TestAppendBinOfMatchesAppendBin(t *testing.T) {
	for _, n := range []int{0, 1, 255, 256, 65535, 65536, 70_000} {
		x := make([]byte, n)
		for i := range x {
			x[i] = byte(i * 7)
		}
		prefix := []byte{0x93, 0x01}
		got := appendBinOf(bytes.Clone(prefix), func(b []byte) []byte { return append(b, x...) })
		if want := appendBin(bytes.Clone(prefix), x); !bytes.Equal(got, want) {
			t.Errorf("%d bytes: appendBinOf differs from appendBin", n)
		}
	}
}

// A value taken from the arena cannot grow into the next one, and values
// carved one after the other do not overlap.
func TestValueArenaClipsValues(t *testing.T) {
	var a valueArena
	v1 := a.finish(append(a.start(10), "0123456789"...))
	v2 := a.finish(append(a.start(10), "abcdefghij"...))
	if cap(v1) != len(v1) {
		t.Fatalf("cap %d, len %d: an append to the value would overwrite the next one", cap(v1), len(v1))
	}
	if used := len(v1) + len(v2) + cap(a.free); used > minValueChunk {
		t.Fatalf("two small values took a %d-byte chunk: a small transaction should allocate little", used)
	}
	_ = append(v1, "XXXXXXXXXX"...)
	if string(v1) != "0123456789" || string(v2) != "abcdefghij" {
		t.Fatalf("values changed: %q %q", v1, v2)
	}
	// A value that outgrew its buffer leaves the arena's free room as it was.
	free := cap(a.free)
	big := a.finish(append(a.start(4), make([]byte, valueChunk)...))
	if len(big) != valueChunk || cap(a.free) != free {
		t.Fatalf("outgrown value: len %d, free room %d, want %d, %d", len(big), cap(a.free), valueChunk, free)
	}
}
