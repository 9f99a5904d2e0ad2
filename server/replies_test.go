package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
)

const submitPattern = "POST /api/v1/runs/{run}/submit"

// A submit's fingerprint covers every field of every turn, and which
// submission each turn belongs to: a request that differs in any of them
// is another request (a 409 under a used key), not a retry. A field added
// to the turn fails this test until the fingerprint writes it.
func TestSubmitFingerprintCoversEveryTurnField(t *testing.T) {
	base := func() *api.SubmitRequest {
		return &api.SubmitRequest{Submissions: []rollout.Submission{
			{Lease: "l1", Worker: "w", Node: 1, Turns: make([]model.Turn, 2)},
			{Lease: "l2", Worker: "w", Node: 2, Turns: make([]model.Turn, 1)},
		}}
	}
	fp := func(req *api.SubmitRequest) []byte {
		b, err := submitFingerprint(submitPattern, "/api/v1/runs/r/submit", req)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	zero := fp(base())
	seen := map[string]bool{string(zero): true}
	turnType := reflect.TypeOf(base().Submissions[0].Turns).Elem()
	for i := range turnType.NumField() {
		f := turnType.Field(i)
		req := base()
		v := reflect.ValueOf(&req.Submissions[0].Turns[1]).Elem().Field(i)
		switch f.Type.Kind() {
		case reflect.String:
			v.SetString("x")
		case reflect.Float32, reflect.Float64:
			v.SetFloat(0.5)
		case reflect.Uint32, reflect.Uint64:
			v.SetUint(1)
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Slice:
			v.Set(reflect.MakeSlice(f.Type, 1, 1)) // one zero word: only the length differs
		default:
			t.Fatalf("turn field %s (%s): the fingerprint does not know this kind", f.Name, f.Type)
		}
		got := fp(req)
		if seen[string(got)] {
			t.Errorf("turn field %s: changing it leaves the fingerprint as it was", f.Name)
		}
		seen[string(got)] = true
	}
	// The same three turns, two in the second submission.
	moved := base()
	moved.Submissions[0].Turns, moved.Submissions[1].Turns = moved.Submissions[0].Turns[:1], make([]model.Turn, 2)
	if bytes.Equal(fp(moved), zero) {
		t.Error("a turn moved to the next submission leaves the fingerprint as it was")
	}
	other := base()
	other.Submissions[1].Node = 3
	if bytes.Equal(fp(other), zero) {
		t.Error("another node leaves the fingerprint as it was")
	}
}

// A submit retried with its token arrays written the other way (packed
// or as numbers) is the same request: the stored answer, byte for byte,
// and nothing written. The same key with one logprob changed is a 409.
func TestSubmitRetryInTheOtherEncoding(t *testing.T) {
	e, lease, node := leasedRoot(t)
	req := api.SubmitRequest{Keyed: api.Keyed{ClientKey: "k"}, Submissions: []rollout.Submission{{Lease: lease, Worker: "test", Node: node,
		Turns: []model.Turn{{Action: "a", ActionTokens: model.TokenIDs{1, 2}, ActionLogprobs: model.Logprobs{-0.25, -1.5},
			Observation: "o", ObservationTokens: model.TokenIDs{3}}}}}}
	arrays, _ := json.Marshal(req)
	packed, _ := json.Marshal(api.Packed(req))
	if bytes.Equal(arrays, packed) {
		t.Fatal("the two encodings are the same bytes: the test tests nothing")
	}
	st, _, first := e.call(http.MethodPost, "/api/v1/runs/r1/submit", arrays)
	if st != http.StatusOK {
		t.Fatalf("submit: %d %s", st, first)
	}
	before := e.fileSum()
	st, h, again := e.call(http.MethodPost, "/api/v1/runs/r1/submit", packed)
	if st != http.StatusOK || !bytes.Equal(first, again) || h.Get("Idempotent-Replay") != "true" || e.fileSum() != before {
		t.Fatalf("packed retry: %d %s (replay %q), first %s", st, again, h.Get("Idempotent-Replay"), first)
	}
	req.Submissions[0].Turns[0].ActionLogprobs[1] = -1.25
	changed, _ := json.Marshal(api.Packed(req))
	if st, _, body := e.call(http.MethodPost, "/api/v1/runs/r1/submit", changed); st != http.StatusConflict || e.fileSum() != before {
		t.Fatalf("the key reused for another logprob: %d %s", st, body)
	}
}

// A reply stored by a server that fingerprinted a submit whole (before
// submitFingerprint) still answers its retry after the upgrade.
func TestSubmitRetryOfAReplyFromBefore(t *testing.T) {
	e, lease, node := leasedRoot(t)
	req := api.SubmitRequest{Submissions: []rollout.Submission{{Lease: lease, Worker: "test", Node: node,
		Turns: []model.Turn{{Action: "a", ActionTokens: model.TokenIDs{1}, Observation: "o"}}}}}
	path := "/api/v1/runs/r1/submit"
	old, err := fingerprint(submitPattern, path, &req)
	if err != nil {
		t.Fatal(err)
	}
	stored := []byte(`{"answered":"before the upgrade"}` + "\n")
	if err := e.db.Update(func(tx *store.Tx) error {
		r, err := tx.Run("r1")
		if err != nil {
			return err
		}
		_, err = r.PutReply(store.Reply{Key: "k", Op: submitPattern, Fingerprint: old, Status: http.StatusOK, Body: stored})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	before := e.fileSum()
	req.ClientKey = "k"
	st, h, got := e.call(http.MethodPost, path, req)
	if st != http.StatusOK || !bytes.Equal(got, stored) || h.Get("Idempotent-Replay") != "true" || e.fileSum() != before {
		t.Fatalf("retry of a reply stored before: %d %s (replay %q)", st, got, h.Get("Idempotent-Replay"))
	}
	req.Submissions[0].Turns[0].Action = "b"
	if st, _, body := e.call(http.MethodPost, path, req); st != http.StatusConflict || e.fileSum() != before {
		t.Fatalf("another request under that key: %d %s", st, body)
	}
}

// leasedRoot is a server with run r1 at step 1 and one root leased to
// worker "test".
func leasedRoot(t *testing.T) (e *testEnv, lease string, node uint64) {
	e = newEnv(t, Options{})
	createRun(e, "r1", testTree)
	og := openStep(e, "r1", 1)
	node = og.Roots[0]
	return e, leaseAll(e, "r1", 1)[node].ID, node
}
