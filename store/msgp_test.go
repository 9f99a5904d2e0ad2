package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/vmihailenco/msgpack/v5"
)

// The hand-written codecs (msgp.go and the codec_*.go files) against
// msgpack/v5, the codec they replaced: the same bytes out of every encoder,
// the same record (or ErrCorrupt) out of every decoder, on canonical
// values, values in the other forms msgpack/v5 accepts, and damaged bytes.
// FuzzMsgpDifferential explores further: go test -fuzz=FuzzMsgpDifferential ./store/

// refEncodeTurn is the msgpack/v5 turn encoder this package used before
// encodeTurn was written by hand.
func refEncodeTurn(t *model.Turn) []byte {
	var buf bytes.Buffer
	buf.Write([]byte{valueFormatV1, 0, 0, 0, 0})
	enc := msgpack.NewEncoder(&buf)
	scratch := make([]byte, 0, 4*max(len(t.ActionTokens), len(t.ActionLogprobs), len(t.ObservationTokens)))
	for _, err := range []error{
		enc.EncodeArrayLen(turnFields),
		enc.EncodeString(t.Action),
		enc.EncodeBytes(model.AppendWords(scratch[:0], t.ActionTokens)),
		enc.EncodeBytes(model.AppendFloats(scratch[:0], t.ActionLogprobs)),
		enc.EncodeString(t.Observation),
		enc.EncodeBytes(model.AppendWords(scratch[:0], t.ObservationTokens)),
		enc.EncodeFloat64(t.Reward),
		enc.EncodeBool(t.Done),
		enc.EncodeUint64(t.PolicyVersion),
	} {
		if err != nil {
			panic(err)
		}
	}
	out := buf.Bytes()
	binary.BigEndian.PutUint32(out[1:5], crc32.Checksum(out[headerLen:], castagnoli))
	return out
}

// refDecodeTurn is the msgpack/v5 turn decoder this package used before.
// It reports only success or failure: the reasons are worded differently.
func refDecodeTurn(raw []byte) (model.Turn, bool) {
	var t model.Turn
	payload, err := checkFrame("t", nil, raw)
	if err != nil {
		return t, false
	}
	dec := msgpack.NewDecoder(bytes.NewReader(payload))
	n, err := dec.DecodeArrayLen()
	if err != nil || (n != turnFields && n != turnFieldsV1) {
		return t, false
	}
	var blob []byte
	var ok bool
	if t.Action, err = dec.DecodeString(); err != nil {
		return t, false
	}
	if blob, err = dec.DecodeBytes(); err != nil {
		return t, false
	}
	if t.ActionTokens, ok = model.Words(blob); !ok {
		return t, false
	}
	if blob, err = dec.DecodeBytes(); err != nil {
		return t, false
	}
	if t.ActionLogprobs, ok = model.Floats(blob); !ok {
		return t, false
	}
	if t.Observation, err = dec.DecodeString(); err != nil {
		return t, false
	}
	if blob, err = dec.DecodeBytes(); err != nil {
		return t, false
	}
	if t.ObservationTokens, ok = model.Words(blob); !ok {
		return t, false
	}
	if t.Reward, err = dec.DecodeFloat64(); err != nil {
		return t, false
	}
	if t.Done, err = dec.DecodeBool(); err != nil {
		return t, false
	}
	if n == turnFields {
		if t.PolicyVersion, err = dec.DecodeUint64(); err != nil {
			return t, false
		}
	}
	return t, true
}

func frameFor(payload []byte) []byte {
	out := make([]byte, headerLen+len(payload))
	out[0] = valueFormatV1
	binary.BigEndian.PutUint32(out[1:5], crc32.Checksum(payload, castagnoli))
	copy(out[headerLen:], payload)
	return out
}

// Lengths on both sides of every msgpack size class.
var edgeLens = []int{0, 1, 31, 32, 255, 256, 65535, 65536, 70000}

func randString(rng *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.UintN(256))
	}
	return string(b)
}

