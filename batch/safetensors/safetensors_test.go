package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"
)

func sample() (map[string]string, []Tensor) {
	return map[string]string{"run": "r", "step": "3"}, []Tensor{
		{Name: "ids", DType: I32, Shape: []int{3}, Data: Bytes([]int32{1, -2, 1 << 30})},
		{Name: "mask", DType: U8, Shape: []int{3}, Data: Bytes([]uint8{1, 0, 1})},
		{Name: "lp", DType: F32, Shape: []int{2, 1}, Data: Bytes([]float32{-0.5, float32(math.Inf(-1))})},
		{Name: "empty", DType: I64, Shape: []int{0}, Data: Bytes([]int64{})},
		{Name: "r", DType: F64, Shape: []int{1}, Data: Bytes([]float64{0.25})},
	}
}

func TestRoundTrip(t *testing.T) {
	meta, ts := sample()
	var buf bytes.Buffer
	n, err := Write(&buf, meta, ts)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := Header(meta, ts)
	if n != int64(buf.Len()) || Len(h, ts) != n || (len(h)-8)%8 != 0 {
		t.Fatalf("wrote %d, buffer %d, Len %d, header %d", n, buf.Len(), Len(h, ts), len(h))
	}
	f, err := Read(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if f.Metadata["run"] != "r" || !slices.Equal(f.Names, []string{"ids", "mask", "lp", "empty", "r"}) {
		t.Fatalf("read %v %v", f.Metadata, f.Names)
	}
	ids, err := Values[int32](f.Tensors["ids"])
	if err != nil || !slices.Equal(ids, []int32{1, -2, 1 << 30}) {
		t.Errorf("ids %v %v", ids, err)
	}
	lp, _ := Values[float32](f.Tensors["lp"])
	if lp[0] != -0.5 || !math.IsInf(float64(lp[1]), -1) || !slices.Equal(f.Tensors["lp"].Shape, []int{2, 1}) {
		t.Errorf("lp %v", lp)
	}
	if _, err := Values[int64](f.Tensors["ids"]); !errors.Is(err, ErrFormat) {
		t.Errorf("wrong element type: %v", err)
	}
	// Little-endian on the wire whatever the host.
	if got := binary.LittleEndian.Uint32(f.Tensors["ids"].Data[8:]); got != 1<<30 {
		t.Errorf("ids[2] bytes read %d", got)
	}
	var again bytes.Buffer
	_, _ = Write(&again, meta, ts)
	if !bytes.Equal(again.Bytes(), buf.Bytes()) {
		t.Error("the same tensors wrote different bytes")
	}
}

func TestWriteRefuses(t *testing.T) {
	meta, ts := sample()
	for _, bad := range []Tensor{
		{Name: "ids", DType: U8, Shape: []int{0}, Data: nil},
		{Name: "__metadata__", DType: U8, Shape: []int{0}},
		{Name: "x", DType: "BF16", Shape: []int{0}},
		{Name: "x", DType: I32, Shape: []int{2}, Data: []byte{1, 2, 3, 4}},
		{Name: "x", DType: I32, Shape: []int{-1}},
	} {
		if _, err := Header(meta, append(slices.Clone(ts), bad)); !errors.Is(err, ErrFormat) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

func TestReadRefusesDamage(t *testing.T) {
	meta, ts := sample()
	var buf bytes.Buffer
	_, _ = Write(&buf, meta, ts)
	good := buf.Bytes()
	hl := int(binary.LittleEndian.Uint64(good))
	header := string(good[8 : 8+hl])
	withHeader := func(h string) []byte {
		out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
		return append(append(out, h...), good[8+hl:]...)
	}
	cases := map[string][]byte{
		"short":          good[:5],
		"truncated data": good[:len(good)-1],
		"extra data":     append(slices.Clone(good), 0),
		"huge header":    append(binary.LittleEndian.AppendUint64(nil, 1<<62), good[8:]...),
		"not JSON":       withHeader("{" + header[2:]),
		"overlap":        withHeader(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}`),
		"bad shape":      withHeader(`{"a":{"dtype":"I32","shape":[3],"data_offsets":[0,4]}}`),
		"bad dtype":      withHeader(`{"a":{"dtype":"Q9","shape":[1],"data_offsets":[0,1]}}`),
		"bad metadata":   withHeader(`{"__metadata__":{"a":1}}`),
	}
	for name, b := range cases {
		if _, err := Read(b); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzRead: any bytes are either a file whose tensors lie inside it, or
// ErrFormat; never a panic.
func FuzzRead(f *testing.F) {
	meta, ts := sample()
	var buf bytes.Buffer
	_, _ = Write(&buf, meta, ts)
	f.Add(buf.Bytes())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Read(b)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v is not ErrFormat", err)
			}
			return
		}
		total := 0
		for _, name := range file.Names {
			total += len(file.Tensors[name].Data)
		}
		if total > len(b) {
			t.Fatalf("tensors hold %d bytes of a %d-byte file", total, len(b))
		}
	})
}

// View aliases the file's bytes where it can (the caller's buffer is the
// batch) and says when it cannot, so the caller copies instead of reading
// misaligned words.
func TestViewAliasesAlignedData(t *testing.T) {
	meta, ts := sample()
	var buf bytes.Buffer
	if _, err := Write(&buf, meta, ts); err != nil {
		t.Fatal(err)
	}
	f, err := Read(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	ids, ok, err := View[int32](f.Tensors["ids"])
	if err != nil || !ok || !slices.Equal(ids, []int32{1, -2, 1 << 30}) {
		t.Fatalf("View: %v %v %v", ids, ok, err)
	}
	f.Tensors["ids"].Data[0] = 7 // the view shares the bytes
	if ids[0] != 7 {
		t.Errorf("View copied: ids[0] = %d after the data changed", ids[0])
	}
	if _, _, err := View[int64](f.Tensors["ids"]); !errors.Is(err, ErrFormat) {
		t.Errorf("wrong element type: %v", err)
	}
	odd := append([]byte{0}, Bytes([]int32{5, 6})...)[1:]
	if xs, ok, err := View[int32](Tensor{Name: "odd", DType: I32, Shape: []int{2}, Data: odd}); ok || err != nil || xs != nil {
		t.Errorf("misaligned data viewed: %v %v %v", xs, ok, err)
	}
}
