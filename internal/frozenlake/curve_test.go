package frozenlake

import (
	"context"
	"math"
	"testing"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

func train(t *testing.T, db *store.DB, cfg TrainConfig) *Report {
	t.Helper()
	tr, err := NewTrainer(db, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := tr.Train(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestDiscountedTrainingActsGreedily: with the default discount the demo's
// policy walks to the goal greedily as well as sampled — undiscounted, a
// free wall bump can become the greedy action and loop until the time limit.
func TestDiscountedTrainingActsGreedily(t *testing.T) {
	db := storetest.Open(t)
	cfg := DefaultTrainConfig("patr")
	cfg.Steps, cfg.Batch, cfg.EvalEpisodes = 20, 8, 200
	rep := train(t, db, cfg)
	if rep.FinalSuccess < 0.99 || rep.SampledSuccess < 0.8 {
		t.Fatalf("success greedy %.3f, sampled %.3f: want the greedy policy to reach the goal", rep.FinalSuccess, rep.SampledSuccess)
	}
}

// TestCurveEndsAtTheReport: a run's learning curve is read back from the
// store; its last point is the trainer's closing figure, its env steps the
// trainer's, and the band over two seeds is their mean ± sd.
func TestCurveEndsAtTheReport(t *testing.T) {
	db := storetest.Open(t)
	var reps []*Report
	for seed := int64(1); seed <= 2; seed++ {
		cfg := DefaultTrainConfig("grpo")
		cfg.Run = "g" + string(rune('0'+seed))
		cfg.Seed, cfg.Tree.Seed = seed, seed
		cfg.Steps, cfg.Batch, cfg.EvalEpisodes, cfg.EnvStepBudget = 100, 4, 300, 900
		reps = append(reps, train(t, db, cfg))
	}
	var curves []*Curve
	err := db.View(func(tx *store.Tx) error {
		for i, rep := range reps {
			r, err := tx.Run(rep.Run)
			if err != nil {
				return err
			}
			c, err := LoadCurve(r, 300)
			if err != nil {
				return err
			}
			if len(c.Points) != int(rep.Steps)+1 || c.Points[0].EnvSteps != 0 {
				t.Fatalf("run %d: %d points for %d steps, first %+v", i, len(c.Points), rep.Steps, c.Points[0])
			}
			for k := 1; k < len(c.Points); k++ {
				if c.Points[k].EnvSteps <= c.Points[k-1].EnvSteps {
					t.Fatalf("run %d: env steps not increasing at point %d", i, k)
				}
			}
			last := c.Points[len(c.Points)-1]
			if last.EnvSteps != rep.EnvSteps || last.Sampled != rep.SampledSuccess || last.Greedy != rep.FinalSuccess {
				t.Fatalf("run %d: last point %+v, report %d env steps, %.3f / %.3f", i, last, rep.EnvSteps, rep.SampledSuccess, rep.FinalSuccess)
			}
			curves = append(curves, c)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	bands := Bands(curves)
	if len(bands) != 1 || bands[0].Label != "grpo" || len(bands[0].Runs) != 2 {
		t.Fatalf("bands = %+v", bands)
	}
	b := bands[0]
	end := b.Sampled[len(b.Sampled)-1]
	m, sd := MeanSD([]float64{reps[0].SampledSuccess, reps[1].SampledSuccess})
	if end.EnvSteps != 900 || math.Abs(end.Mean-m) > 1e-12 || math.Abs(end.SD-sd) > 1e-12 {
		t.Fatalf("band ends at %+v, want 900 env steps, %v ± %v", end, m, sd)
	}
	if b.Sampled[0].EnvSteps != 0 || len(b.ZeroVariance) == 0 || b.ZeroVariance[0].EnvSteps == 0 {
		t.Fatalf("band starts %+v, zero-variance share %+v", b.Sampled[0], b.ZeroVariance)
	}
}

func TestInterpolateAndMeanSD(t *testing.T) {
	pts := []CurvePoint{{EnvSteps: 0, Sampled: 0}, {EnvSteps: 100, Sampled: 0.5}, {EnvSteps: 300, Sampled: 0.9}}
	val := func(p CurvePoint) float64 { return p.Sampled }
	for _, tc := range []struct{ x, want float64 }{{0, 0}, {50, 0.25}, {100, 0.5}, {200, 0.7}, {300, 0.9}, {400, 0.9}} {
		if got := interpolate(pts, tc.x, val); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("interpolate at %v = %v, want %v", tc.x, got, tc.want)
		}
	}
	if m, sd := MeanSD([]float64{1, 2, 3, 4}); m != 2.5 || math.Abs(sd-math.Sqrt(5.0/3)) > 1e-12 {
		t.Errorf("MeanSD = %v ± %v", m, sd)
	}
	if m, sd := MeanSD([]float64{7}); m != 7 || sd != 0 {
		t.Errorf("MeanSD of one = %v ± %v", m, sd)
	}
}