// randTurn draws a turn; token arrays are nil, empty or of any length
// (their byte lengths cross the bin8/bin16/bin32 boundaries).
func randTurn(rng *rand.Rand) model.Turn {
	strLen := func() int {
		if rng.IntN(3) == 0 {
			return edgeLens[rng.IntN(len(edgeLens))]
		}
		return rng.IntN(3000)
	}
	toks := func() []uint32 {
		switch rng.IntN(5) {
		case 0:
			return nil
		case 1:
			return []uint32{}
		case 2:
			return make([]uint32, []int{63, 64, 16383, 16384, 20000}[rng.IntN(5)])
		}
		xs := make([]uint32, rng.IntN(1500))
		for i := range xs {
			xs[i] = rng.Uint32()
		}
		return xs
	}
	t := model.Turn{
		Action:            randString(rng, strLen()),
		ActionTokens:      toks(),
		Observation:       randString(rng, strLen()),
		ObservationTokens: toks(),
		Reward:            []float64{0, -1, 1.5, math.SmallestNonzeroFloat64, rng.NormFloat64()}[rng.IntN(5)],
		Done:              rng.IntN(2) == 0,
	}
	if n := rng.IntN(4); n > 0 {
		t.ActionLogprobs = make([]float32, rng.IntN(400))
		for i := range t.ActionLogprobs {
			t.ActionLogprobs[i] = -rng.Float32() * 10
		}
	}
	return t
}

func TestTurnEncodeMatchesMsgpack(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	turns := []model.Turn{{}, {ActionTokens: []uint32{}, ActionLogprobs: []float32{}, ObservationTokens: []uint32{}}}
	for _, n := range edgeLens {
		s := strings.Repeat("x", n)
		turns = append(turns, model.Turn{Action: s, Observation: s, ActionTokens: make([]uint32, n/4), ObservationTokens: make([]uint32, n)})
	}
	for range 400 {
		turns = append(turns, randTurn(rng))
	}
	for i := range turns {
		got, err := encodeTurn(&turns[i])
		if err != nil {
			t.Fatal(err)
		}
		want := refEncodeTurn(&turns[i])
		if !bytes.Equal(got, want) {
			t.Fatalf("turn %d: encodeTurn differs from msgpack/v5 (%d vs %d bytes)", i, len(got), len(want))
		}
		if cap(got) != len(got) {
			t.Fatalf("turn %d: %d bytes in an allocation of %d: the size is not exact", i, len(got), cap(got))
		}
		dec, err := DecodeTurn(got)
		if err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		ref, ok := refDecodeTurn(got)
		if !ok || !sameTurn(dec, ref) {
			t.Fatalf("turn %d: decodes differently from msgpack/v5 (ok %t)", i, ok)
		}
	}
}

// compareTurnDecode fails t unless decodeTurn and msgpack/v5 agree on raw:
// both reject it (decodeTurn with ErrCorrupt) or both return equal turns.
func compareTurnDecode(t *testing.T, raw []byte) {
	t.Helper()
	got, err := DecodeTurn(raw)
	want, ok := refDecodeTurn(raw)
	switch {
	case err != nil && !errors.Is(err, ErrCorrupt):
		t.Fatalf("%x: error is not ErrCorrupt: %v", raw, err)
	case (err == nil) != ok:
		t.Fatalf("%x: decodeTurn error %v, msgpack/v5 ok %t", raw, err, ok)
	case ok && !sameTurn(got, want):
		t.Fatalf("%x: decoded differently:\n%+v\n%+v", raw, got, want)
	}
}

// sameTurn is field-for-field equality with floats compared bit for bit
// (a damaged value may hold a NaN, which reflect.DeepEqual never equates).
func sameTurn(a, b model.Turn) bool {
	ea, _ := encodeTurn(&a)
	eb, _ := encodeTurn(&b)
	return bytes.Equal(ea, eb) && (a.ActionTokens == nil) == (b.ActionTokens == nil) &&
		(a.ActionLogprobs == nil) == (b.ActionLogprobs == nil) && (a.ObservationTokens == nil) == (b.ObservationTokens == nil)
}

// sameRecord is field-for-field equality of two records with floats
// compared bit for bit: their as_array encodings hold every field, and
// tell a nil slice from an empty one.
func sameRecord(a, b any) bool {
	ea, errA := encodeValue(a)
	eb, errB := encodeValue(b)
	return errA == nil && errB == nil && bytes.Equal(ea, eb)
}

