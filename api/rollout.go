package api

import (
	"encoding/json"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
)

// OpenStepRequest is POST /api/v1/runs/{run}/steps: one group per task, each
// with the run's B0 root branches. Asking again with the same tasks returns
// the same groups; other tasks for an opened step are a 409. Tree, when
// given, names the tree config fields the driver relies on (e.g. {"k": 5});
// a run that recorded other values refuses the step with a 409 naming them
// (config_mismatch), instead of growing trees the driver does not expect.
type OpenStepRequest struct {
	Keyed
	Step  uint64          `json:"step"`
	Tasks []rollout.Task  `json:"tasks"`
	Tree  json.RawMessage `json:"tree,omitempty"`
}

// OpenStepResponse answers POST .../steps: the step's groups in task order.
type OpenStepResponse struct {
	Step   uint64        `json:"step"`
	Groups []model.Group `json:"groups"`
}

// LeaseRequest is POST /api/v1/runs/{run}/leases: up to Max branches (0:
// every branch free) of Step (0: any open step) for Worker, held for TTLMs
// milliseconds without a sign of life (0: the server's default of 30 s;
// renew with POST .../leases/renew every 0.4 TTL while a tool runs).
// PolicyVersion is the version of the weights the worker samples with: a
// worker more than the run's max_staleness behind is refused (409 stale).
// History (default true) attaches each branch's full path, so a worker
// that keeps no state can restore its environment and prompt its policy.
// A lease writes nothing, so it carries no client key; asking again hands
// out other branches, never the ones still held.
//
// Have names the paths the worker still holds from its earlier leases
// (node and path length): a grant whose branch is one of them, or a child
// forked from one, carries only the turns past what the worker has
// (LeaseGrant.HistoryOf and HistoryFrom say which), so a worker does not
// receive a path again and again as its branch advances; and a request
// with a max is offered the branches and children of those paths first
// (tree.LeaseRequest.Prefer), so a routed child goes on with the worker
// that grew its parent.
type LeaseRequest struct {
	Worker        string     `json:"worker"`
	Max           int        `json:"max"`
	Step          uint64     `json:"step"`
	TTLMs         int64      `json:"ttl_ms"`
	PolicyVersion uint64     `json:"policy_version,omitempty"`
	History       *bool      `json:"history,omitempty"`
	Have          []HeldPath `json:"have,omitempty"`
}

// HeldPath is a path a worker holds: the first PathLen turns of Node's.
type HeldPath struct {
	Node    uint64 `json:"node"`
	PathLen int    `json:"path_len"`
}

// MaxHave bounds LeaseRequest.Have.
const MaxHave = 4096

// LeasesRequest is POST /api/v1/runs/{run}/leases/renew (a heartbeat: each
// lease Worker still holds lasts its TTL from now) and .../leases/release
// (give them back: their branches may be leased again at once). Neither
// writes to the file.
type LeasesRequest struct {
	Worker string   `json:"worker"`
	Leases []string `json:"leases"`
}

// LeasesResponse answers renew and release, lease by lease.
type LeasesResponse struct {
	Leases []rollout.LeaseState `json:"leases"`
}

// PublishRequest is POST /api/v1/runs/{run}/version: the trainer published
// new weights. Versions only go forward; the current one again is a no-op.
type PublishRequest struct {
	Keyed
	Version uint64 `json:"version"`
}

// RewardsRequest is POST /api/v1/runs/{run}/rewards: deferred outcome
// rewards (or the verifier's errors) for finished branches, from any
// process, applied in one transaction.
type RewardsRequest struct {
	Keyed
	Rewards []rollout.RewardSubmission `json:"rewards"`
}

// ScoresRequest is POST /api/v1/runs/{run}/scores: process scores (or the
// scorer's errors) delivered apart from the turns they score, from any
// process (a remote PRM), applied in one transaction; a group routes when
// its interval's last score arrives.
type ScoresRequest struct {
	Keyed
	Scores []rollout.ScoreSubmission `json:"scores"`
}

// PendingItem is a branch awaiting a remote score or a deferred reward,
// with its path when asked for (?history=1).
type PendingItem struct {
	rollout.PendingWork
	History []model.Turn `json:"history,omitempty"`
}

// PendingResponse answers GET /api/v1/runs/{run}/steps/{step}/pending: the
// work the step waits for from outside its workers.
type PendingResponse struct {
	Step    uint64        `json:"step"`
	Scores  []PendingItem `json:"scores"`
	Rewards []PendingItem `json:"rewards"`
}

// LeaseGrant is one leased branch: the lease and, when asked for, the
// turns of its path so far (root first, inherited prefix included). When
// HistoryOf is set, History holds only the path's turns from index
// HistoryFrom on; the first HistoryFrom are those of the path the worker
// said it holds for node HistoryOf (the branch itself, or the parent it
// forked from).
type LeaseGrant struct {
	rollout.Lease
	History     []model.Turn `json:"history,omitempty"`
	HistoryOf   uint64       `json:"history_of,omitempty"`
	HistoryFrom int          `json:"history_from,omitempty"`
}

// LeaseResponse answers POST .../leases; an empty list means nothing is
// free right now (see the step status for why).
type LeaseResponse struct {
	Leases []LeaseGrant `json:"leases"`
}

// SubmitRequest is POST /api/v1/runs/{run}/submit: workers' turns, scores,
// rewards and failures, each under the lease it was done for, applied in
// one transaction. One refused submission refuses the request and nothing
// is written; the answer says which and why.
type SubmitRequest struct {
	Keyed
	Submissions []rollout.Submission `json:"submissions"`
}

// AbandonRequest is POST /api/v1/runs/{run}/steps/{step}/abandon: give up
// the step's open groups, on record, so a checkpoint can complete it.
type AbandonRequest struct {
	Keyed
	Reason string `json:"reason"`
}
