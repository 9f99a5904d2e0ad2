// Package safetensors writes and reads the safetensors file format, the
// one trainers load tensors from without running code:
//
//	+------------------+---------------------------+--------------------+
//	| N: u64 LE (8 B)  | N bytes of JSON header    | tensor bytes       |
//	+------------------+---------------------------+--------------------+
//
// The header maps each tensor name to {"dtype", "shape", "data_offsets":
// [begin, end]} (offsets relative to the start of the tensor bytes), and
// "__metadata__" to a map of strings. Tensors are little-endian, row-major,
// packed back to back in header order with no gaps; the header is padded
// with spaces to a multiple of 8 bytes so every tensor starts aligned.
//
// Write emits the header in the order the tensors are given and the
// metadata keys sorted, so the same tensors always give the same bytes.
// Read checks everything a loader relies on and reports damage as
// ErrFormat.
package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"unsafe"
)

// DType is a tensor element type, spelled as the format spells it.
type DType string

const (
	U8  DType = "U8"
	I32 DType = "I32"
	I64 DType = "I64"
	F32 DType = "F32"
	F64 DType = "F64"
)

// Size is the width of one element in bytes; 0 for a type this package
// does not know.
func (d DType) Size() int {
	switch d {
	case U8:
		return 1
	case I32, F32:
		return 4
	case I64, F64:
		return 8
	}
	return 0
}

// Tensor is one named array: Data holds its elements little-endian.
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// ErrFormat marks bytes that are not a valid safetensors file, or tensors
// that cannot be written as one (a shape that does not match the data, a
// duplicate or reserved name).
var ErrFormat = errors.New("safetensors: invalid format")

func formatErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrFormat, fmt.Sprintf(format, args...))
}

// maxHeader bounds the JSON header a reader accepts, as the reference
// implementation does (100 MB), so a damaged length cannot make it
// allocate without limit.
const maxHeader = 100 << 20

const metadataKey = "__metadata__"

// Header returns the 8-byte length and JSON header that precede the
// tensors' bytes, and checks that every tensor's shape matches its data.
func Header(meta map[string]string, tensors []Tensor) ([]byte, error) {
	buf := []byte{0, 0, 0, 0, 0, 0, 0, 0, '{'}
	if len(meta) > 0 {
		m, err := json.Marshal(meta) // sorted keys
		if err != nil {
			return nil, err
		}
		buf = append(append(buf, `"__metadata__":`...), m...)
	}
	seen := make(map[string]bool, len(tensors))
	var off int64
	for _, t := range tensors {
		if t.Name == metadataKey || seen[t.Name] {
			return nil, formatErr("tensor name %q is reserved or repeated", t.Name)
		}
		seen[t.Name] = true
		n, err := elements(t.DType, t.Shape)
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		if n*int64(t.DType.Size()) != int64(len(t.Data)) {
			return nil, formatErr("tensor %q: shape %v of %s is %d bytes, data is %d", t.Name, t.Shape, t.DType, n*int64(t.DType.Size()), len(t.Data))
		}
		if len(buf) > 9 {
			buf = append(buf, ',')
		}
		name, _ := json.Marshal(t.Name)
		buf = append(append(buf, name...), `:{"dtype":"`...)
		buf = append(append(buf, t.DType...), `","shape":[`...)
		for i, d := range t.Shape {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = strconv.AppendInt(buf, int64(d), 10)
		}
		buf = append(buf, `],"data_offsets":[`...)
		buf = strconv.AppendInt(buf, off, 10)
		off += int64(len(t.Data))
		buf = append(strconv.AppendInt(append(buf, ','), off, 10), "]}"...)
	}
	buf = append(buf, '}')
	for len(buf)%8 != 0 {
		buf = append(buf, ' ')
	}
	binary.LittleEndian.PutUint64(buf, uint64(len(buf)-8))
	return buf, nil
}

// Len is the size of the file Write produces for these tensors, for a
// Content-Length.
func Len(header []byte, tensors []Tensor) int64 {
	n := int64(len(header))
	for _, t := range tensors {
		n += int64(len(t.Data))
	}
	return n
}

// Write writes the whole file to w, the tensors' bytes straight from
// their slices (no copy), and returns the bytes written.
func Write(w io.Writer, meta map[string]string, tensors []Tensor) (int64, error) {
	h, err := Header(meta, tensors)
	if err != nil {
		return 0, err
	}
	n, err := w.Write(h)
	total := int64(n)
	for _, t := range tensors {
		if err != nil {
			break
		}
		n, err = w.Write(t.Data)
		total += int64(n)
	}
	return total, err
}

func elements(d DType, shape []int) (int64, error) {
	if d.Size() == 0 {
		return 0, formatErr("dtype %q is not one of U8, I32, I64, F32, F64", d)
	}
	n := int64(1)
	for _, s := range shape {
		if s < 0 || (s > 0 && n > math.MaxInt64/int64(s)/8) {
			return 0, formatErr("shape %v is out of range", shape)
		}
		n *= int64(s)
	}
	return n, nil
}

// File is a parsed safetensors file. Tensor data aliases the bytes given
// to Read.
type File struct {
	Metadata map[string]string
	Tensors  map[string]Tensor
	Names    []string // in data order
}