// mutations returns damaged copies of payload: bytes flipped, cut short,
// bytes inserted and deleted.
func mutations(rng *rand.Rand, payload []byte, n int) [][]byte {
	var out [][]byte
	for range n {
		b := bytes.Clone(payload)
		switch rng.IntN(4) {
		case 0:
			for range 1 + rng.IntN(3) {
				if len(b) > 0 {
					b[rng.IntN(len(b))] = byte(rng.UintN(256))
				}
			}
		case 1:
			b = b[:rng.IntN(len(b)+1)]
		case 2:
			i := rng.IntN(len(b) + 1)
			b = append(b[:i:i], append([]byte{byte(rng.UintN(256))}, b[i:]...)...)
		case 3:
			if len(b) > 0 {
				i := rng.IntN(len(b))
				b = append(b[:i:i], b[i+1:]...)
			}
		}
		out = append(out, b)
	}
	return out
}

func TestTurnDecodeMatchesMsgpack(t *testing.T) {
	// The other forms msgpack/v5 takes for each field: nil for strings,
	// blobs, the reward and the flag; str for a blob and bin for a string;
	// float32 and integers for the reward; array16/array32 headers; and
	// trailing bytes after the seventh field.
	forms := [][]byte{
		{0x97, 0xc0, 0xc0, 0xc0, 0xc0, 0xc0, 0xc0, 0xc0},
		{0x97, 0xc4, 0x01, 'a', 0xa4, 1, 0, 0, 0, 0xc5, 0x00, 0x00, 0xd9, 0x01, 'o', 0xc6, 0, 0, 0, 4, 9, 9, 9, 9, 0xca, 0x3f, 0x80, 0, 0, 0xc3},
		{0xdc, 0x00, 0x07, 0xa0, 0xc0, 0xc0, 0xa0, 0xc0, 0xff, 0xc2},
		{0xdd, 0x00, 0x00, 0x00, 0x07, 0xa0, 0xc0, 0xc0, 0xa0, 0xc0, 0xd3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, 0xc2},
		{0x97, 0xa0, 0xc0, 0xc0, 0xa0, 0xc0, 0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xc3, 0x01, 0x02},
		{0x97, 0xa0, 0xc0, 0xc0, 0xa0, 0xc0, 0xcc, 0x80, 0xc2},
		{0x97, 0xa0, 0xc0, 0xc0, 0xa0, 0xc0, 0xd0, 0x80, 0xc0},
		{0x97, 0xa0, 0xc0, 0xc0, 0xa0, 0xc0, 0xcd, 0x80, 0x00, 0xc2},
		{0x97, 0xa0, 0xc0, 0xc0, 0xa0, 0xc0, 0xd1, 0x80, 0x00, 0xc2},
		{0x97, 0xa0, 0xc0, 0xc0, 0xa0, 0xc0, 0xce, 0x80, 0, 0, 0, 0xc2},
		{0x97, 0xa0, 0xc0, 0xc0, 0xa0, 0xc0, 0xd2, 0x80, 0, 0, 0, 0xc2},
		// rejected by both: a 6-field array, a map, a blob of 3 bytes, a
		// string where the flag goes, ext types.
		{0x96, 0xa0, 0xc0, 0xc0, 0xa0, 0xc0, 0x00},
		{0x81, 0xa0, 0xc0},
		{0x97, 0xa0, 0xc4, 0x03, 1, 2, 3, 0xc0, 0xa0, 0xc0, 0x00, 0xc2},
		{0x97, 0xa0, 0xc0, 0xc0, 0xa0, 0xc0, 0x00, 0xa1, 'x'},
		{0x97, 0xd4, 0x01, 0x00, 0xc0, 0xc0, 0xa0, 0xc0, 0x00, 0xc2},
		{0x97, 0xa0, 0xc0, 0xc0, 0xa0, 0xc0, 0xc1, 0xc2},
		{},
	}
	for _, p := range forms {
		compareTurnDecode(t, frameFor(p))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		tu := randTurn(rng)
		if len(tu.Action)+len(tu.Observation) > 4000 {
			continue // mutations of short values reach every header
		}
		val, _ := encodeTurn(&tu)
		compareTurnDecode(t, val)
		for _, m := range mutations(rng, val[headerLen:], 20) {
			compareTurnDecode(t, frameFor(m))
		}
		for _, m := range mutations(rng, val, 5) { // mostly CRC failures
			compareTurnDecode(t, m)
		}
	}
}

