package frozenlake

import (
	"context"
	"math"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// walk plays actions on a fresh TreeEnv episode and returns the observations.
func walk(t *testing.T, env *TreeEnv, actions ...Action) []rollout.Observation {
	t.Helper()
	ep, err := env.Reset(context.Background(), rollout.Task{})
	if err != nil {
		t.Fatal(err)
	}
	var out []rollout.Observation
	for i, a := range actions {
		obs, err := ep.Step(context.Background(), rollout.TurnKey{Index: i}, rollout.Move{Text: a.String()})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, obs)
	}
	return out
}

func TestDiscountPaysShorterPathsMore(t *testing.T) {
	m, _ := MapByName("4x4")
	direct := []Action{Down, Down, Right, Right, Down, Right}
	bumped := append([]Action{Left, Left}, direct...) // two free wall bumps first
	for _, tc := range []struct {
		discount       float64
		direct, bumped float64
	}{
		{0, 1, 1}, {1, 1, 1}, // undiscounted: the bumps cost nothing
		{0.9, math.Pow(0.9, 5), math.Pow(0.9, 7)},
	} {
		env := &TreeEnv{Map: m, Discount: tc.discount}
		d, b := walk(t, env, direct...), walk(t, env, bumped...)
		if got := d[len(d)-1]; !got.Done || math.Abs(got.Reward-tc.direct) > 1e-12 {
			t.Errorf("discount %v: direct path ends %+v, want reward %v", tc.discount, got, tc.direct)
		}
		if got := b[len(b)-1]; !got.Done || math.Abs(got.Reward-tc.bumped) > 1e-12 {
			t.Errorf("discount %v: bumped path ends %+v, want reward %v", tc.discount, got, tc.bumped)
		}
		for _, o := range d[:len(d)-1] {
			if o.Reward != 0 || o.Done {
				t.Errorf("discount %v: a move before the goal paid %v", tc.discount, o.Reward)
			}
		}
	}
}

func TestBudgetRefusesMovesBeyondIt(t *testing.T) {
	m, _ := MapByName("4x4")
	env := &TreeEnv{Map: m, Budget: NewBudget(2)}
	obs := walk(t, env, Right, Right, Right)
	if len(obs[0].Tokens) != 1 || len(obs[1].Tokens) != 1 || obs[1].Done {
		t.Fatalf("moves within the budget: %+v", obs[:2])
	}
	cut := obs[2]
	if !cut.Done || cut.Reward != 0 || Played(model.Turn{ObservationTokens: cut.Tokens}) {
		t.Fatalf("move beyond the budget = %+v, want a refused, finished, unpaid turn", cut)
	}
	// Another episode of the same run finds the budget spent too.
	if o := walk(t, env, Down); !o[0].Done || len(o[0].Tokens) != 0 {
		t.Fatalf("new episode after the budget = %+v", o[0])
	}
}

// TestBudgetIsExact: PaTR and GRPO given the same budget play exactly that
// many env steps, though their steps differ in size and the budget runs out
// mid-step; the groups it cut are recorded but neither trained on nor
// counted.
func TestBudgetIsExact(t *testing.T) {
	const budget = 1500
	for _, mode := range []string{"patr", "grpo"} {
		db := storetest.Open(t)
		cfg := DefaultTrainConfig(mode)
		cfg.Steps, cfg.Batch, cfg.EvalEpisodes, cfg.EnvStepBudget = 1000, 4, 10, budget
		rep := train(t, db, cfg)
		if rep.EnvSteps != budget {
			t.Errorf("%s: played %d env steps, want exactly %d", mode, rep.EnvSteps, budget)
		}
		last := rep.History[len(rep.History)-1]
		if last.TotalEnvSteps != budget || last.CutGroups == 0 {
			t.Errorf("%s: last step %+v, want the budget reached by a cut", mode, last)
		}
		stored, cutTurns := 0, 0
		err := db.ViewRun("demo", func(r *store.RunTx) error {
			figs, err := RunFigures(r)
			if err != nil {
				return err
			}
			sum := 0
			for _, f := range figs {
				sum += f.EnvSteps
			}
			if sum != budget {
				t.Errorf("%s: RunFigures count %d env steps, want %d", mode, sum, budget)
			}
			return r.ForEachGroup(0, func(g model.Group) error {
				nodes, err := r.GroupNodes(g)
				for _, n := range nodes {
					stored += n.Turns
					turns, err := r.Turns(n.ID)
					if err != nil {
						return err
					}
					for i, tu := range turns {
						if !Played(tu) {
							cutTurns++
							if i != len(turns)-1 || !tu.Done {
								t.Errorf("%s: node %d turn %d refused but not its last, done turn", mode, n.ID, i)
							}
						}
					}
				}
				return err
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		if cutTurns == 0 || stored != budget+cutTurns {
			t.Errorf("%s: %d turns stored, %d refused: want budget %d + refused", mode, stored, cutTurns, budget)
		}
	}
}