type headerEntry struct {
	DType   DType    `json:"dtype"`
	Shape   []int    `json:"shape"`
	Offsets [2]int64 `json:"data_offsets"`
}

// Read parses a whole file. It refuses an unknown dtype, a shape that does
// not match its offsets, and tensors that overlap, leave gaps or run past
// the end, as the reference loader does.
func Read(b []byte) (*File, error) {
	if len(b) < 8 {
		return nil, formatErr("%d bytes is shorter than the 8-byte header length", len(b))
	}
	hl := binary.LittleEndian.Uint64(b)
	if hl > maxHeader || hl > uint64(len(b)-8) {
		return nil, formatErr("header length %d exceeds the file (%d bytes) or 100 MB", hl, len(b))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+hl], &raw); err != nil {
		return nil, formatErr("header: %v", err)
	}
	data := b[8+hl:]
	f := &File{Metadata: map[string]string{}, Tensors: make(map[string]Tensor, len(raw))}
	type span struct {
		name       string
		begin, end int64
	}
	var spans []span
	for name, v := range raw {
		if name == metadataKey {
			if err := json.Unmarshal(v, &f.Metadata); err != nil {
				return nil, formatErr("__metadata__ is not a map of strings: %v", err)
			}
			continue
		}
		var e headerEntry
		if err := json.Unmarshal(v, &e); err != nil {
			return nil, formatErr("tensor %q: %v", name, err)
		}
		n, err := elements(e.DType, e.Shape)
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %w", name, err)
		}
		begin, end := e.Offsets[0], e.Offsets[1]
		if begin < 0 || end < begin || end > int64(len(data)) || end-begin != n*int64(e.DType.Size()) {
			return nil, formatErr("tensor %q: offsets [%d, %d] do not hold shape %v of %s in %d bytes", name, begin, end, e.Shape, e.DType, len(data))
		}
		f.Tensors[name] = Tensor{Name: name, DType: e.DType, Shape: e.Shape, Data: data[begin:end:end]}
		spans = append(spans, span{name, begin, end})
	}
	sort.Slice(spans, func(i, j int) bool {
		if spans[i].begin != spans[j].begin {
			return spans[i].begin < spans[j].begin
		}
		return spans[i].end < spans[j].end
	})
	var at int64
	for _, s := range spans {
		if s.begin != at {
			return nil, formatErr("tensor %q starts at %d, want %d (no gaps or overlaps)", s.name, s.begin, at)
		}
		at = s.end
		f.Names = append(f.Names, s.name)
	}
	if at != int64(len(data)) {
		return nil, formatErr("tensors end at %d of %d data bytes", at, len(data))
	}
	return f, nil
}

// Elem is an element type a tensor's bytes can be viewed as.
type Elem interface {
	uint8 | int32 | int64 | float32 | float64
}

// DTypeOf is the dtype of T.
func DTypeOf[T Elem]() DType {
	var zero T
	switch any(zero).(type) {
	case uint8:
		return U8
	case int32:
		return I32
	case int64:
		return I64
	case float32:
		return F32
	}
	return F64
}

func view[T Elem](xs []T) []byte {
	if len(xs) == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&xs[0])), len(xs)*int(unsafe.Sizeof(xs[0])))
}

// swap reverses every size-byte word of b in place: little-endian bytes
// to host order and back on a big-endian host.
func swap(b []byte, size int) {
	if littleEndian || size == 1 {
		return
	}
	for i := 0; i < len(b); i += size {
		slices.Reverse(b[i : i+size])
	}
}

// Bytes returns xs's elements as little-endian bytes: a view of xs on a
// little-endian host (no copy), a converted copy otherwise.
func Bytes[T Elem](xs []T) []byte {
	b := view(xs)
	if littleEndian {
		return b
	}
	b = slices.Clone(b)
	swap(b, DTypeOf[T]().Size())
	return b
}

// Values returns a copy of t's elements as T, which must match its dtype.
func Values[T Elem](t Tensor) ([]T, error) {
	d := DTypeOf[T]()
	if t.DType != d {
		return nil, formatErr("tensor %q is %s, not %s", t.Name, t.DType, d)
	}
	out := make([]T, len(t.Data)/d.Size())
	b := view(out)
	copy(b, t.Data)
	swap(b, d.Size())
	return out, nil
}

// View returns t's elements as T without copying: a slice over t.Data,
// which must then stay unchanged while the slice is used. ok is false when
// that cannot be done — a big-endian host, or data not aligned for T —
// and the caller copies with Values instead.
func View[T Elem](t Tensor) (xs []T, ok bool, err error) {
	d := DTypeOf[T]()
	if t.DType != d {
		return nil, false, formatErr("tensor %q is %s, not %s", t.Name, t.DType, d)
	}
	if !littleEndian {
		return nil, false, nil
	}
	if len(t.Data) == 0 {
		return []T{}, true, nil
	}
	var zero T
	if uintptr(unsafe.Pointer(&t.Data[0]))%unsafe.Alignof(zero) != 0 {
		return nil, false, nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&t.Data[0])), len(t.Data)/d.Size()), true, nil
}

var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// Decode fills dst with the little-endian elements packed in src, which
// must hold exactly len(dst) of them: one copy on a little-endian host.
func Decode[T Elem](dst []T, src []byte) {
	b := view(dst)
	copy(b, src)
	swap(b, DTypeOf[T]().Size())
}
