package api_test

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
)

var frameTurns = []model.Turn{
	{Action: "a ✓ \"quoted\"\n", ActionTokens: model.TokenIDs{0, 1, 1<<32 - 1}, ActionLogprobs: model.Logprobs{0, -0.5, -1e-30},
		Observation: "o", ObservationTokens: model.TokenIDs{7, 65536}, Reward: 0.25, PolicyVersion: 3},
	{Action: "", Observation: "", Done: true}, // no text, no tokens
}

// A submit and a lease answer read back from their frames are the
// messages written, every member of every turn included.
func TestFrameRoundTrip(t *testing.T) {
	score := 0.5
	req := api.SubmitRequest{Keyed: api.Keyed{ClientKey: "k"}, Submissions: []rollout.Submission{
		{Lease: "l1", Worker: "w", Node: 3, From: 2, Turns: frameTurns, EnvState: []byte{1, 2}, Score: &score},
		{Lease: "l2", Worker: "w", Node: 4, Error: "env died"},
		{Lease: "l3", Worker: "w", Node: 5, Turns: frameTurns[:1]},
	}}
	b, err := api.SubmitFrame(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := api.ReadSubmitFrame(b, json.Unmarshal)
	if err != nil || !reflect.DeepEqual(got, req) {
		t.Fatalf("submit read back as %+v, %v; want %+v", got, err, req)
	}
	resp := api.LeaseResponse{Leases: []api.LeaseGrant{
		{Lease: rollout.Lease{ID: "l1", Node: 3, PathLen: 2}, History: frameTurns},
		{Lease: rollout.Lease{ID: "l2", Node: 9}, HistoryOf: 3, HistoryFrom: 2},
	}}
	if b, err = api.LeaseFrame(resp); err != nil {
		t.Fatal(err)
	}
	gotLease, err := api.ReadLeaseFrame(b, json.Unmarshal)
	if err != nil || !reflect.DeepEqual(gotLease, resp) {
		t.Fatalf("lease answer read back as %+v, %v; want %+v", gotLease, err, resp)
	}
	// The JSON part is the message's JSON without the turns' bulk: the
	// vocabulary of the JSON body, readable on its own.
	head := b[4 : 4+binary.LittleEndian.Uint32(b)]
	if strings.Contains(string(head), "quoted") || !strings.Contains(string(head), `"history_of":3`) {
		t.Errorf("JSON part %s", head)
	}
}

// A frame that does not parse is an ErrFrame (and so an ErrBadRequest)
// that says what is wrong, never a partial message.
func TestFrameRefusals(t *testing.T) {
	head := []byte(`{"client_key":"k","submissions":[{"lease":"l","node":3,"turns":[{"reward":0,"done":false}]}]}`)
	// frame writes head padded with spaces, then each member with its
	// length and zero padding, as SubmitFrame does.
	frame := func(head []byte, members ...[]byte) []byte {
		for len(head)%4 != 0 {
			head = append(head, ' ')
		}
		b := append(binary.LittleEndian.AppendUint32(nil, uint32(len(head))), head...)
		for _, m := range members {
			b = append(binary.LittleEndian.AppendUint32(b, uint32(len(m))), m...)
			for len(b)%4 != 0 {
				b = append(b, 0)
			}
		}
		return b
	}
	word := []byte{1, 0, 0, 0}
	good := frame(head, []byte("a"), word, nil, []byte("o"), nil)
	if req, err := api.ReadSubmitFrame(good, json.Unmarshal); err != nil || req.Submissions[0].Turns[0].ActionTokens[0] != 1 {
		t.Fatalf("the frame the refusals start from: %+v, %v", req, err)
	}
	unaligned := append(binary.LittleEndian.AppendUint32(nil, uint32(len(head)+1)), append(append([]byte(nil), head...), ' ')...)
	if (len(head)+1)%4 == 0 {
		unaligned = append(binary.LittleEndian.AppendUint32(nil, uint32(len(head)+2)), append(append([]byte(nil), head...), ' ', ' ')...)
	}
	inJSON := []byte(`{"client_key":"k","submissions":[{"lease":"l","node":3,"turns":[{"action":"x"}]}]}`)
	long := append(append([]byte(nil), good[:4+aligned(len(head))]...), 0, 0, 0, 0x80)
	padded := frame(head, []byte("a"), word, nil, []byte("o"), nil)
	padded[4+aligned(len(head))+5] = 'x' // the first pad byte after "a"
	for _, c := range []struct {
		name, want string
		body       []byte
	}{
		{"shorter than a length", "at least the 4", good[:3]},
		{"JSON part longer than the frame", "JSON part is", append(binary.LittleEndian.AppendUint32(nil, 1000), head...)},
		{"JSON part not a multiple of 4", "not a multiple of 4", unaligned},
		{"cut short", "submissions[0].turns[0].observation_tokens is missing", good[:len(good)-4]},
		{"a byte too many", "1 bytes after the last turn", append(append([]byte(nil), good...), 0)},
		{"a member longer than the frame", "submissions[0].turns[0].action at byte", long},
		{"bulk in the JSON part", "carries its text or tokens in the JSON part", frame(inJSON)},
		{"invalid UTF-8", "action is not valid UTF-8", frame(head, []byte{0xff}, nil, nil, nil, nil)},
		{"tokens not whole words", "action_tokens is 3 bytes", frame(head, nil, []byte{1, 2, 3}, nil, nil, nil)},
		{"padding not zeros", "padded with other bytes than zeros", padded},
	} {
		_, err := api.ReadSubmitFrame(c.body, json.Unmarshal)
		if !errors.Is(err, api.ErrFrame) || !errors.Is(err, api.ErrBadRequest) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an ErrFrame saying %q", c.name, err, c.want)
		}
	}
}

func aligned(n int) int { return (n + 3) &^ 3 }
