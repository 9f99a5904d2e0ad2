package store

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// Group records are reflection-encoded as a msgpack array in field order.
// msgpack/v5 refuses an array whose length differs from the struct's field
// count, so the decoder is written out to read both shapes: format 1's nine
// fields and format 2's ten (PromptTokens appended).
const (
	groupFields   = 10
	groupFieldsV1 = 9
)

var _ msgpack.CustomDecoder = (*Group)(nil)

// DecodeMsgpack reads a group record of format 1 or 2.
func (g *Group) DecodeMsgpack(dec *msgpack.Decoder) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	*g = Group{}
	if n == -1 {
		return nil
	}
	if n != groupFields && n != groupFieldsV1 {
		return fmt.Errorf("group record has %d fields, want %d or %d", n, groupFieldsV1, groupFields)
	}
	fields := []any{&g.ID, &g.Step, &g.Task, &g.Prompt, &g.Gold, &g.Roots, &g.Status, &g.Interval, &g.Meta, &g.PromptTokens}
	for _, f := range fields[:n] {
		if err := dec.Decode(f); err != nil {
			return err
		}
	}
	return nil
}
