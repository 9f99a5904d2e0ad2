package api

import "github.com/patrdb/patrdb/model"

// Health is GET /api/v1/health.
type Health struct {
	Status string `json:"status"` // "ok"
	API    string `json:"api"`    // "v1"
	// File identifies the file served (FileID), so a client can check it
	// found the right server without learning where the file lives.
	File string `json:"file"`
	// Path is the file's absolute path, only to a request with the token.
	Path     string `json:"path,omitempty"`
	ReadOnly bool   `json:"read_only"`
}

// RunSummary is GET /api/v1/runs/{run} and one entry of GET /api/v1/runs:
// the run's record and the store's summary of it (its run field is the
// record here, not the id). ?steps=true adds a row per step; ?buckets=true
// adds the bytes per bucket, which walks every page of the run.
type RunSummary struct {
	Run RunJSON `json:"run"`
	model.RunSummary
	// Damaged, in the run list only, says why the run cannot be read (its
	// own endpoints answer 500 "damaged"); every other field is then zero
	// but the run's id.
	Damaged string `json:"damaged,omitempty"`
}

// GroupTree is GET /api/v1/runs/{run}/groups/{group}: the group and every
// node of its tree, roots first, then breadth-first.
type GroupTree struct {
	Group model.Group  `json:"group"`
	Nodes []model.Node `json:"nodes"`
}

// NodeInfo is GET /api/v1/runs/{run}/nodes/{node}.
type NodeInfo struct {
	Node     model.Node `json:"node"`
	Children []uint64   `json:"children"`
}

// Trajectory is GET /api/v1/runs/{run}/nodes/{node}/trajectory: the full
// path root→node. The first Inherited turns come from ancestors (each
// PathTurn names the node that stores it); Segments say how many turns each
// node on the path contributes.
type Trajectory struct {
	Node      model.Node       `json:"node"`
	Inherited int              `json:"inherited"`
	Segments  []model.Segment  `json:"segments"`
	Turns     []model.PathTurn `json:"turns"`
}

// EventPage is GET /api/v1/runs/{run}/events?from=SEQ&limit=N. Next is the
// from of the following page, 0 when this page reached the end.
type EventPage struct {
	Events  []EventJSON `json:"events"`
	Next    uint64      `json:"next"`
	LastSeq uint64      `json:"last_seq"`
}

// RunStats is one run of GET /api/v1/stats.
type RunStats struct {
	Run               string             `json:"run"`
	Groups            int                `json:"groups"`
	Nodes             int                `json:"nodes"`
	Leaves            int                `json:"leaves"`
	TurnsStored       int                `json:"turns_stored"`
	TurnsMaterialised int                `json:"turns_materialised"` // sum of every leaf's path length: what a per-leaf dump would hold
	PrefixSharing     float64            `json:"prefix_sharing"`     // materialised / stored; 0 when nothing is stored
	Events            uint64             `json:"events"`
	Bytes             int64              `json:"bytes"`
	Buckets           []model.BucketSize `json:"buckets"`
	// Damaged, in the list of every run only, says why the run cannot be
	// read; its figures are then zero (as in the run list).
	Damaged string `json:"damaged,omitempty"`
}

// Stats is GET /api/v1/stats (?run=ID for one run).
type Stats struct {
	Path      string     `json:"path"`
	FileBytes int64      `json:"file_bytes"`
	Runs      []RunStats `json:"runs"`
}
