package store

// msgpackFits is the bound that keeps a damaged value from making msgpack/v5
// allocate what its headers claim: every header kind, at the exact edge
// where it fits and one byte short, and lengths nested inside maps and
// arrays.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"runtime"
	"testing"

	"github.com/patrdb/patrdb/model"
)

func TestMsgpackFits(t *testing.T) {
	rep := func(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	cases := []struct {
		name string
		b    []byte
		want bool
	}{
		{"empty", nil, false},
		{"positive fixint 0x00", []byte{0x00}, true},
		{"positive fixint 0x7f", []byte{0x7f}, true},
		{"negative fixint 0xe0", []byte{0xe0}, true},
		{"negative fixint 0xff", []byte{0xff}, true},
		{"nil, false, true", []byte{0x93, 0xc0, 0xc2, 0xc3}, true},
		{"never used 0xc1", []byte{0xc1}, false},
		{"trailing bytes after the object", []byte{0x01, 0xc1, 0xc1}, true},

		{"empty fixmap", []byte{0x80}, true},
		{"fixmap of 1 pair", []byte{0x81, 0x01, 0x02}, true},
		{"fixmap of 1 pair without its value", []byte{0x81, 0x01}, false},
		{"fixmap of 15 pairs, one short", cat([]byte{0x8f}, rep(0x01, 29)), false},
		{"fixmap of 15 pairs", cat([]byte{0x8f}, rep(0x01, 30)), true},
		{"empty fixarray", []byte{0x90}, true},
		{"fixarray of 15, one short", cat([]byte{0x9f}, rep(0x01, 14)), false},
		{"fixarray of 15", cat([]byte{0x9f}, rep(0x01, 15)), true},
		{"empty fixstr", []byte{0xa0}, true},
		{"fixstr of 31, one short", cat([]byte{0xbf}, rep('a', 30)), false},
		{"fixstr of 31", cat([]byte{0xbf}, rep('a', 31)), true},

		{"str8 empty", []byte{0xd9, 0x00}, true},
		{"str8 without its length", []byte{0xd9}, false},
		{"str8 of 3", []byte{0xd9, 0x03, 'a', 'b', 'c'}, true},
		{"str8 of 4 holding 3", []byte{0xd9, 0x04, 'a', 'b', 'c'}, false},
		{"bin8 of 2", []byte{0xc4, 0x02, 1, 2}, true},
		{"bin8 of 2 holding 1", []byte{0xc4, 0x02, 1}, false},
		{"str16 of 2", []byte{0xda, 0x00, 0x02, 'a', 'b'}, true},
		{"str16 with half its length", []byte{0xda, 0x00}, false},
		{"bin16 of 256 holding 255", cat([]byte{0xc5, 0x01, 0x00}, rep(0, 255)), false},
		{"bin16 of 256", cat([]byte{0xc5, 0x01, 0x00}, rep(0, 256)), true},
		{"str32 of 1", []byte{0xdb, 0, 0, 0, 1, 'a'}, true},
		{"bin32 of 4 GB", []byte{0xc6, 0xff, 0xff, 0xff, 0xff, 1}, false},
		{"bin32 with 3 length bytes", []byte{0xc6, 0, 0, 0}, false},
		{"bin32 of 65536 holding 65535", cat([]byte{0xc6, 0, 1, 0, 0}, rep(0, 65535)), false},

		{"ext8 of 2", []byte{0xc7, 0x02, 0x05, 1, 2}, true},
		{"ext8 of 2 without its type byte", []byte{0xc7, 0x02}, false},
		{"ext8 of 2 holding 1", []byte{0xc7, 0x02, 0x05, 1}, false},
		{"ext8 of 0", []byte{0xc7, 0x00, 0x05}, true},
		{"ext16 of 1", []byte{0xc8, 0x00, 0x01, 0x05, 1}, true},
		{"ext16 of 1 holding 0", []byte{0xc8, 0x00, 0x01, 0x05}, false},
		{"ext32 of 1", []byte{0xc9, 0, 0, 0, 1, 0x05, 1}, true},
		{"ext32 of 4 GB", []byte{0xc9, 0xff, 0xff, 0xff, 0xff, 0x05, 1}, false},
		{"fixext1", []byte{0xd4, 0x05, 1}, true},
		{"fixext1 without data", []byte{0xd4, 0x05}, false},
		{"fixext2", []byte{0xd5, 0x05, 1, 2}, true},
		{"fixext2 holding 1", []byte{0xd5, 0x05, 1}, false},
		{"fixext4", cat([]byte{0xd6, 0x05}, rep(1, 4)), true},
		{"fixext4 holding 3", cat([]byte{0xd6, 0x05}, rep(1, 3)), false},
		{"fixext8", cat([]byte{0xd7, 0x05}, rep(1, 8)), true},
		{"fixext8 holding 7", cat([]byte{0xd7, 0x05}, rep(1, 7)), false},
		{"fixext16", cat([]byte{0xd8, 0x05}, rep(1, 16)), true},
		{"fixext16 without its type byte's data", cat([]byte{0xd8}, rep(1, 16)), false},

		{"uint8", []byte{0xcc, 1}, true},
		{"int8 without its byte", []byte{0xd0}, false},
		{"uint16", []byte{0xcd, 1, 2}, true},
		{"int16 holding 1", []byte{0xd1, 1}, false},
		{"float32", []byte{0xca, 1, 2, 3, 4}, true},
		{"uint32 holding 3", []byte{0xce, 1, 2, 3}, false},
		{"int32", []byte{0xd2, 1, 2, 3, 4}, true},
		{"float64", cat([]byte{0xcb}, rep(1, 8)), true},
		{"uint64 holding 7", cat([]byte{0xcf}, rep(1, 7)), false},
		{"int64", cat([]byte{0xd3}, rep(1, 8)), true},

		{"array16 of 3", []byte{0xdc, 0x00, 0x03, 1, 2, 3}, true},
		{"array16 of 3 holding 2", []byte{0xdc, 0x00, 0x03, 1, 2}, false},
		{"array16 with half its length", []byte{0xdc, 0x00}, false},
		{"array32 of 2", []byte{0xdd, 0, 0, 0, 2, 1, 2}, true},
		{"array32 of 4 G elements", []byte{0xdd, 0xff, 0xff, 0xff, 0xff, 1}, false},
		{"map16 of 1 pair", []byte{0xde, 0x00, 0x01, 1, 2}, true},
		{"map16 of 1 pair holding its key only", []byte{0xde, 0x00, 0x01, 1}, false},
		{"map32 of 1 pair", []byte{0xdf, 0, 0, 0, 1, 1, 2}, true},
		{"map32 of 2 G pairs", []byte{0xdf, 0x7f, 0xff, 0xff, 0xff, 1, 2}, false},

		// Lengths nested inside containers are bounded too.
		{"map value bin32 of 4 GB", []byte{0x81, 0xa1, 'k', 0xc6, 0xff, 0xff, 0xff, 0xff, 1}, false},
		{"map value str8 one short", []byte{0x81, 0xa1, 'k', 0xd9, 0x02, 'v'}, false},
		{"map value str8", []byte{0x81, 0xa1, 'k', 0xd9, 0x01, 'v'}, true},
		{"map key fixext4 holding 3", []byte{0x81, 0xd6, 0x05, 1, 2, 3, 0x01}, false},
		{"map value fixext16 holding 15", cat([]byte{0x81, 0x01, 0xd8, 0x05}, rep(1, 15)), false},
		{"map value fixext16", cat([]byte{0x81, 0x01, 0xd8, 0x05}, rep(1, 16)), true},
		{"array element map32 of 2 G pairs", []byte{0x92, 0x01, 0xdf, 0x7f, 0xff, 0xff, 0xff}, false},
		{"nested arrays", []byte{0x92, 0x91, 0x91, 0x01, 0x92, 0xa1, 'x', 0xc0}, true},
		{"nested arrays one short", []byte{0x92, 0x91, 0x91, 0x01, 0x92, 0xa1, 'x'}, false},
	}
	for _, c := range cases {
		if got := msgpackFits(c.b); got != c.want {
			t.Errorf("%s: msgpackFits(% x) = %t, want %t", c.name, c.b, got, c.want)
		}
	}
}

// TestDecodeValueBoundsNestedLengths: a record whose map value claims 4 GB
// is ErrCorrupt, read without allocating what the header claims.
func TestDecodeValueBoundsNestedLengths(t *testing.T) {
	raw, err := encodeValue(&model.Group{ID: 1, Step: 1, Meta: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	// The value "v" is the 2 bytes (fixstr 1, 'v') before the last field,
	// the nil prompt tokens: make it a str32 of 4 GB.
	if raw[len(raw)-1] != 0xc0 || raw[len(raw)-2] != 'v' {
		t.Fatalf("unexpected group encoding % x", raw)
	}
	payload := append(bytes.Clone(raw[headerLen:len(raw)-3]), 0xdb, 0xff, 0xff, 0xff, 0xff, 'v', 0xc0)
	damaged := append([]byte{valueFormatV1, 0, 0, 0, 0}, payload...)
	binary.BigEndian.PutUint32(damaged[1:5], crc32.Checksum(payload, castagnoli))
	// Bytes, not allocations, are what the bound protects: the count
	// varies under the race detector, whose sync.Pool drops items at
	// random, while the claimed 4 GB would show in TotalAlloc whatever
	// else runs alongside.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var g model.Group
	err = decodeValue("groups", []byte("k"), damaged, &g)
	runtime.ReadMemStats(&after)
	var ce *CorruptError
	if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.Reason != "decode: a length exceeds the value" {
		t.Fatalf("decode of a 4 GB map value: %v", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<20 {
		t.Errorf("refusing it allocated %d bytes", n)
	}
}
