package api

import "github.com/patrdb/patrdb/model"

// ScalarsRequest is POST /api/v1/runs/{run}/scalars: a trainer's own
// figures of one step (loss, kl, entropy, grad norm, learning rate ...),
// merged into what the step already holds (store.RunTx.PutScalars).
type ScalarsRequest struct {
	Keyed
	Step   uint64             `json:"step"`
	Values map[string]float64 `json:"values"`
}

// ScalarsResponse answers POST /api/v1/runs/{run}/scalars (201): the
// step's record after the write.
type ScalarsResponse struct {
	Scalars model.Scalars `json:"scalars"`
}

// ScalarsPage is GET /api/v1/runs/{run}/scalars: the records of the steps
// from ?from= on (every step by default), in step order, and the names
// they use, sorted.
type ScalarsPage struct {
	Names []string        `json:"names"`
	Steps []model.Scalars `json:"steps"`
}
