package model

// Checkpoint is the trainer's state after a step: small state inline, or a
// reference to external weights (model weights belong on a file system).
type Checkpoint struct {
	_msgpack  struct{}          `msgpack:",as_array"`
	Step      uint64            `json:"step"`
	Inline    []byte            `json:"inline,omitempty"`
	URI       string            `json:"uri,omitempty"`
	Hash      string            `json:"hash,omitempty"`
	Meta      map[string]string `json:"meta,omitempty"`
	CreatedAt int64             `json:"created_at"`
}
