package model

// GroupStatus is open while the tree grows and closed once its advantages
// are written.
type GroupStatus string

const (
	GroupOpen   GroupStatus = "open"
	GroupClosed GroupStatus = "closed"
)

// Group is one task's rollout tree within a step.
type Group struct {
	_msgpack struct{}          `msgpack:",as_array"`
	ID       uint64            `json:"id"`
	Step     uint64            `json:"step"`
	Task     string            `json:"task"`
	Prompt   string            `json:"prompt"`
	Gold     string            `json:"gold,omitempty"` // reference answer, for outcome measures such as token F1
	Roots    []uint64          `json:"roots"`
	Status   GroupStatus       `json:"status"`
	Interval int               `json:"interval"` // intervals fully committed; a resume continues from here
	Meta     map[string]string `json:"meta,omitempty"`
	// PromptTokens are the prompt's token ids, the start of every leaf's
	// training sequence. Stored packed like turn tokens (format 2 on).
	PromptTokens TokenIDs `json:"prompt_tokens,omitempty"`
}
