package server

import (
	"testing"
	"time"

	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/store"
)

func TestZZProbe(t *testing.T) {
	e := newEnv(t, Options{})
	buildViewerRun(t, e.db, "big", viewerSpec{steps: 100, tasks: 32, roots: 4, nodes: 12, children: 2, tokens: 16, obsLines: 4, rubrics: 25, seed: 1})
	for i := 0; i < 3; i++ {
		e.db.View(func(tx *store.Tx) error {
			rt, _ := tx.Run("big")
			t0 := time.Now()
			replay.EnvSteps(rt)
			t1 := time.Now()
			stepMetrics(rt)
			t2 := time.Now()
			summarize(rt)
			t3 := time.Now()
			poolsByStep(rt)
			t4 := time.Now()
			rt.Advantages(0, 0)
			t5 := time.Now()
			n := 0
			rt.ForEachGroup(0, func(g store.Group) error { n++; return nil })
			t6 := time.Now()
			t.Logf("env %v metrics %v summarize %v pools %v advs %v groups %v", t1.Sub(t0), t2.Sub(t1), t3.Sub(t2), t4.Sub(t3), t5.Sub(t4), t6.Sub(t5))
			return nil
		})
	}
}
