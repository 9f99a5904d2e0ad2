package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/model"
)

func decodeString(t *testing.T, body string, v any) error {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return decodeBody(httptest.NewRecorder(), r, 1<<20, v)
}

// A bad body's 400 names what is wrong and where, as a person fixing the
// request needs it.
func TestDecodeBodyErrors(t *testing.T) {
	cases := []struct{ body, want string }{
		{``, "empty body"},
		{`{"client_key":"x","step":`, "truncated JSON"},
		{`{"client_key":"x","step":3}{"step":4}`, "malformed JSON at byte 27"},
		{`{"client_key":"x" "step":3}`, "malformed JSON at byte 18"},
		{`{"client_key":"x","step":3,"bogus":1}`, `unknown field "bogus"`},
		{`{"submissions":[{"bogus":1}]}`, `unknown field "submissions.0.bogus"`},
		{`{"step":1,"step":2}`, "field step: given twice"},
		{`{"client_key":"x","step":"three"}`, "field step: want uint64, got JSON string"},
		{`[1,2]`, "the body must be a JSON object, got JSON array"},
		{`{"submissions":[{"turns":[{"action_logprobs":["a"]}]}]}`, "field submissions.0.turns.0.action_logprobs"},
		{`{"submissions":[{"turns":[{"action_tokens":"AAE"}]}]}`, "token ids: packed words are not base64"},
	}
	for _, c := range cases {
		var target any = &api.OpenStepRequest{}
		if strings.Contains(c.body, "submissions") {
			target = &api.SubmitRequest{}
		}
		err := decodeString(t, c.body, target)
		if !errors.Is(err, api.ErrBadRequest) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a bad request saying %q", c.body, err, c.want)
		}
	}
}

// A submit reads the same turns from arrays of numbers and from packed
// words, and field names in any case, as encoding/json read them.
func TestDecodeBodyBothEncodings(t *testing.T) {
	arrays := `{"client_key":"k","submissions":[{"lease":"l","worker":"w","node":3,"from":1,"turns":[` +
		`{"action":"a","action_tokens":[1,258],"action_logprobs":[-0.5,-2],"observation":"o","observation_tokens":[7],"reward":1,"done":true}]}]}`
	packed := `{"client_key":"k","submissions":[{"lease":"l","worker":"w","node":3,"from":1,"turns":[` +
		`{"action":"a","action_tokens":"AQAAAAIBAAA=","action_logprobs":"AAAAvwAAAMA=","observation":"o","observation_tokens":"BwAAAA==","reward":1,"done":true}]}]}`
	var a, p api.SubmitRequest
	if err := decodeString(t, arrays, &a); err != nil {
		t.Fatal(err)
	}
	if err := decodeString(t, packed, &p); err != nil {
		t.Fatal(err)
	}
	want := model.Turn{Action: "a", ActionTokens: model.TokenIDs{1, 258}, ActionLogprobs: model.Logprobs{-0.5, -2}, Observation: "o",
		ObservationTokens: model.TokenIDs{7}, Reward: 1, Done: true}
	for _, got := range []api.SubmitRequest{a, p} {
		if got.ClientKey != "k" || len(got.Submissions) != 1 || got.Submissions[0].Node != 3 || got.Submissions[0].From != 1 ||
			!reflect.DeepEqual(got.Submissions[0].Turns, []model.Turn{want}) {
			t.Errorf("decoded %+v, want one submission of node 3 from 1 with %+v", got, want)
		}
	}
	var k api.Keyed
	if err := decodeString(t, `{"Client_Key":"k"}`, &k); err != nil || k.ClientKey != "k" {
		t.Errorf("a name in another case: %v, %+v", err, k)
	}
}

// BenchmarkDecodeSubmit: one submit of 40 LLM-shaped turns (llmSubmit),
// its token arrays packed and as numbers, read by decodeBody and by
// encoding/json's Decoder as decodeBody read it before (the anchor).
//
//	go test ./server -run '^$' -bench DecodeSubmit -count 5
func BenchmarkDecodeSubmit(b *testing.B) {
	req := llmSubmit()
	arrays, err := json.Marshal(req)
	if err != nil {
		b.Fatal(err)
	}
	packed, err := json.Marshal(api.Packed(*req))
	if err != nil {
		b.Fatal(err)
	}
	frame, err := api.SubmitFrame(*req)
	if err != nil {
		b.Fatal(err)
	}
	for _, body := range []struct {
		name, ct string
		data     []byte
	}{{"packed", "application/json", packed}, {"arrays", "application/json", arrays}, {"frame", api.FrameType, frame}} {
		b.Run(body.name+"/decodeBody", func(b *testing.B) {
			b.SetBytes(int64(len(body.data)))
			w := httptest.NewRecorder()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body.data))
				r.Header.Set("Content-Type", body.ct)
				var got api.SubmitRequest
				if err := decodeBody(w, r, 1<<30, &got); err != nil {
					b.Fatal(err)
				}
			}
		})
		if body.ct != "application/json" {
			continue
		}
		b.Run(body.name+"/encoding-json", func(b *testing.B) {
			b.SetBytes(int64(len(body.data)))
			for b.Loop() {
				data, err := io.ReadAll(bytes.NewReader(body.data))
				if err != nil {
					b.Fatal(err)
				}
				dec := json.NewDecoder(bytes.NewReader(data))
				dec.DisallowUnknownFields()
				var got api.SubmitRequest
				if err := dec.Decode(&got); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
