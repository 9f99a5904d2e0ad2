package workload

import (
	"errors"
	"reflect"
	"testing"

	"github.com/patrdb/patrdb/grpo"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	"github.com/patrdb/patrdb/tree"
)

func gen(t *testing.T, cfg Config) *Generator {
	t.Helper()
	g, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestSameSeedSameWork(t *testing.T) {
	cfg := SWEConfig(7)
	cfg.Trees = 4
	a, b := gen(t, cfg).Next(), gen(t, cfg).Next()
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two generators with one seed disagree")
	}
	cfg.Seed = 8
	if c := gen(t, cfg).Next(); reflect.DeepEqual(a.Stats, c.Stats) {
		t.Error("another seed gave the same batch")
	}
}

// TestSWEShape checks the trees look like the benchmark targets say: about ten
// leaves, some pruned early, some reaching the 50-turn cap, turns of
// ~300 action and ~1,200 observation tokens with ~4 bytes of text each.
func TestSWEShape(t *testing.T) {
	b := gen(t, SWEConfig(1)).Next()
	s := b.Stats
	per := func(n int) float64 { return float64(n) / float64(s.Trees) }
	if s.Trees != 64 {
		t.Fatalf("%d trees", s.Trees)
	}
	if l := per(s.Leaves); l < 7 || l > 14 {
		t.Errorf("%.1f leaves per tree, want about 10", l)
	}
	if per(s.Pruned) < 0.5 || per(s.Full) < 1 {
		t.Errorf("%.1f pruned and %.1f full-length leaves per tree; want some of each", per(s.Pruned), per(s.Full))
	}
	if kb := float64(s.TurnBytes) / float64(s.Turns) / 1e3; kb < 11 || kb > 16 {
		t.Errorf("mean turn %.1f KB, want ~13 (300+1200 tokens, 4 B of text each, logprobs)", kb)
	}
	if len(b.Txns) < 3 || len(b.Txns) > 6 {
		t.Errorf("%d transactions; 50 turns at K=13 take 4 intervals", len(b.Txns))
	}
	var act, obs, n int
	for _, txn := range b.Txns {
		for _, op := range txn {
			for _, tu := range op.Turns {
				act += len(tu.ActionTokens)
				obs += len(tu.ObservationTokens)
				n++
				if len(tu.ActionLogprobs) != len(tu.ActionTokens) {
					t.Fatal("logprobs and action tokens differ in length")
				}
			}
			if op.Kind == OpTurns && len(op.Turns) > 13 {
				t.Errorf("node %d got %d turns in one interval, K is 13", op.Node, len(op.Turns))
			}
		}
	}
	if a, o := act/n, obs/n; a < 250 || a > 350 || o < 1000 || o > 1400 {
		t.Errorf("mean %d action and %d observation tokens per turn", a, o)
	}
}

// TestIDsAndOrder checks what a store relies on: ids are handed out in
// creation order, a parent exists before its child and has the turns the
// child forks at, and every tree closes with one advantage per leaf.
func TestIDsAndOrder(t *testing.T) {
	for _, cfg := range []Config{SWEConfig(3), FrozenLakeConfig(3)} {
		cfg.Trees = 8
		g := gen(t, cfg)
		var next, nextGroup uint64 = 1, 1
		for range 2 {
			b := g.Next()
			turns := map[uint64]int{}
			status := map[uint64]model.NodeStatus{}
			leaves, advs, closes := 0, 0, 0
			for _, txn := range b.Txns {
				for _, op := range txn {
					switch op.Kind {
					case OpOpenGroup:
						if op.Group != nextGroup {
							t.Fatalf("%s: group %d, want %d", cfg.Kind, op.Group, nextGroup)
						}
						nextGroup++
					case OpAddNode:
						if op.Node != next {
							t.Fatalf("%s: node %d, want %d", cfg.Kind, op.Node, next)
						}
						next++
						if op.Parent != 0 && (status[op.Parent] != model.NodeExpanded || turns[op.Parent] != op.Fork) {
							t.Fatalf("%s: node %d forks %s parent %d at %d of %d turns", cfg.Kind, op.Node, status[op.Parent], op.Parent, op.Fork, turns[op.Parent])
						}
						status[op.Node] = model.NodeActive
					case OpTurns:
						if status[op.Node] != model.NodeActive || op.From != turns[op.Node] {
							t.Fatalf("%s: turns for %s node %d from %d of %d", cfg.Kind, status[op.Node], op.Node, op.From, turns[op.Node])
						}
						turns[op.Node] += len(op.Turns)
					case OpStatus:
						status[op.Node] = op.Status
					case OpRoute:
						switch op.Decision.Action {
						case model.ActionExpand:
							status[op.Node] = model.NodeExpanded
						case model.ActionPrune:
							status[op.Node] = model.NodePruned
						}
					case OpAdvantage:
						advs++
						if !status[op.Adv.Leaf].Leaf() {
							t.Fatalf("%s: advantage for %s node %d", cfg.Kind, status[op.Adv.Leaf], op.Adv.Leaf)
						}
					case OpCloseGroup:
						closes++
					}
				}
			}
			for _, s := range status {
				if s == model.NodeActive {
					t.Fatalf("%s: a node is still active after its tree closed", cfg.Kind)
				}
				if s.Leaf() {
					leaves++
				}
			}
			if leaves != b.Stats.Leaves || advs != leaves || closes != cfg.Trees {
				t.Errorf("%s: %d leaves (stats %d), %d advantages, %d closes of %d trees", cfg.Kind, leaves, b.Stats.Leaves, advs, closes, cfg.Trees)
			}
		}
	}
}

