package store

import (
	"fmt"

	"github.com/patrdb/patrdb/model"
	"github.com/vmihailenco/msgpack/v5"
)

// Records grow only at their end, and format 2 appended fields to groups
// and turns payloads. They are reflection-encoded as msgpack arrays in
// field order, and msgpack/v5 refuses an array whose length differs from
// the struct's field count, so their decoders are written out to read both
// shapes. (Nodes and turns have hand-written decoders that do the same.)

// msgpackDecode reads a turns payload of format 1 (from, count, turns), 2
// (and the policy-version range), 3 (and the turn sequence number) or 4
// (and the oldest version written).
func msgpackDecodeTurnsPayload(dec *msgpack.Decoder, p *model.TurnsPayload) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	*p = model.TurnsPayload{}
	if n == -1 {
		return nil
	}
	if n != turnsPayloadFields && n != turnsPayloadFieldsV3 && n != turnsPayloadFieldsV2 && n != turnsPayloadFieldsV1 {
		return fmt.Errorf("turns payload has %d fields, want %d, %d, %d or %d", n, turnsPayloadFieldsV1, turnsPayloadFieldsV2, turnsPayloadFieldsV3, turnsPayloadFields)
	}
	fields := []any{&p.From, &p.Count, &p.Turns, &p.MinVersion, &p.MaxVersion, &p.Seq, &p.Oldest}
	for _, f := range fields[:n] {
		if err := dec.Decode(f); err != nil {
			return err
		}
	}
	return nil
}

// Run records: format 4 appended the current policy version and how far
// old steps were dropped.
const (
	runFields   = 10
	runFieldsV3 = 7
)

// msgpackDecode reads a run record of format 1–3 or 4.
func msgpackDecodeRun(dec *msgpack.Decoder, r *model.Run) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	*r = model.Run{}
	if n == -1 {
		return nil
	}
	if n != runFields && n != runFieldsV3 {
		return fmt.Errorf("run record has %d fields, want %d or %d", n, runFieldsV3, runFields)
	}
	fields := []any{&r.ID, &r.Config, &r.Status, &r.LastStep, &r.CreatedAt, &r.UpdatedAt, &r.Meta, &r.PolicyVersion, &r.DroppedStep, &r.DroppedSeq}
	for _, f := range fields[:n] {
		if err := dec.Decode(f); err != nil {
			return err
		}
	}
	return nil
}

// msgpackDecode reads a group record of format 1 or 2.
func msgpackDecodeGroup(dec *msgpack.Decoder, g *model.Group) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	*g = model.Group{}
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
