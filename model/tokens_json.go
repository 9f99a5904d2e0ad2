package model

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// On the wire, token ids and logprobs are JSON arrays of numbers, what
// people read — or packed: a base64 string of their little-endian 4-byte
// words, what programs exchange (docs/json.md), decoded without parsing a
// number per token. Readers take either; package api writes the packed
// form when it is asked for.

// unpackJSON decodes a JSON string holding base64 (ok), and leaves
// anything else (an array, null) to the caller.
func unpackJSON(b []byte) (packed []byte, ok bool, err error) {
	if len(b) == 0 || b[0] != '"' {
		return nil, false, nil
	}
	text := b[1 : len(b)-1] // base64 needs no escapes; a writer that used some is unquoted
	if bytes.IndexByte(text, '\\') >= 0 {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, true, err
		}
		text = []byte(s)
	}
	packed, err = base64.StdEncoding.AppendDecode(make([]byte, 0, base64.StdEncoding.DecodedLen(len(text))), text)
	if err != nil {
		return nil, true, fmt.Errorf("packed words are not base64: %v", err)
	}
	return packed, true, nil
}

// UnmarshalJSON reads an array of ids or a packed string.
func (t *TokenIDs) UnmarshalJSON(b []byte) error {
	if packed, ok, err := unpackJSON(b); ok || err != nil {
		if err != nil {
			return fmt.Errorf("token ids: %w", err)
		}
		ids, whole := Words(packed)
		if !whole {
			return fmt.Errorf("token ids: %d packed bytes is not a multiple of 4", len(packed))
		}
		*t = ids
		return nil
	}
	var ids []uint32
	if err := json.Unmarshal(b, &ids); err != nil {
		return err
	}
	*t = ids
	return nil
}

// Logprobs are the logprobs of an action's tokens, one per token. They
// are stored packed little-endian like the ids.
type Logprobs []float32

// UnmarshalJSON reads an array of numbers or a packed string.
func (l *Logprobs) UnmarshalJSON(b []byte) error {
	if packed, ok, err := unpackJSON(b); ok || err != nil {
		if err != nil {
			return fmt.Errorf("logprobs: %w", err)
		}
		lp, whole := Floats(packed)
		if !whole {
			return fmt.Errorf("logprobs: %d packed bytes is not a multiple of 4", len(packed))
		}
		*l = lp
		return nil
	}
	var lp []float32
	if err := json.Unmarshal(b, &lp); err != nil {
		return err
	}
	*l = lp
	return nil
}

// PackWords is xs as little-endian 4-byte words: the packed wire form of
// token ids (base64 in JSON).
func PackWords(xs []uint32) []byte { return AppendWords(make([]byte, 0, 4*len(xs)), xs) }

// PackFloats is xs as little-endian 4-byte words: the packed wire form of
// logprobs.
func PackFloats(xs []float32) []byte { return AppendFloats(make([]byte, 0, 4*len(xs)), xs) }
