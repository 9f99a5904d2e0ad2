package model

// Scalars are a trainer's named figures of one step.
type Scalars struct {
	_msgpack  struct{}           `msgpack:",as_array"`
	Step      uint64             `json:"step"`
	Values    map[string]float64 `json:"values"`
	UpdatedAt int64              `json:"updated_at"` // unix nanoseconds of the last write
}
