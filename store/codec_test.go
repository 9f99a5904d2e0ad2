package store

// The value frame: what each kind of damage is reported as, and the
// encoder's promise that a record always encodes to the same bytes.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/patrdb/patrdb/model"
)

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
