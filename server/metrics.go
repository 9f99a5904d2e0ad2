package server

import (
	"github.com/patrdb/patrdb/model"
	"net/http"
	"sync"

	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/store"
)

// stepFollowers keeps a replay.StepFollower per run, so the viewer's live
// refresh of a run reads only the events written since its last refresh.
type stepFollowers struct{ byRun sync.Map } // run id → *replay.StepFollower

func (f *stepFollowers) of(run string) *replay.StepFollower {
	v, _ := f.byRun.LoadOrStore(run, new(replay.StepFollower))
	return v.(*replay.StepFollower)
}

func (s *server) stepMetrics(w http.ResponseWriter, r *http.Request) error {
	out := struct {
		Steps []model.StepMetrics `json:"steps"`
	}{Steps: []model.StepMetrics{}}
	err := s.viewParts(r, store.CheckEvents|store.CheckAdvantages, func(rt *store.RunTx) error {
		var err error
		out.Steps, err = s.steps.of(rt.ID()).Figures(rt)
		return err
	})
	if err != nil {
		return err
	}
	return s.ok(w, out)
}

// runStatistics is GET /api/v1/runs/{run}/stats: replay's statistics of the
// run, computed here, so `patrdb stats --server` prints them as they are
// instead of fetching every record to compute them itself.
func (s *server) runStatistics(w http.ResponseWriter, r *http.Request) error {
	var out *replay.RunStats
	err := s.viewRun(r, func(rt *store.RunTx) error {
		var err error
		out, err = replay.Stats(rt)
		return err
	})
	if err != nil {
		return err
	}
	return s.ok(w, out)
}
