package api

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"unicode/utf8"
	"unsafe"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
)

// The frame: a binary body for the rollout wire's two heavy messages, a
// submit (SubmitRequest) and a lease answer (LeaseResponse), where the
// packed JSON still costs both ends a base64 pass over every token array
// and an escaping pass over every text. A frame is the message's JSON with
// each turn's five bulk members left empty, followed by those members as
// raw bytes (docs/json.md):
//
//	u32 n          little-endian length of the JSON part, a multiple of 4
//	n bytes        the JSON object, its turns without action, action_tokens,
//	               action_logprobs, observation and observation_tokens,
//	               padded with spaces
//	per turn       in document order (submissions[i].turns[j], or
//	               leases[i].history[j]): each of those five members as a
//	               u32 byte length and the bytes — the texts in UTF-8, the
//	               arrays as little-endian 4-byte words, as packed — then
//	               zero bytes up to a multiple of 4
//
// Every length and array starts 4-byte aligned in the frame, so a reader
// on a little-endian host takes the arrays (and texts) as views of the
// body it read, without a copy.
//
// A request sends one with Content-Type FrameType (submits); a lease
// request asks for one with Accept: FrameType. FrameSince is the API
// version that speaks it; JSON stays what every endpoint reads and writes
// by default.

// FrameType is the media type of a frame.
const FrameType = "application/x-patrdb-frame"

// FrameSince is the first API version ("<major>.<minor>") that reads and
// writes frames.
const FrameSince = "1.7"

// SubmitFrame is req as a frame.
func SubmitFrame(req SubmitRequest) ([]byte, error) {
	bare := req
	bare.Submissions = make([]rollout.Submission, len(req.Submissions))
	lists := make([][]model.Turn, len(req.Submissions))
	for i, s := range req.Submissions {
		lists[i] = s.Turns
		s.Turns = bareTurns(s.Turns)
		bare.Submissions[i] = s
	}
	return encodeFrame(&bare, lists)
}

// LeaseFrame is resp as a frame.
func LeaseFrame(resp LeaseResponse) ([]byte, error) {
	bare := LeaseResponse{Leases: make([]LeaseGrant, len(resp.Leases))}
	lists := make([][]model.Turn, len(resp.Leases))
	for i, g := range resp.Leases {
		lists[i] = g.History
		g.History = bareTurns(g.History)
		bare.Leases[i] = g
	}
	return encodeFrame(&bare, lists)
}

// ReadSubmitFrame reads a submit frame; unmarshal reads its JSON part (the
// caller's strictness). The turns' texts and arrays share body's memory
// (model.WordsView): body must not change while they are in use.
func ReadSubmitFrame(body []byte, unmarshal func([]byte, any) error) (SubmitRequest, error) {
	var req SubmitRequest
	err := readFrame(body, unmarshal, &req, func(fill func([]model.Turn, string, int) error) error {
		for i := range req.Submissions {
			if err := fill(req.Submissions[i].Turns, "submissions[%d].turns", i); err != nil {
				return err
			}
		}
		return nil
	})
	return req, err
}

// ReadLeaseFrame reads a lease answer's frame, its turns sharing body's
// memory as ReadSubmitFrame's do.
func ReadLeaseFrame(body []byte, unmarshal func([]byte, any) error) (LeaseResponse, error) {
	var resp LeaseResponse
	err := readFrame(body, unmarshal, &resp, func(fill func([]model.Turn, string, int) error) error {
		for i := range resp.Leases {
			if err := fill(resp.Leases[i].History, "leases[%d].history", i); err != nil {
				return err
			}
		}
		return nil
	})
	return resp, err
}

// readFrame reads the JSON part into head, then has each list of head's
// turns filled in document order, each named by a format and its index.
func readFrame(body []byte, unmarshal func([]byte, any) error, head any, lists func(fill func([]model.Turn, string, int) error) error) error {
	js, bulk, err := splitFrame(body)
	if err != nil {
		return err
	}
	if err := unmarshal(js, head); err != nil {
		return err
	}
	fr := frameReader{bulk: bulk, at: len(body) - len(bulk)}
	if err := lists(fr.fill); err != nil {
		return err
	}
	return fr.end()
}

// bareTurns are copies of ts without their bulk members.
func bareTurns(ts []model.Turn) []model.Turn {
	if ts == nil {
		return nil
	}
	out := make([]model.Turn, len(ts))
	for i, t := range ts {
		out[i] = model.Turn{Reward: t.Reward, Done: t.Done, PolicyVersion: t.PolicyVersion}
	}
	return out
}

