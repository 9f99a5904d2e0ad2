package rollout

// StepStatus is what a driver waits on. A step is finished when Open is 0;
// Done lists the open groups with no active branch and no leaf awaiting its
// reward (Close them); Active counts the branches still to grow, Leased
// those a worker of this coordinator holds right now, AwaitingScores the
// active ones waiting for a remote process score, AwaitingRewards the
// finished ones waiting for their deferred outcome reward. PolicyVersion
// is the run's current policy version.
type StepStatus struct {
	Step            uint64   `json:"step"`
	Groups          int      `json:"groups"`
	Open            int      `json:"open"`
	Closed          int      `json:"closed"`
	Done            []uint64 `json:"done"`
	Active          int      `json:"active"`
	Leased          int      `json:"leased"`
	AwaitingScores  int      `json:"awaiting_scores"`
	AwaitingRewards int      `json:"awaiting_rewards"`
	PolicyVersion   uint64   `json:"policy_version"`
}

// Pending is the work a step waits for from outside its workers: branches
// whose interval awaits a remote process score, and finished branches
// whose outcome reward is deferred. A remote scorer or verifier lists it,
// reads each branch's trajectory, and submits scores and rewards.
type Pending struct {
	Step    uint64        `json:"step"`
	Scores  []PendingWork `json:"scores"`
	Rewards []PendingWork `json:"rewards"`
}

// PendingWork is one branch awaiting a score or a reward: SinceAt is when
// the coordinator first saw it waiting (unix nanoseconds) and DueAt when
// it fails for want of one.
type PendingWork struct {
	Node     uint64 `json:"node"`
	Group    uint64 `json:"group"`
	Step     uint64 `json:"step"`
	Interval int    `json:"interval"`
	Attempt  int    `json:"attempt"`
	PathLen  int    `json:"path_len"`
	Task     Task   `json:"task"`
	SinceAt  int64  `json:"since_at"`
	DueAt    int64  `json:"due_at"`
}