// randEvent and randNode draw records whose integers cover every
// compact-int width, negative and positive.
func randInt(rng *rand.Rand) int64 {
	switch rng.IntN(6) {
	case 0:
		return int64(rng.IntN(128))
	case 1:
		return -int64(rng.IntN(40))
	case 2:
		return int64(rng.IntN(1 << 16))
	case 3:
		return int64(rng.Uint32())
	case 4:
		return -int64(rng.Uint32())
	}
	return int64(rng.Uint64())
}

func randBytes(rng *rand.Rand) []byte {
	switch rng.IntN(3) {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	return []byte(randString(rng, edgeLens[rng.IntN(6)]))
}

func randEvent(rng *rand.Rand) model.Event {
	kinds := []model.EventKind{model.EvNodeAdd, model.EvTurns, model.EvRunCreate, "rubric.judge", "", model.EventKind(randString(rng, 40))}
	return model.Event{Seq: uint64(randInt(rng)), Time: randInt(rng), Kind: kinds[rng.IntN(len(kinds))],
		Step: uint64(randInt(rng)), Group: uint64(randInt(rng)), Node: uint64(randInt(rng)),
		Rubric: uint64(randInt(rng)), Payload: randBytes(rng)}
}

func randNode(rng *rand.Rand) model.Node {
	n := model.Node{ID: uint64(randInt(rng)), Step: uint64(randInt(rng)), Group: uint64(randInt(rng)),
		Parent: uint64(randInt(rng)), Ordinal: int(randInt(rng)), Fork: int(randInt(rng)), Base: int(randInt(rng)),
		Depth: int(randInt(rng)), Status: []model.NodeStatus{model.NodeActive, model.NodePruned, "", "other"}[rng.IntN(4)],
		Turns: int(randInt(rng)), HasReward: rng.IntN(2) == 0, Reward: rng.NormFloat64(), EnvState: randBytes(rng),
		Worker: randString(rng, rng.IntN(40)), Attempt: int(randInt(rng))}
	switch rng.IntN(3) {
	case 0:
		n.Scores = []model.Score{}
	case 1:
		for i := range rng.IntN(20) {
			n.Scores = append(n.Scores, model.Score{Interval: i, Turn: int(randInt(rng)), Value: rng.Float64()})
		}
	}
	switch rng.IntN(3) {
	case 0:
		n.Decisions = []model.Decision{}
	case 1:
		for i := range 1 + rng.IntN(5) {
			n.Decisions = append(n.Decisions, model.Decision{Interval: i, Action: model.ActionExpand, Score: rng.Float64(),
				Reference: rng.Float64(), Delta: -rng.Float64(), Rule: randString(rng, 10), Children: int(randInt(rng))})
		}
	}
	return n
}

// compareRecordDecode fails t unless the fast decoder (when it takes
// payload at all) agrees with msgpack/v5, and the store's decoder, fast
// path and fallback together, returns msgpack/v5's record or ErrCorrupt.
// It reports whether the fast path took it.
func compareRecordDecode[T any](t *testing.T, payload []byte) bool {
	t.Helper()
	var fast, ref T
	took := decodeFast(payload, &fast)
	if !msgpackFits(payload) {
		// msgpack/v5 would allocate what the headers claim; the store
		// refuses such a value before it decodes anything.
		if took {
			t.Fatalf("%x: the fast decoder took a value whose lengths exceed it", payload)
		}
		var got T
		if err := decodeValue("test", nil, frameFor(payload), &got); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%x: %v, want ErrCorrupt", payload, err)
		}
		return false
	}
	refErr := msgpack.Unmarshal(payload, &ref)
	if took && (refErr != nil || !sameRecord(&fast, &ref)) {
		t.Fatalf("%x: the fast decoder took it, msgpack/v5 says %v:\n%+v\n%+v", payload, refErr, fast, ref)
	}
	var got T
	err := decodeValue("test", nil, frameFor(payload), &got)
	switch {
	case err != nil && !errors.Is(err, ErrCorrupt):
		t.Fatalf("%x: error is not ErrCorrupt: %v", payload, err)
	case err == nil && (refErr != nil || !sameRecord(&got, &ref)):
		t.Fatalf("%x: decodeValue returned a record msgpack/v5 does not (%v):\n%+v\n%+v", payload, refErr, got, ref)
	case err != nil && refErr == nil && msgpackFits(payload):
		t.Fatalf("%x: decodeValue: %v; msgpack/v5 decodes it", payload, err)
	}
	if gotE, ok := any(&got).(*model.Event); ok { // RunTx.Events' own entry point
		var e model.Event
		errE := decodeEvent("test", nil, frameFor(payload), &e, nil)
		if (errE == nil) != (err == nil) || (err == nil && !sameRecord(&e, gotE)) {
			t.Fatalf("%x: decodeEvent (%v) and decodeValue (%v) disagree", payload, errE, err)
		}
	}
	return took
}