func encodeFrame(head any, lists [][]model.Turn) ([]byte, error) {
	js, err := json.Marshal(head)
	if err != nil {
		return nil, err
	}
	n := aligned(len(js))
	size := 4 + n
	for _, ts := range lists {
		for i := range ts {
			t := &ts[i]
			size += 32 + len(t.Action) + len(t.Observation) + 4*(len(t.ActionTokens)+len(t.ActionLogprobs)+len(t.ObservationTokens))
		}
	}
	b := make([]byte, 0, size)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	b = append(b, js...)
	for len(b) < 4+n {
		b = append(b, ' ')
	}
	text := func(b []byte, s string) []byte {
		b = append(binary.LittleEndian.AppendUint32(b, uint32(len(s))), s...)
		return append(b, make([]byte, aligned(len(s))-len(s))...)
	}
	for _, ts := range lists {
		for i := range ts {
			t := &ts[i]
			b = text(b, t.Action)
			b = model.AppendWords(binary.LittleEndian.AppendUint32(b, uint32(4*len(t.ActionTokens))), t.ActionTokens)
			b = model.AppendFloats(binary.LittleEndian.AppendUint32(b, uint32(4*len(t.ActionLogprobs))), t.ActionLogprobs)
			b = text(b, t.Observation)
			b = model.AppendWords(binary.LittleEndian.AppendUint32(b, uint32(4*len(t.ObservationTokens))), t.ObservationTokens)
		}
	}
	return b, nil
}

// aligned is n rounded up to a multiple of 4.
func aligned(n int) int { return (n + 3) &^ 3 }

func splitFrame(body []byte) (head, bulk []byte, err error) {
	if len(body) < 4 {
		return nil, nil, fmt.Errorf("%w: %d bytes, want at least the 4 of its JSON part's length", ErrFrame, len(body))
	}
	n := binary.LittleEndian.Uint32(body)
	if uint64(n) > uint64(len(body)-4) {
		return nil, nil, fmt.Errorf("%w: its JSON part is %d bytes, the frame holds %d after the length", ErrFrame, n, len(body)-4)
	}
	if n%4 != 0 {
		return nil, nil, fmt.Errorf("%w: its JSON part is %d bytes, not a multiple of 4 (pad it with spaces)", ErrFrame, n)
	}
	return body[4 : 4+n], body[4+n:], nil
}

// frameReader reads the bulk part of a frame; at is the offset of bulk in
// the frame, for the errors.
type frameReader struct {
	bulk []byte
	at   int
}

// fill reads the bulk members of ts, which the JSON part must have left
// empty: a frame carries a turn's text and tokens in one place only.
func (fr *frameReader) fill(ts []model.Turn, format string, n int) error {
	where := func() string { return fmt.Sprintf(format, n) }
	for i := range ts {
		t := &ts[i]
		if t.Action != "" || t.Observation != "" || t.ActionTokens != nil || t.ActionLogprobs != nil || t.ObservationTokens != nil {
			return fmt.Errorf("%w: %s[%d] carries its text or tokens in the JSON part; a frame carries them after it", ErrFrame, where(), i)
		}
		var b [5][]byte
		for k := range b {
			var err error
			if b[k], err = fr.next(); err != nil {
				return fmt.Errorf("%w: %s[%d].%s %v", ErrFrame, where(), i, bulkMembers[k], err)
			}
			if k == 0 || k == 3 {
				if !utf8.Valid(b[k]) {
					return fmt.Errorf("%w: %s[%d].%s is not valid UTF-8: text must be UTF-8", ErrFrame, where(), i, bulkMembers[k])
				}
			} else if len(b[k])%4 != 0 {
				return fmt.Errorf("%w: %s[%d].%s is %d bytes, not a whole number of 4-byte words", ErrFrame, where(), i, bulkMembers[k], len(b[k]))
			}
		}
		t.Action, t.Observation = view(b[0]), view(b[3])
		t.ActionTokens, _ = model.WordsView(b[1])
		t.ActionLogprobs, _ = model.FloatsView(b[2])
		t.ObservationTokens, _ = model.WordsView(b[4])
	}
	return nil
}

// bulkMembers are a turn's members in a frame's bulk part, in order.
var bulkMembers = [5]string{"action", "action_tokens", "action_logprobs", "observation", "observation_tokens"}

// view is b as a string sharing its memory.
func view(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// next is the next length-prefixed member, past its padding.
func (fr *frameReader) next() ([]byte, error) {
	if len(fr.bulk) < 4 {
		return nil, fmt.Errorf("is missing: the frame ends at byte %d", fr.at+len(fr.bulk))
	}
	n := uint64(binary.LittleEndian.Uint32(fr.bulk))
	padded := (n + 3) &^ 3
	if padded > uint64(len(fr.bulk)-4) {
		return nil, fmt.Errorf("at byte %d is %d bytes long with its padding, the frame holds %d after its length", fr.at, padded, len(fr.bulk)-4)
	}
	b := fr.bulk[4 : 4+n]
	for _, p := range fr.bulk[4+n : 4+padded] {
		if p != 0 {
			return nil, fmt.Errorf("at byte %d is padded with other bytes than zeros", fr.at)
		}
	}
	fr.bulk, fr.at = fr.bulk[4+padded:], fr.at+4+int(padded)
	return b, nil
}

// end checks that every byte of the frame was read.
func (fr *frameReader) end() error {
	if len(fr.bulk) > 0 {
		return fmt.Errorf("%w: %d bytes after the last turn's members (byte %d on): more turns than its JSON part lists", ErrFrame, len(fr.bulk), fr.at)
	}
	return nil
}
