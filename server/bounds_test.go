package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// Inputs outside their documented ranges are refused with a 400 naming
// the range, and the file stays byte for byte as it was: run ids "." and
// ".." (created, then unreachable by URL), steps past model.MaxStep (a
// checkpoint at 2^64-1 left the run no next step), and a lease TTL past
// a day (2^63-1 ms overflowed into the default TTL).
func TestOutOfRangeInputsWriteNothing(t *testing.T) {
	e := newEnv(t, Options{})
	createRun(e, "r1", testTree)
	huge := fmt.Sprint(uint64(1<<64 - 1))
	past := fmt.Sprint(uint64(model.MaxStep) + 1)
	for _, c := range []struct {
		name, path, body, says string
	}{
		{"run id .", "/api/v1/runs", `{"client_key":"x","id":"."}`, store.RunIDRule},
		{"run id ..", "/api/v1/runs", `{"client_key":"x","id":".."}`, store.RunIDRule},
		{"run id .. in the path", "/api/v1/runs/%2E%2E/status", `{"client_key":"x","status":"finished"}`, store.RunIDRule},
		{"checkpoint at step 2^64-1", "/api/v1/runs/r1/checkpoints", `{"client_key":"x","step":` + huge + `,"uri":"u"}`, "steps run from 1 to"},
		{"checkpoint past MaxStep", "/api/v1/runs/r1/checkpoints", `{"client_key":"x","step":` + past + `,"uri":"u"}`, "steps run from 1 to"},
		{"step 2^64-1", "/api/v1/runs/r1/steps", `{"client_key":"x","step":` + huge + `,"tasks":[{"id":"t"}]}`, "steps run from 1 to"},
		{"lease ttl 2^63-1 ms", "/api/v1/runs/r1/leases", `{"worker":"w","ttl_ms":9223372036854775807}`, "ttl_ms"},
		{"lease ttl a day and a millisecond", "/api/v1/runs/r1/leases", `{"worker":"w","ttl_ms":86400001}`, "ttl_ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			beforeSum, beforeDump := e.fileSum(), e.dump()
			st, h, body := e.callCT(http.MethodPost, c.path, "application/json", c.body)
			if st != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", st, body)
			}
			assertErrorBody(t, h, body)
			if !strings.Contains(string(body), c.says) {
				t.Errorf("%s does not say %q", body, c.says)
			}
			if e.fileSum() != beforeSum || e.dump() != beforeDump {
				t.Fatal("the refused request changed the file")
			}
		})
	}
	// The bounds themselves are accepted.
	e.post("/api/v1/runs/r1/leases", `{"worker":"w","ttl_ms":86400000}`, 200, nil)
	e.post("/api/v1/runs", `{"client_key":"dots","id":"..."}`, 201, nil)
}
