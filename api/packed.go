package api

import (
	"encoding"
	"encoding/base64"
	"github.com/patrdb/patrdb/model"

	"github.com/patrdb/patrdb/rollout"
)

// The packed wire. A turn's token ids and logprobs are JSON arrays of
// numbers, what people read; programs may ask for them packed instead —
// the same fields, each a base64 string of the little-endian 4-byte words
// (docs/json.md) — which a reader decodes without parsing a number per
// token. A request asks for packed answers with the query parameter
// tokens=packed (leases, a trajectory, a step's pending work); the server
// reads packed turns in any request body (submits), and every reader here
// (model.TokenIDs, model.Logprobs) takes either form. PackedSince is the
// API version that speaks it.

// PackedSince is the first API version ("<major>.<minor>") that reads and
// writes packed token arrays.
const PackedSince = "1.5"

// TokensPacked is the query value that asks for packed answers.
const TokensPacked = "packed"

// PackedIDs are token ids written packed.
type PackedIDs []uint32

// MarshalText writes the ids as base64 of their little-endian words (a
// text marshaler: encoding/json writes it as a string without parsing it
// again, as it would a MarshalJSON's output).
func (p PackedIDs) MarshalText() ([]byte, error) { return b64(model.PackWords(p)), nil }

// PackedLogprobs are logprobs written packed.
type PackedLogprobs []float32

// MarshalText writes the logprobs as base64 of their little-endian words.
func (p PackedLogprobs) MarshalText() ([]byte, error) { return b64(model.PackFloats(p)), nil }

func b64(words []byte) []byte {
	return base64.StdEncoding.AppendEncode(make([]byte, 0, base64.StdEncoding.EncodedLen(len(words))), words)
}

// PackedTurn is a model.Turn whose token arrays are written packed: the
// same fields under the same names.
type PackedTurn struct {
	Action            string         `json:"action"`
	ActionTokens      PackedIDs      `json:"action_tokens,omitempty"`
	ActionLogprobs    PackedLogprobs `json:"action_logprobs,omitempty"`
	Observation       string         `json:"observation"`
	ObservationTokens PackedIDs      `json:"observation_tokens,omitempty"`
	Reward            float64        `json:"reward"`
	Done              bool           `json:"done"`
	PolicyVersion     uint64         `json:"policy_version,omitempty"`
}

// PackTurns are ts to be written packed (sharing their arrays).
func PackTurns(ts []model.Turn) []PackedTurn {
	if ts == nil {
		return nil
	}
	out := make([]PackedTurn, len(ts))
	for i, t := range ts {
		out[i] = PackedTurn{Action: t.Action, ActionTokens: PackedIDs(t.ActionTokens), ActionLogprobs: PackedLogprobs(t.ActionLogprobs),
			Observation: t.Observation, ObservationTokens: PackedIDs(t.ObservationTokens), Reward: t.Reward, Done: t.Done,
			PolicyVersion: t.PolicyVersion}
	}
	return out
}

// PackedPathTurn is a model.PathTurn written packed.
type PackedPathTurn struct {
	PackedTurn
	Node  uint64 `json:"node"`
	Index int    `json:"index"`
}

// Packed returns v with every turn it carries written packed, for the
// replies and requests that carry turns: LeaseResponse, Trajectory,
// PendingResponse, SubmitRequest. Anything else is returned as it is.
func Packed(v any) any {
	switch v := v.(type) {
	case LeaseResponse:
		out := packedLeaseResponse{Leases: make([]packedLeaseGrant, len(v.Leases))}
		for i, g := range v.Leases {
			out.Leases[i] = packedLeaseGrant{LeaseGrant: g, History: PackTurns(g.History)}
		}
		return out
	case Trajectory:
		out := packedTrajectory{Trajectory: v, Turns: make([]PackedPathTurn, len(v.Turns))}
		for i, pt := range v.Turns {
			out.Turns[i] = PackedPathTurn{PackedTurn: PackTurns([]model.Turn{pt.Turn})[0], Node: pt.Node, Index: pt.Index}
		}
		return out
	case PendingResponse:
		pack := func(items []PendingItem) []packedPendingItem {
			out := make([]packedPendingItem, len(items))
			for i, it := range items {
				out[i] = packedPendingItem{PendingItem: it, History: PackTurns(it.History)}
			}
			return out
		}
		return packedPendingResponse{Step: v.Step, Scores: pack(v.Scores), Rewards: pack(v.Rewards)}
	case SubmitRequest:
		out := packedSubmitRequest{Keyed: v.Keyed, Submissions: make([]packedSubmission, len(v.Submissions))}
		for i, s := range v.Submissions {
			out.Submissions[i] = packedSubmission{Submission: s, Turns: PackTurns(s.Turns)}
		}
		return out
	}
	return v
}

// The packed shapes: each the record it embeds with its turns (a field of
// the same JSON name, which hides the embedded one) written packed.
type (
	packedLeaseGrant struct {
		LeaseGrant
		History []PackedTurn `json:"history,omitempty"`
	}
	packedLeaseResponse struct {
		Leases []packedLeaseGrant `json:"leases"`
	}
	packedTrajectory struct {
		Trajectory
		Turns []PackedPathTurn `json:"turns"`
	}
	packedPendingItem struct {
		PendingItem
		History []PackedTurn `json:"history,omitempty"`
	}
	packedPendingResponse struct {
		Step    uint64              `json:"step"`
		Scores  []packedPendingItem `json:"scores"`
		Rewards []packedPendingItem `json:"rewards"`
	}
	packedSubmission struct {
		rollout.Submission
		Turns []PackedTurn `json:"turns,omitempty"`
	}
	packedSubmitRequest struct {
		Keyed
		Submissions []packedSubmission `json:"submissions"`
	}
)

var _ encoding.TextMarshaler = PackedIDs(nil)