func TestRecordDecodeMatchesMsgpack(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	check := func(name string, payload []byte, took bool) {
		t.Helper()
		if !took {
			t.Fatalf("%s: the fast decoder did not take the store's own encoding %x", name, payload)
		}
	}
	for range 500 {
		e := randEvent(rng)
		val, err := encodeValue(&e)
		if err != nil {
			t.Fatal(err)
		}
		check("event", val[headerLen:], compareRecordDecode[model.Event](t, val[headerLen:]))
		var got model.Event
		if err := decodeValue("test", nil, val, &got); err != nil || !reflect.DeepEqual(got, e) {
			t.Fatalf("event round trip: %v\n%+v\n%+v", err, got, e)
		}
		for _, m := range mutations(rng, val[headerLen:], 10) {
			compareRecordDecode[model.Event](t, m)
		}

		n := randNode(rng)
		val, err = encodeValue(&n)
		if err != nil {
			t.Fatal(err)
		}
		check("node", val[headerLen:], compareRecordDecode[model.Node](t, val[headerLen:]))
		var gotN model.Node
		if err := DecodePayload(model.Event{Payload: val[headerLen:]}, &gotN); err != nil || !reflect.DeepEqual(gotN, n) {
			t.Fatalf("node round trip through DecodePayload: %v\n%+v\n%+v", err, gotN, n)
		}
		for _, m := range mutations(rng, val[headerLen:], 10) {
			compareRecordDecode[model.Node](t, m)
		}

		a := model.Advantage{Step: uint64(randInt(rng)), Group: uint64(randInt(rng)), Leaf: uint64(randInt(rng)),
			Outcome: rng.NormFloat64(), RubricScore: rng.NormFloat64(), Lambda: rng.Float64(), Total: rng.NormFloat64(),
			Mean: rng.NormFloat64(), Std: rng.Float64(), Advantage: rng.NormFloat64(),
			ZeroVariance: rng.IntN(2) == 0, ZeroVarianceAfter: rng.IntN(2) == 0}
		if k := rng.IntN(4); k > 0 {
			a.Rubrics = make([]uint64, k-1) // nil, empty or some ids
			for i := range a.Rubrics {
				a.Rubrics[i] = uint64(randInt(rng))
			}
		}
		val, err = encodeValue(&a)
		if err != nil {
			t.Fatal(err)
		}
		check("advantage", val[headerLen:], compareRecordDecode[model.Advantage](t, val[headerLen:]))
		var gotA model.Advantage
		if err := decodeValue("test", nil, val, &gotA); err != nil || !reflect.DeepEqual(gotA, a) {
			t.Fatalf("advantage round trip: %v\n%+v\n%+v", err, gotA, a)
		}
		for _, m := range mutations(rng, val[headerLen:], 10) {
			compareRecordDecode[model.Advantage](t, m)
		}

		tp := model.TurnsPayload{From: int(randInt(rng)), Count: int(randInt(rng)), Turns: int(randInt(rng))}
		val, _ = encodeValue(&tp)
		check("turns payload", val[headerLen:], compareRecordDecode[model.TurnsPayload](t, val[headerLen:]))
		for _, m := range mutations(rng, val[headerLen:], 10) {
			compareRecordDecode[model.TurnsPayload](t, m)
		}
	}
	// The shapes msgpack/v5 accepts that the store never writes go to it
	// and decode as they always did: nil, an empty array, a map of field
	// names, an element that is nil or an empty array.
	for _, p := range [][]byte{
		{0xc0}, {0x90},
		{0x82, 0xa3, 'S', 'e', 'q', 0x05, 0xa4, 'K', 'i', 'n', 'd', 0xa1, 'k'},
	} {
		if compareRecordDecode[model.Event](t, p) || compareRecordDecode[model.Node](t, p) || compareRecordDecode[model.TurnsPayload](t, p) || compareRecordDecode[model.Advantage](t, p) {
			t.Fatalf("%x: the fast decoder took a non-canonical shape", p)
		}
	}
	n := model.Node{ID: 3, Scores: []model.Score{{Interval: 1}}}
	val, _ := encodeValue(&n)
	p := bytes.Replace(val[headerLen:], []byte{0x91, 0x93, 0x01, 0x00, 0xcb}, []byte{0x91, 0xc0, 0x01, 0x00, 0xcb}, 1)
	if bytes.Equal(p, val[headerLen:]) {
		t.Fatalf("test setup: score not found in %x", p)
	}
	compareRecordDecode[model.Node](t, p)
}

