package store

import (
	"fmt"
	"sort"
	"unicode/utf8"
	"unsafe"

	"github.com/patrdb/patrdb/model"
	"github.com/vmihailenco/msgpack/v5"
)

// msgpackEncode writes the ids as one bin value (nil stays nil).
func msgpackEncodeTokenIDs(enc *msgpack.Encoder, t model.TokenIDs) error {
	if t == nil {
		return enc.EncodeNil()
	}
	return enc.EncodeBytes(model.AppendWords(make([]byte, 0, 4*len(t)), t))
}

// msgpackDecode reads what msgpackEncode wrote; a length that is not a
// multiple of 4 is damage.
func msgpackDecodeTokenIDs(dec *msgpack.Decoder, t *model.TokenIDs) error {
	b, err := dec.DecodeBytes()
	if err != nil {
		return err
	}
	if b == nil {
		*t = nil
		return nil
	}
	ids, ok := model.Words(b)
	if !ok {
		return fmt.Errorf("token ids: %d bytes is not a multiple of 4", len(b))
	}
	*t = ids
	return nil
}

// validText reports the first named text field (fields are name, value
// pairs, in the order given), or meta key or value, that is not valid
// UTF-8: msgpack would store it, but every JSON, Parquet and terminal
// reader downstream would show U+FFFD in its place. The labels are built
// only when something is invalid.
func validText(meta map[string]string, fields ...string) error {
	for i := 0; i+1 < len(fields); i += 2 {
		if !utf8.ValidString(fields[i+1]) {
			return invalidf("%s is not valid UTF-8", fields[i])
		}
	}
	valid := true
	for k, v := range meta {
		valid = valid && utf8.ValidString(k) && utf8.ValidString(v)
	}
	if valid {
		return nil
	}
	for _, k := range sortedKeys(meta) {
		if !utf8.ValidString(k) || !utf8.ValidString(meta[k]) {
			return invalidf("meta %q is not valid UTF-8", k)
		}
	}
	return nil
}

// sortedKeys makes validText name the same meta key whatever the map order.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// MaxTokenID is the largest token id the store accepts: 2^31 − 1. Token
// ids leave the store as int32 (the index type of embedding layers and
// of a training batch's input_ids), where 2^31 would wrap to −2^31.
const MaxTokenID = 1<<31 - 1

// validTokenIDs refuses an id above MaxTokenID, naming the first; what
// says whose ids they are ("action token"). The common case is tested a
// word at a time, two ids a word, like the turn rule's other checks.
func validTokenIDs(what string, ids []uint32) error {
	if tokenIDsFit(ids) {
		return nil
	}
	for i, id := range ids {
		if id > MaxTokenID {
			return invalidf("%s %d is %d; token ids must be at most %d (2^31 − 1), the int32 that embedding layers index with", what, i, id, MaxTokenID)
		}
	}
	return nil
}

// tokenIDsFit reports whether no id has its top bit set.
func tokenIDsFit(ids []uint32) bool {
	switch len(ids) {
	case 0:
		return true
	case 1:
		return ids[0] <= MaxTokenID
	}
	return orWords(unsafe.Pointer(unsafe.SliceData(ids)), 4*len(ids))&0x80000000_80000000 == 0
}
