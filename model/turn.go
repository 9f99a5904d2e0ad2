package model

// Turn is one interaction turn. Token ids and logprobs are stored packed
// little-endian, not as msgpack arrays.
type Turn struct {
	Action            string   `json:"action"`
	ActionTokens      TokenIDs `json:"action_tokens,omitempty"`
	ActionLogprobs    Logprobs `json:"action_logprobs,omitempty"`
	Observation       string   `json:"observation"`
	ObservationTokens TokenIDs `json:"observation_tokens,omitempty"`
	Reward            float64  `json:"reward"`
	Done              bool     `json:"done"`
	// PolicyVersion is the version of the policy weights that sampled the
	// action (the trainer's own counter, e.g. its optimizer step); 0 when
	// the writer did not say. Staleness is current version − this.
	PolicyVersion uint64 `json:"policy_version,omitempty"`
}

// PathTurn is a turn placed in a materialised trajectory.
type PathTurn struct {
	Turn
	Node  uint64 `json:"node"`  // the node that stores the turn
	Index int    `json:"index"` // the turn's index among that node's own turns
}

// TokenIDs are token ids inside a reflection-encoded record (a group's
// prompt). They are stored as one bin value of little-endian uint32s, the
// packing turns use, not as a msgpack array of ints: a prompt of a few
// thousand tokens is one copy on the way in and out.
type TokenIDs []uint32

// Segment is one node's contribution to a trajectory: its first Count own
// turns.
type Segment struct {
	Node  uint64 `json:"node"`
	Count int    `json:"count"`
}
