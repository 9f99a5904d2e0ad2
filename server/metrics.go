package server

import (
	"net/http"

	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/store"
)

func (s *server) stepMetrics(w http.ResponseWriter, r *http.Request) error {
	out := struct {
		Steps []StepMetrics `json:"steps"`
	}{Steps: []StepMetrics{}}
	err := s.viewRun(r, func(rt *store.RunTx) error {
		var err error
		out.Steps, err = replay.StepFigures(rt)
		return err
	})
	if err != nil {
		return err
	}
	return s.ok(w, out)
}
