package store

import "testing"

// A map32 header counts pairs, two objects each, like map16's: a map32
// short of its value must not pass as fitting (its length read as a byte
// count would let a truncated map through).
func TestMsgpackFitsMap32CountsPairs(t *testing.T) {
	for _, c := range []struct {
		name string
		b    []byte
		want bool
	}{
		{"map32 of 1 pair holding its key only", []byte{0xdf, 0, 0, 0, 1, 0x01}, false},
		{"map32 of 2 pairs holding 3 objects", []byte{0xdf, 0, 0, 0, 2, 1, 2, 3}, false},
		{"map32 of 2 pairs", []byte{0xdf, 0, 0, 0, 2, 1, 2, 3, 4}, true},
		{"map16 of 2 pairs holding 3 objects", []byte{0xde, 0, 2, 1, 2, 3}, false},
	} {
		if got := msgpackFits(c.b); got != c.want {
			t.Errorf("%s: msgpackFits(% x) = %t, want %t", c.name, c.b, got, c.want)
		}
	}
}
