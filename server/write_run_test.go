package server

import (
	"net/http"
	"strings"
	"testing"
)

// A checkpoint for a step the run has completed already is a 409 with code
// "conflict" — the store's ErrStepCompleted, checked once, in the store —
// and the file stays as it was.
func TestCheckpointForACompletedStepIs409(t *testing.T) {
	e := newEnv(t, Options{})
	createRun(e, "r1", testTree)
	grow(e, "r1", 1)
	e.post("/api/v1/runs/r1/groups/1/close", `{"client_key":"close1"}`, 200, nil)
	e.post("/api/v1/runs/r1/checkpoints", `{"client_key":"ck1","step":1,"uri":"file:///w1"}`, 201, nil)
	for _, step := range []string{"1", "0"} {
		before := e.dump()
		st, h, body := e.call(http.MethodPost, "/api/v1/runs/r1/checkpoints", `{"client_key":"ck-again`+step+`","step":`+step+`,"uri":"file:///w"}`)
		want := map[string]int{"1": http.StatusConflict, "0": http.StatusBadRequest}[step]
		if st != want {
			t.Fatalf("checkpoint for step %s after step 1: %d %s, want %d", step, st, body, want)
		}
		assertErrorBody(t, h, body)
		if step == "1" && (!strings.Contains(string(body), `"code":"conflict"`) || !strings.Contains(string(body), "already completed")) {
			t.Errorf("body %s, want the store's step-completed refusal with code conflict", body)
		}
		if e.dump() != before {
			t.Fatal("the refused checkpoint changed the file")
		}
	}
}
