package rollout

// Lease hands one branch's current interval to one worker: sample Turns
// turns from From (fewer if the episode ends), then, when Score is set,
// score the branch, and submit. A branch whose K turns are already stored
// comes back with Turns 0 and Score set (its worker died before scoring).
type Lease struct {
	ID        string  `json:"id"`
	Worker    string  `json:"worker"`
	Node      uint64  `json:"node"`
	Group     uint64  `json:"group"`
	Step      uint64  `json:"step"`
	Interval  int     `json:"interval"`
	Attempt   int     `json:"attempt"`
	From      int     `json:"from"`     // own-turn index of the first turn to submit (the node's stored turns)
	PathLen   int     `json:"path_len"` // turns on the path from the root so far
	Turns     int     `json:"turns"`    // turns to sample in this interval (K minus those stored, capped by MaxTurns)
	Score     bool    `json:"score"`    // a process score is due after them, unless the episode ends
	Key       TurnKey `json:"key"`      // the TurnKey of the first turn; Index and Path advance by one per turn
	Task      Task    `json:"task"`
	EnvState  []byte  `json:"env_state,omitempty"` // the node's env-state reference (Env.Restore)
	ExpiresAt int64   `json:"expires_at"`          // unix nanoseconds
}
