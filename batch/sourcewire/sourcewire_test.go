package sourcewire_test

import (
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/patrdb/patrdb/batch"
	"github.com/patrdb/patrdb/batch/sourcewire"
	"github.com/patrdb/patrdb/model"
)

func words(xs ...uint32) []byte { return model.PackWords(xs) }

func logprobs(xs ...float32) []byte { return model.PackFloats(xs) }

// source is a small step: two groups (one open), three leaves sharing a
// node's turns, turns with and without logprobs or action tokens.
func source() *batch.Source {
	return &batch.Source{
		Run: "run-é", Step: 7,
		Groups: []batch.SourceGroup{{ID: 3, PromptTokens: []uint32{1, 2, 3}}, {ID: 5, PromptTokens: []uint32{9}}},
		Open:   []uint64{4},
		Leaves: []batch.SourceLeaf{
			{ID: 11, Group: 0, Status: model.NodeCompleted, Reward: 1, Advantage: 0.5, Path: []model.Segment{{Node: 10, Count: 2}, {Node: 11, Count: 1}}},
			{ID: 12, Group: 0, Status: model.NodePruned, Reward: 0, Advantage: -0.5, Path: []model.Segment{{Node: 10, Count: 1}, {Node: 12, Count: 1}}},
			{ID: 21, Group: 1, Status: model.NodeTruncated, Reward: 0.25, Path: []model.Segment{{Node: 21, Count: 1}}},
		},
		Nodes: []model.Segment{{Node: 10, Count: 2}, {Node: 11, Count: 1}, {Node: 12, Count: 1}, {Node: 21, Count: 1}},
		Turns: []batch.SourceTurn{
			{ActionTokens: words(100, 101), ActionLogprobs: logprobs(-0.5, -1), ObservationTokens: words(200), Reward: 0.1, PolicyVersion: 1},
			{ActionTokens: words(102), ObservationTokens: words(201, 202), PolicyVersion: 2},
			{ActionTokens: words(103), ActionLogprobs: logprobs(-2), PolicyVersion: 2, Reward: 1},
			{ObservationTokens: words(204), PolicyVersion: 3},
			{ActionTokens: words(300, 301, 302), ActionLogprobs: logprobs(-1, -1, -1), PolicyVersion: 3},
		},
	}
}

// Every field survives the trip, appended after bytes already in dst.
func TestRoundTrip(t *testing.T) {
	src := source()
	body := sourcewire.Append([]byte("prefix"), src)
	if string(body[:6]) != "prefix" {
		t.Fatalf("dst's bytes overwritten: %q", body[:6])
	}
	got, err := sourcewire.Decode(body[6:])
	if err != nil {
		t.Fatal(err)
	}
	for i := range src.Turns { // absent arrays come back empty, not nil
		for _, p := range []*[]byte{&src.Turns[i].ActionTokens, &src.Turns[i].ActionLogprobs, &src.Turns[i].ObservationTokens} {
			if *p == nil {
				*p = []byte{}
			}
		}
	}
	if !reflect.DeepEqual(got, src) {
		t.Errorf("got\n%+v\nwant\n%+v", got, src)
	}
	var b batch.Batch
	if err := batch.Assemble(&b, batch.Options{}, func(batch.Options) (*batch.Source, error) { return got, nil }); err != nil {
		t.Fatal(err)
	}
	if b.Len() != 3 || b.Run != "run-é" || b.Step != 7 || !reflect.DeepEqual(b.OpenGroups, []uint64{4}) {
		t.Errorf("assembled %d rows of %q step %d, open %v", b.Len(), b.Run, b.Step, b.OpenGroups)
	}
}

// Bytes that are not a whole source are ErrFormat, whatever is wrong:
// cut anywhere, a byte more, a count or length one off, another magic or
// version, a row status no row has.
func TestDecodeRefusesWhatIsNotASource(t *testing.T) {
	body := sourcewire.Append(nil, source())
	refused := func(what string, b []byte) {
		t.Helper()
		if s, err := sourcewire.Decode(b); !errors.Is(err, sourcewire.ErrFormat) || s != nil {
			t.Errorf("%s: %v, %v; want ErrFormat", what, s, err)
		}
	}
	for n := range len(body) {
		refused("cut", body[:n])
	}
	refused("a byte more", append(append([]byte(nil), body...), 0))
	bump := func(at int, by uint32) []byte {
		b := append([]byte(nil), body...)
		binary.LittleEndian.PutUint32(b[at:], binary.LittleEndian.Uint32(b[at:])+by)
		return b
	}
	refused("magic", bump(0, 1))
	refused("version", bump(8, 1))
	refused("run id length", bump(12, 8))
	for k := range 6 {
		refused("table count", bump(24+4*k, 1))
		refused("table count", bump(24+4*k, math.MaxUint32))
	}
	refused("data length", bump(48, 4))
	// The first leaf's path length and status, the first turn's action
	// tokens: found by their offsets after the run id (8 bytes padded),
	// two groups and one open group.
	leaf := 56 + 8 + 2*16 + 8
	refused("path length", bump(leaf+32, 1))
	status := append([]byte(nil), body...)
	status[leaf+12] = 9
	refused("row status", status)
	long := append([]byte(nil), body...)
	binary.LittleEndian.PutUint32(long[56+8+8:], math.MaxUint32) // the first group's prompt
	refused("prompt tokens", long)
	seg := leaf + 3*40
	huge := append([]byte(nil), body...)
	binary.LittleEndian.PutUint64(huge[seg+8:], 1<<40)
	refused("a path segment's turns", huge)
	turn := leaf + 3*40 + 5*16 + 4*16 // five path segments, four nodes
	refused("action tokens", bump(turn, 1))
	refused("action tokens", bump(turn, math.MaxUint32))
}

// FuzzDecode: no input makes Decode, or Assemble on what Decode gives,
// panic; what Assemble refuses it refuses with a typed error.
func FuzzDecode(f *testing.F) {
	body := sourcewire.Append(nil, source())
	f.Add(body)
	for _, at := range []int{30, 60, 100, 150, 200, 260, 330, 400} {
		b := append([]byte(nil), body...)
		b[at%len(b)] ^= 0x41
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		src, err := sourcewire.Decode(b)
		if err != nil {
			if !errors.Is(err, sourcewire.ErrFormat) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		for _, layout := range []batch.Layout{batch.Rows, batch.Tree} {
			var out batch.Batch
			err := batch.Assemble(&out, batch.Options{Layout: layout, IncludeFailed: true}, func(batch.Options) (*batch.Source, error) { return src, nil })
			if err != nil && !errors.Is(err, batch.ErrSource) && !errors.Is(err, batch.ErrOutOfRange) {
				t.Fatalf("untyped error %v", err)
			}
		}
	})
}