// FuzzMsgpDifferential feeds the same bytes to the hand-written decoders
// and to msgpack/v5.
func FuzzMsgpDifferential(f *testing.F) {
	rng := rand.New(rand.NewPCG(7, 8))
	// Small seeds: the fuzzer mutates every byte of an input, and a turn's
	// headers are what is worth mutating, not its kilobytes of tokens.
	for _, tu := range []model.Turn{{}, {Action: "act", ActionTokens: []uint32{1, 2}, ActionLogprobs: []float32{-1, -2},
		Observation: strings.Repeat("o", 40), ObservationTokens: []uint32{7}, Reward: 0.5, Done: true}} {
		v, _ := encodeTurn(&tu)
		f.Add(v[headerLen:])
	}
	for range 4 {
		e := randEvent(rng)
		v, _ := encodeValue(&e)
		f.Add(v[headerLen:])
		n := randNode(rng)
		v, _ = encodeValue(&n)
		f.Add(v[headerLen:])
		v, _ = encodeValue(&model.TurnsPayload{From: 1, Count: 300, Turns: -2})
		f.Add(v[headerLen:])
		v, _ = encodeValue(&model.Advantage{Step: 1, Group: 2, Leaf: 3, Advantage: -0.5, Rubrics: []uint64{4, 5}, ZeroVariance: true})
		f.Add(v[headerLen:])
		g := randGroup(rng)
		f.Add(encodeGroup(&g)[headerLen:])
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		compareTurnDecode(t, frameFor(payload))
		compareRecordDecode[model.Event](t, payload)
		compareRecordDecode[model.Node](t, payload)
		compareRecordDecode[model.TurnsPayload](t, payload)
		compareRecordDecode[model.Advantage](t, payload)
		compareRecordDecode[model.Group](t, payload)
	})
}

// The hand-written encoders write each integer in msgpack/v5's shortest
// form, so records stay byte-identical to the reflection encoder's: at
// every width's edges, negative and positive.
func TestIntegersMatchMsgpackAtEveryWidth(t *testing.T) {
	ints := []int64{0, 1, 127, 128, 255, 256, math.MaxUint16, math.MaxUint16 + 1, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64,
		-1, -32, -33, math.MinInt8, math.MinInt8 - 1, -200, math.MinInt16, math.MinInt16 - 1, math.MinInt32, math.MinInt32 - 1, math.MinInt64}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	for _, x := range ints {
		buf.Reset()
		if err := enc.EncodeInt(x); err != nil {
			t.Fatal(err)
		}
		if got := appendInt(nil, x); !bytes.Equal(got, buf.Bytes()) {
			t.Errorf("appendInt(%d) = % x, msgpack writes % x", x, got, buf.Bytes())
		}
		if x < 0 {
			continue
		}
		buf.Reset()
		if err := enc.EncodeUint(uint64(x)); err != nil {
			t.Fatal(err)
		}
		if got := appendUint(nil, uint64(x)); !bytes.Equal(got, buf.Bytes()) {
			t.Errorf("appendUint(%d) = % x, msgpack writes % x", x, got, buf.Bytes())
		}
	}
}