func TestNextWithSeed(t *testing.T) {
	cfg := FrozenLakeConfig(1)
	cfg.Trees = 4
	a, b := gen(t, cfg), gen(t, cfg)
	b.Next()
	x, y := a.NextWithSeed(99), b.NextWithSeed(99)
	if !reflect.DeepEqual(x.Stats, y.Stats) {
		t.Errorf("same seed after different histories: %+v vs %+v", x.Stats, y.Stats)
	}
	if x.Txns[0][1].Node == y.Txns[0][1].Node {
		t.Error("ids did not continue from the earlier batch")
	}
}

func TestMaterializeCopies(t *testing.T) {
	cfg := SWEConfig(1)
	cfg.Trees = 1
	txn := gen(t, cfg).Next().Txns[0]
	m := Materialize(txn)
	if !reflect.DeepEqual(m, txn) {
		t.Fatal("materialised transaction differs")
	}
	for i := range txn {
		if len(txn[i].Turns) > 0 {
			m[i].Turns[0].ActionTokens[0]++
			if m[i].Turns[0].ActionTokens[0] == txn[i].Turns[0].ActionTokens[0] {
				t.Fatal("materialised turns share memory with the generator's")
			}
			return
		}
	}
}

func TestValidate(t *testing.T) {
	for _, mut := range []func(*Config){
		func(c *Config) { c.Trees = 0 },
		func(c *Config) { c.Kind = "x" },
		func(c *Config) { c.Tree.K = 0 },
		func(c *Config) { c.Tree.MaxTurns = 0 },
		func(c *Config) { c.DoneHazard = 1 },
		func(c *Config) { c.ActionTokens = 0 },
	} {
		c := SWEConfig(1)
		mut(&c)
		if _, err := NewGenerator(c); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: err = %v, want ErrConfig", c, err)
		}
	}
}

// TestEngineRules: what a batch writes is what the engine's rules give for
// the trees it describes — applied to a store, every leaf without a reward
// of its own has tree.PathReward of its path, and every group's advantage
// records are tree.Advantages (GRPO, package grpo) of its stored leaves.
func TestEngineRules(t *testing.T) {
	for _, cfg := range []Config{SWEConfig(5), FrozenLakeConfig(5)} {
		cfg.Trees = 6
		db := storetest.Open(t)
		if err := db.Update(func(tx *store.Tx) error {
			_, err := tx.CreateRun("w", tree.ConfigJSON(cfg.Tree), nil)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		for _, txn := range gen(t, cfg).Next().Txns {
			if err := ApplyTxn(db, "w", txn); err != nil {
				t.Fatal(err)
			}
		}
		c, err := tree.NewCoordinator(db, "w", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = db.View(func(tx *store.Tx) error {
			r, err := tx.Run("w")
			if err != nil {
				return err
			}
			groups, err := r.Groups(1)
			if err != nil {
				return err
			}
			for _, g := range groups {
				_, leaves, err := c.Leaves(tx, g.Step, g.ID, true)
				if err != nil {
					return err
				}
				for _, l := range leaves {
					var path []float64
					for _, pt := range l.Turns {
						path = append(path, pt.Reward)
					}
					if want := tree.PathReward(path); l.Reward != want {
						t.Errorf("%s: leaf %d (%s) has reward %v, the engine gives %v", cfg.Kind, l.Node.ID, l.Node.Status, l.Reward, want)
					}
				}
				got, err := r.Advantages(g.Step, g.ID)
				if err != nil {
					return err
				}
				if want := tree.Advantages(g, leaves, nil, grpo.DefaultEps); !reflect.DeepEqual(got, want) {
					t.Errorf("%s: group %d advantages\n got  %+v\n want %+v", cfg.Kind, g.ID, got, want)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
