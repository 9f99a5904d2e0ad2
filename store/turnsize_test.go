package store_test

// encodeTurn promises one allocation of exactly the value's size: the
// size formula must agree with the encoder at every msgpack header width
// (fixstr/str8/str16/str32, bin8/bin16/bin32).

import (
	"reflect"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

func TestEncodeTurnExactSize(t *testing.T) {
	strLens := []int{0, 31, 32, 255, 256, 65535, 65536}
	tokLens := []int{0, 1, 63, 64, 16383, 16384} // 4 bytes each: bin8 up to 255 bytes, bin16 up to 65535
	for i, sl := range strLens {
		for j, tl := range tokLens {
			toks := make([]uint32, tl)
			lps := make([]float32, tokLens[(j+1)%len(tokLens)])
			obs := make([]uint32, tokLens[(j+2)%len(tokLens)])
			turn := model.Turn{
				Action:            strings.Repeat("a", sl),
				ActionTokens:      toks,
				ActionLogprobs:    lps,
				Observation:       strings.Repeat("o", strLens[(i+1)%len(strLens)]),
				ObservationTokens: obs,
				Reward:            0.5,
				Done:              true,
			}
			v, err := store.EncodeTurn(&turn)
			if err != nil {
				t.Fatal(err)
			}
			if cap(v) != len(v) {
				t.Errorf("action %d bytes, %d tokens: value of %d bytes in %d of capacity", sl, tl, len(v), cap(v))
			}
			got, err := store.DecodeTurn(v)
			if err != nil {
				t.Fatalf("action %d bytes, %d tokens: %v", sl, tl, err)
			}
			for _, s := range []*model.TokenIDs{&turn.ActionTokens, &turn.ObservationTokens} {
				if len(*s) == 0 {
					*s = nil
				}
			}
			if len(turn.ActionLogprobs) == 0 {
				turn.ActionLogprobs = nil
			}
			if !reflect.DeepEqual(got, turn) {
				t.Errorf("action %d bytes, %d tokens: round trip differs", sl, tl)
			}
		}
	}
}
