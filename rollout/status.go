package rollout

// StepStatus is what a driver waits on. A step is finished when Open is 0;
// Done lists the open groups with no active branch left (Close them);
// Active counts the branches still to grow and Leased those a worker of
// this coordinator holds right now.
type StepStatus struct {
	Step   uint64   `json:"step"`
	Groups int      `json:"groups"`
	Open   int      `json:"open"`
	Closed int      `json:"closed"`
	Done   []uint64 `json:"done"`
	Active int      `json:"active"`
	Leased int      `json:"leased"`
}
