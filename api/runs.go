package api

import (
	"encoding/json"

	"github.com/patrdb/patrdb/model"
)

// CreateRunRequest is POST /api/v1/runs. Tree and Rubric overlay the
// defaults (tree.DefaultConfig, rubricpool.DefaultConfig) field by field.
type CreateRunRequest struct {
	Keyed
	ID     string            `json:"id"`
	Tree   json.RawMessage   `json:"tree,omitempty"`
	Rubric json.RawMessage   `json:"rubric,omitempty"`
	Meta   map[string]string `json:"meta,omitempty"`
}

// CreateRunResponse answers POST /api/v1/runs (201).
type CreateRunResponse struct {
	Run RunJSON `json:"run"`
}

// RunStatusRequest is POST /api/v1/runs/{run}/status.
type RunStatusRequest struct {
	Keyed
	Status model.RunStatus `json:"status"`
}

// CheckpointRequest is POST /api/v1/runs/{run}/checkpoints: the trainer's
// state after Step, which also marks the step complete. Inline is base64 in
// JSON (small state only); model weights go by URI and Hash.
type CheckpointRequest struct {
	Keyed
	Step   uint64            `json:"step"`
	Inline []byte            `json:"inline,omitempty"`
	URI    string            `json:"uri,omitempty"`
	Hash   string            `json:"hash,omitempty"`
	Meta   map[string]string `json:"meta,omitempty"`
}

// CheckpointResponse answers POST /api/v1/runs/{run}/checkpoints (201).
type CheckpointResponse struct {
	Checkpoint model.Checkpoint `json:"checkpoint"`
	Run        RunJSON          `json:"run"`
}
