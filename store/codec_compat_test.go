package store_test

import (
	"bytes"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/vmihailenco/msgpack/v5"
)

// A turns payload decodes from each format's field count and refuses any
// other shape, or a field of the wrong type, with an error rather than a
// half-filled payload.
func TestTurnsPayloadShapes(t *testing.T) {
	enc := func(v any) []byte {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct {
		name string
		raw  []byte
		want model.TurnsPayload
	}{
		{"format 1", enc([]int{2, 3, 5}), model.TurnsPayload{From: 2, Count: 3, Turns: 5}},
		{"format 2", enc([]int{2, 3, 5, 7, 9}), model.TurnsPayload{From: 2, Count: 3, Turns: 5, MinVersion: 7, MaxVersion: 9}},
		{"format 3", enc([]int{2, 3, 5, 7, 9, 11}), model.TurnsPayload{From: 2, Count: 3, Turns: 5, MinVersion: 7, MaxVersion: 9, Seq: 11}},
		{"format 4", enc([]int{2, 3, 5, 7, 9, 11, 8}), model.TurnsPayload{From: 2, Count: 3, Turns: 5, MinVersion: 7, MaxVersion: 9, Seq: 11, Oldest: 8}},
		{"nil", enc(nil), model.TurnsPayload{}},
	} {
		got := model.TurnsPayload{From: -1, Seq: 99} // decoding replaces it whole
		if err := msgpack.Unmarshal(c.raw, &got); err != nil || got != c.want {
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
	for _, c := range []struct {
		name string
		raw  []byte
	}{
		{"2 fields", enc([]int{2, 3})},
		{"4 fields", enc([]int{2, 3, 5, 7})},
		{"8 fields", enc([]int{2, 3, 5, 7, 9, 11, 8, 1})},
		{"a string for the count", enc([]any{2, "three", 5})},
		{"a string for the last field", enc([]any{2, 3, "five"})},
	} {
		var got model.TurnsPayload
		if err := msgpack.Unmarshal(c.raw, &got); err == nil {
			t.Errorf("%s: decoded as %+v, want an error", c.name, got)
		}
	}
}

// A nil decodes into the zero record, not into an array of -1 fields,
// through the decoders the store registers with msgpack/v5 for the
// records that grew (codec_register.go).
func TestDecodeMsgpackReadsNilAsZero(t *testing.T) {
	nilDec := func() *msgpack.Decoder { return msgpack.NewDecoder(bytes.NewReader([]byte{0xc0})) }
	p := model.TurnsPayload{From: 1, Seq: 2}
	if err := nilDec().Decode(&p); err != nil || p != (model.TurnsPayload{}) {
		t.Errorf("TurnsPayload from nil: %+v, %v; want the zero payload", p, err)
	}
	g := model.Group{ID: 1, Task: "t"}
	if err := nilDec().Decode(&g); err != nil || g.ID != 0 || g.Task != "" {
		t.Errorf("Group from nil: %+v, %v; want the zero group", g, err)
	}
}

// A value that is not an array at all is refused, not read as an empty
// record.
func TestDecodeMsgpackRefusesNonArray(t *testing.T) {
	for _, raw := range [][]byte{{0xa1, 'x'}, {0x01}, {0x81, 0x01, 0x02}} {
		var g model.Group
		if err := msgpack.Unmarshal(raw, &g); err == nil {
			t.Errorf("group from % x: %+v, want an error", raw, g)
		}
		var p model.TurnsPayload
		if err := msgpack.Unmarshal(raw, &p); err == nil {
			t.Errorf("turns payload from % x: %+v, want an error", raw, p)
		}
	}
}

// A run record decodes from format 3's seven fields (no policy version)
// and format 4's ten (and how far its steps were dropped), and refuses
// any other count.
func TestRunRecordShapes(t *testing.T) {
	enc := func(v any) []byte {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	v3 := []any{"r", []byte(`{}`), "running", 2, 10, 20, map[string]string{"a": "b"}}
	var got model.Run
	if err := msgpack.Unmarshal(enc(v3), &got); err != nil || got.ID != "r" || got.LastStep != 2 || got.PolicyVersion != 0 || got.Meta["a"] != "b" {
		t.Fatalf("format 3: %+v, %v", got, err)
	}
	if err := msgpack.Unmarshal(enc(append(v3, 7, 2, 30)), &got); err != nil || got.PolicyVersion != 7 || got.UpdatedAt != 20 || got.DroppedStep != 2 || got.DroppedSeq != 30 {
		t.Fatalf("format 4: %+v, %v", got, err)
	}
	for _, bad := range [][]any{v3[:6], append(append([]any{}, v3...), 7), append(append([]any{}, v3...), 7, 8, 9, 10), append(append([]any{}, v3...), "seven", 2, 30)} {
		if err := msgpack.Unmarshal(enc(bad), &got); err == nil {
			t.Errorf("%v decoded as %+v, want an error", bad, got)
		}
	}
}
