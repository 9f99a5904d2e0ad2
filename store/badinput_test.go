package store_test

// Bad input never half-writes: every rule of the data model, broken through
// the public API, gives its typed error and leaves the file byte-identical,
// also when the caller ignores the error and tries to commit.

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

type badInput struct {
	name string
	want error
	// op breaks one rule; run is the fixture's run (nil for tx-level ops).
	op func(tx *store.Tx, r *store.RunTx, f fixture) error
	// read marks a failing read: nothing to poison, only the error to see.
	read bool
}

func badInputs() []badInput {
	nan, inf := math.NaN(), math.Inf(1)
	var cases []badInput
	add := func(name string, want error, op func(tx *store.Tx, r *store.RunTx, f fixture) error) {
		cases = append(cases, badInput{name: name, want: want, op: op})
	}
	node := func(f fixture, spec store.NodeSpec) store.NodeSpec {
		if spec.Step == 0 {
			spec.Step = fixtureStep
		}
		if spec.Group == 0 {
			spec.Group = f.G1.ID
		}
		return spec
	}
	addNode := func(spec store.NodeSpec) func(*store.Tx, *store.RunTx, fixture) error {
		return func(_ *store.Tx, r *store.RunTx, f fixture) error {
			s := spec
			// Node fields name fixture nodes by a marker resolved here.
			s.Parent = resolve(f, spec.Parent)
			_, err := r.AddNode(node(f, s))
			return err
		}
	}

	cases = append(cases, badInput{name: "unknown run", want: model.ErrNotFound, read: true,
		op: func(tx *store.Tx, _ *store.RunTx, _ fixture) error { _, err := tx.Run("no-such-run"); return err }})

	// Runs.
	add("duplicate run id", model.ErrExists, func(tx *store.Tx, _ *store.RunTx, f fixture) error {
		_, err := tx.CreateRun(f.Run, nil, nil)
		return err
	})
	for name, id := range map[string]string{
		"empty":       "",
		"129 bytes":   strings.Repeat("a", 129),
		"slash":       "a/b",
		"space":       "a b",
		"nul":         "run\x00",
		"non-ascii":   "rün",
		"colon":       "run:1",
		"newline":     "run\n",
		"parent path": "../x",
	} {
		add("run id "+name, model.ErrInvalid, func(tx *store.Tx, _ *store.RunTx, _ fixture) error {
			_, err := tx.CreateRun(id, nil, nil)
			return err
		})
	}
	add("policy version not ahead of the run's", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, _ fixture) error { return r.PublishVersion(0) })
	add("run status unknown", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, _ fixture) error { return r.SetRunStatus("paused") })

	// Groups.
	add("group at step 0", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
		_, err := r.OpenGroup(store.GroupSpec{Step: 0})
		return err
	})
	add("close group with active nodes", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error { return r.CloseGroup(fixtureStep, f.G1.ID) })
	add("close unknown group", model.ErrNotFound, func(_ *store.Tx, r *store.RunTx, _ fixture) error { return r.CloseGroup(1, 77) })
	add("group interval goes back", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		if err := r.SetGroupInterval(fixtureStep, f.G2.ID, 3); err != nil {
			return err
		}
		return r.SetGroupInterval(fixtureStep, f.G2.ID, 2)
	})

	// Nodes.
	add("unknown group", model.ErrNotFound, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
		_, err := r.AddNode(store.NodeSpec{Step: fixtureStep, Group: 99})
		return err
	})
	add("group at the wrong step", model.ErrNotFound, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		_, err := r.AddNode(store.NodeSpec{Step: fixtureStep + 1, Group: f.G1.ID})
		return err
	})
	add("missing parent", model.ErrNotFound, addNode(store.NodeSpec{Parent: 9999, Fork: 0}))
	add("fork past the parent's turns", model.ErrInvalid, addNode(store.NodeSpec{Parent: markA, Fork: 4, Ordinal: 5}))
	add("negative fork", model.ErrInvalid, addNode(store.NodeSpec{Parent: markA, Fork: -1, Ordinal: 5}))
	add("root with a fork point", model.ErrInvalid, addNode(store.NodeSpec{Fork: 1, Ordinal: 5}))
	add("parent in another group", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		_, err := r.AddNode(store.NodeSpec{Step: fixtureStep, Group: f.G2.ID, Parent: f.A, Fork: 1, Ordinal: 5})
		return err
	})
	add("parent is pruned", model.ErrInvalid, addNode(store.NodeSpec{Parent: markP, Fork: 1}))
	add("duplicate ordinal under a parent", model.ErrExists, addNode(store.NodeSpec{Parent: markA, Fork: 1, Ordinal: 0}))
	add("duplicate root ordinal", model.ErrExists, addNode(store.NodeSpec{Ordinal: 2}))
	add("negative ordinal", model.ErrInvalid, addNode(store.NodeSpec{Ordinal: -1}))

	// Rewards and scores.
	for name, v := range map[string]float64{"NaN": nan, "+Inf": inf, "-Inf": -inf} {
		add("reward "+name, model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error { return r.SetReward(f.C, v) })
		add("turn reward "+name, model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
			tn := textTurn("bad")
			tn.Reward = v
			return r.AppendTurns(f.B, 2, textTurn("fine"), tn)
		})
	}
	// Turn content a trainer would choke on later (EncodeTurns applies the
	// same rule: TestEncodeTurnsValidates).
	badTurn := func(name string, mutate func(*model.Turn)) {
		add("turn "+name, model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
			tn := textTurn("bad")
			mutate(&tn)
			return r.AppendTurns(f.B, 2, textTurn("fine"), tn)
		})
	}
	badTurn("action not UTF-8", func(t *model.Turn) { t.Action = "ok \xff\xfe" })
	badTurn("observation with a lone surrogate", func(t *model.Turn) { t.Observation = "\xed\xa0\x80" })
	badTurn("fewer logprobs than tokens", func(t *model.Turn) { t.ActionLogprobs = t.ActionLogprobs[:1] })
	badTurn("more logprobs than tokens", func(t *model.Turn) { t.ActionLogprobs = append(t.ActionLogprobs, -1) })
	for name, v := range map[string]float32{"NaN": float32(nan), "+Inf": float32(inf), "-Inf": float32(-inf), "positive": 0.5} {
		badTurn("logprob "+name, func(t *model.Turn) { t.ActionLogprobs[1] = v })
	}
	add("group prompt not UTF-8", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
		_, err := r.OpenGroup(store.GroupSpec{Step: 1, Task: "t", Prompt: "\xc3"})
		return err
	})
	add("group meta not UTF-8", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
		_, err := r.OpenGroup(store.GroupSpec{Step: 1, Task: "t", Meta: map[string]string{"k": "\xff"}})
		return err
	})
	add("node worker not UTF-8", model.ErrInvalid, addNode(store.NodeSpec{Ordinal: 7, Worker: "w\xff"}))
	add("fail a pruned node", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error { return r.FailNode(f.P, "boom") })
	add("failure reason not UTF-8", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error { return r.FailNode(f.B, "\xff") })
	add("reward of an expanded node", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error { return r.SetReward(f.A, 1) })
	for name, v := range map[string]float64{"1.5": 1.5, "-0.01": -0.01, "NaN": nan, "+Inf": inf, "1+eps": math.Nextafter(1, 2)} {
		add("score "+name, model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
			return r.Score(f.B, model.Score{Interval: 1, Turn: 2, Value: v})
		})
	}
	add("score of a pruned node", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		return r.Score(f.P, model.Score{Interval: 1, Value: 0.5})
	})
	add("score of an unknown node", model.ErrNotFound, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
		return r.Score(424242, model.Score{Value: 0.5})
	})
	add("routing action unknown", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		return r.Route(f.B, model.Decision{Action: "explode"})
	})
	add("routing a completed node", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		return r.Route(f.C, model.Decision{Action: model.ActionSurvive})
	})
	add("routing with NaN score", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		return r.Route(f.B, model.Decision{Action: model.ActionSurvive, Score: nan})
	})

	// Status lifecycle.
	for _, c := range []struct {
		name string
		node func(fixture) uint64
		to   model.NodeStatus
	}{
		{"pruned→active", func(f fixture) uint64 { return f.P }, model.NodeActive},
		{"completed→pruned", func(f fixture) uint64 { return f.C }, model.NodePruned},
		{"expanded→active", func(f fixture) uint64 { return f.A }, model.NodeActive},
		{"active→active", func(f fixture) uint64 { return f.B }, model.NodeActive},
		{"failed→completed", func(f fixture) uint64 { return f.F }, model.NodeCompleted},
		{"active→unknown", func(f fixture) uint64 { return f.B }, "sleeping"},
	} {
		add("status "+c.name, model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
			return r.SetNodeStatus(c.node(f), c.to)
		})
	}

	// Turns.
	add("turns to a completed node", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		return r.AppendTurns(f.C, 2, textTurn("late"))
	})
	add("turns to an expanded node", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		return r.AppendTurns(f.A, 3, textTurn("late"))
	})
	add("turn index gap", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		return r.AppendTurns(f.B, 3, textTurn("gap")) // B has 2 turns: index 2 is next
	})
	add("negative turn index", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		return r.AppendTurns(f.B, -1, textTurn("neg"))
	})
	add("turns to an unknown node", model.ErrNotFound, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
		return r.AppendTurns(31337, 0, textTurn("x"))
	})
	// The same rules for turns encoded beforehand.
	encoded := func(node func(fixture) uint64, from int) func(*store.Tx, *store.RunTx, fixture) error {
		return func(_ *store.Tx, r *store.RunTx, f fixture) error {
			enc, err := store.EncodeTurns(textTurn("pre"))
			if err != nil {
				return err
			}
			return r.AppendEncodedTurns(node(f), from, enc)
		}
	}
	add("encoded turns to a completed node", model.ErrInvalid, encoded(func(f fixture) uint64 { return f.C }, 2))
	add("encoded turns to an expanded node", model.ErrInvalid, encoded(func(f fixture) uint64 { return f.A }, 3))
	add("encoded turn index gap", model.ErrInvalid, encoded(func(f fixture) uint64 { return f.B }, 3))
	add("negative encoded turn index", model.ErrInvalid, encoded(func(f fixture) uint64 { return f.B }, -1))
	add("encoded turns to an unknown node", model.ErrNotFound, encoded(func(fixture) uint64 { return 31337 }, 0))

	// Advantages.
	adv := func(leaf func(fixture) uint64, group func(fixture) uint64, mut func(*model.Advantage)) func(*store.Tx, *store.RunTx, fixture) error {
		return func(_ *store.Tx, r *store.RunTx, f fixture) error {
			a := model.Advantage{Step: fixtureStep, Group: group(f), Leaf: leaf(f), Outcome: 1, Total: 1, Mean: 0.5, Std: 0.5, Advantage: 1}
			if mut != nil {
				mut(&a)
			}
			return r.PutAdvantage(a)
		}
	}
	g1 := func(f fixture) uint64 { return f.G1.ID }
	add("advantage of an expanded node", model.ErrInvalid, adv(func(f fixture) uint64 { return f.A }, g1, nil))
	add("advantage of an active node", model.ErrInvalid, adv(func(f fixture) uint64 { return f.B }, g1, nil))
	add("advantage of a failed node", model.ErrInvalid, adv(func(f fixture) uint64 { return f.F }, g1, nil))
	add("advantage for a node of another group", model.ErrInvalid, adv(func(f fixture) uint64 { return f.C }, func(f fixture) uint64 { return f.G2.ID }, nil))
	add("advantage for an unknown leaf", model.ErrNotFound, adv(func(fixture) uint64 { return 5555 }, g1, nil))
	add("advantage for an unknown group", model.ErrNotFound, adv(func(f fixture) uint64 { return f.C }, func(fixture) uint64 { return 66 }, nil))
	add("advantage NaN", model.ErrInvalid, adv(func(f fixture) uint64 { return f.C }, g1, func(a *model.Advantage) { a.Advantage = nan }))
	add("advantage negative std", model.ErrInvalid, adv(func(f fixture) uint64 { return f.C }, g1, func(a *model.Advantage) { a.Std = -1 }))

	// Rubrics.
	add("rubric retired→public", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		_, err := r.MoveRubric(f.RRetired, store.RubricMove{To: model.PoolPublic})
		return err
	})
	add("rubric public→candidate", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		_, err := r.MoveRubric(f.RPublic, store.RubricMove{To: model.PoolCandidate})
		return err
	})
	add("rubric merged into a non-public rubric", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		_, err := r.MoveRubric(f.RCand1, store.RubricMove{To: model.PoolMerged, MergedInto: f.RCand2})
		return err
	})
	add("rubric merged into a missing rubric", model.ErrNotFound, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		_, err := r.MoveRubric(f.RCand1, store.RubricMove{To: model.PoolMerged, MergedInto: 999})
		return err
	})
	add("rubric to an unknown pool", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		_, err := r.MoveRubric(f.RCand1, store.RubricMove{To: "limbo"})
		return err
	})
	add("move of an unknown rubric", model.ErrNotFound, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
		_, err := r.MoveRubric(999, store.RubricMove{To: model.PoolRetired})
		return err
	})
	add("rubric with an existing id", model.ErrExists, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		_, err := r.PutRubric(model.Rubric{ID: f.RPublic, Pool: model.PoolCandidate})
		return err
	})
	add("rubric in an unknown pool", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
		_, err := r.PutRubric(model.Rubric{Pool: "limbo"})
		return err
	})
	add("rubric with NaN usage sum", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
		_, err := r.PutRubric(model.Rubric{Pool: model.PoolCandidate, Usage: model.RubricUsage{SumXY: nan}})
		return err
	})
	add("rubric update changing the pool", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		rb, err := r.Rubric(f.RCand1)
		if err != nil {
			return err
		}
		rb.Pool = model.PoolPublic
		return r.UpdateRubric(rb)
	})

	// Checkpoints.
	for name, step := range map[string]uint64{"equal to LastStep": 2, "before LastStep": 1} {
		add("checkpoint step "+name, store.ErrStepCompleted, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
			return r.PutCheckpoint(model.Checkpoint{Step: step, Inline: []byte("s")})
		})
	}
	add("checkpoint step zero", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
		return r.PutCheckpoint(model.Checkpoint{Step: 0, Inline: []byte("s")})
	})
	add("checkpoint with neither inline nor URI", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
		return r.PutCheckpoint(model.Checkpoint{Step: 3, Hash: "sha256:00"})
	})
	add("checkpoint completing a step with open groups", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
		return r.PutCheckpoint(model.Checkpoint{Step: fixtureStep, URI: "file:///w3"})
	})
	add("checkpoint past a step with open groups", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
		return r.PutCheckpoint(model.Checkpoint{Step: fixtureStep + 5, URI: "file:///w8"})
	})

	// Events.
	add("event with an empty kind", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
		_, err := r.AppendEvent("", 0, 0, 0, 0, nil)
		return err
	})
	add("event payload msgpack cannot encode", model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
		_, err := r.AppendEvent("x", 0, 0, 0, 0, make(chan int))
		return err
	})
	for _, kind := range store.EventKinds() {
		add("event of the store's own kind "+string(kind), model.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
			_, err := r.AppendEvent(kind, 1, f.G1.ID, f.A, 0, map[string]any{"forged": true})
			return err
		})
	}
	return cases
}

// Markers for fixture nodes inside a NodeSpec built before the fixture.
const (
	markA = math.MaxUint64 - iota
	markP
)

func resolve(f fixture, id uint64) uint64 {
	switch id {
	case markA:
		return f.A
	case markP:
		return f.P
	}
	return id
}

func TestBadInputLeavesFileUnchanged(t *testing.T) {
	path := tempPath(t, "patr.db")
	db := storetest.OpenPath(t, path, syncOptions())
	f := buildFixture(t, db)
	want := dumpRun(t, db, f.Run)
	before := fileDigest(t, path)
	sentinels := []error{model.ErrInvalid, model.ErrNotFound, model.ErrExists, store.ErrCorrupt, store.ErrReadOnly, store.ErrTxDone}

	for _, c := range badInputs() {
		t.Run(c.name, func(t *testing.T) {
			checkErr := func(how string, err error) {
				t.Helper()
				if !errors.Is(err, c.want) {
					t.Fatalf("%s: %v, want %v", how, err, c.want)
				}
				for _, s := range sentinels {
					if s != c.want && errors.Is(err, s) {
						t.Errorf("%s: %v also matches %v", how, err, s)
					}
				}
			}
			// The caller returns the error.
			err := db.Update(func(tx *store.Tx) error {
				r, err := tx.Run(f.Run)
				if err != nil {
					return err
				}
				return c.op(tx, r, f)
			})
			checkErr("returned", err)
			if after := fileDigest(t, path); after != before {
				t.Fatalf("file changed after a refused write")
			}
			if c.read {
				return
			}
			// The caller swallows the error, writes more and returns nil:
			// the transaction is poisoned and Update still fails.
			var seq uint64
			err = db.Update(func(tx *store.Tx) error {
				r, err := tx.Run(f.Run)
				if err != nil {
					return err
				}
				if _, err := r.AppendEvent("before", 0, 0, 0, 0, nil); err != nil {
					t.Errorf("valid write before the bad one: %v", err)
				}
				_ = c.op(tx, r, f)
				if seq, err = r.AppendEvent("after", 0, 0, 0, 0, nil); err != nil {
					t.Errorf("valid write after the bad one: %v", err)
				}
				return nil
			})
			checkErr("swallowed", err)
			if seq == 0 {
				t.Error("writes after the failure did not run")
			}
			if after := fileDigest(t, path); after != before {
				t.Fatalf("file changed after a poisoned transaction")
			}
		})
	}
	if got := dumpRun(t, db, f.Run); !reflect.DeepEqual(got, want) {
		t.Error("state changed after the bad inputs")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if after := fileDigest(t, path); after != before {
		t.Error("file changed by the time it was closed")
	}
	// And the rules do not refuse everything: the same store still takes
	// good writes.
	db = storetest.OpenPath(t, path, storetest.Options())
	inRun(t, db, true, f.Run, func(r *store.RunTx) error {
		if _, err := r.AddNode(store.NodeSpec{Step: fixtureStep, Group: f.G1.ID, Parent: f.A, Fork: 3, Ordinal: 1}); err != nil {
			return err
		}
		if err := r.AppendTurns(f.B, 2, textTurn("b2")); err != nil {
			return err
		}
		if err := r.Score(f.B, model.Score{Interval: 1, Value: 1}); err != nil {
			return err
		}
		if err := r.SetNodeStatus(f.F, model.NodeActive); err != nil {
			return err
		}
		_, err := r.MoveRubric(f.RCand1, store.RubricMove{To: model.PoolMerged, MergedInto: f.RPublic})
		return err
	})
}

// A write error is sticky: a caller that returns its own error still gets
// a rollback, and the poisoned transaction refuses to commit even if the
// caller retries the same call correctly.
func TestPoisonedTxStaysPoisoned(t *testing.T) {
	path := tempPath(t, "patr.db")
	db := storetest.OpenPath(t, path, syncOptions())
	f := buildFixture(t, db)
	before := fileDigest(t, path)
	mine := errors.New("caller gave up")
	err := db.UpdateRun(f.Run, func(r *store.RunTx) error {
		if err := r.AppendTurns(f.B, 2, textTurn("ok")); err != nil {
			return err
		}
		return mine
	})
	if err != mine {
		t.Errorf("Update returned %v, want the function's own error", err)
	}
	err = db.UpdateRun(f.Run, func(r *store.RunTx) error {
		_ = r.AppendTurns(f.B, 5, textTurn("gap"))                    // fails
		if err := r.AppendTurns(f.B, 2, textTurn("ok")); err != nil { // fine on its own
			t.Errorf("corrected call: %v", err)
		}
		return nil
	})
	if !errors.Is(err, model.ErrInvalid) {
		t.Errorf("Update after a corrected retry: %v, want the first error (ErrInvalid)", err)
	}
	if after := fileDigest(t, path); after != before {
		t.Error("file changed")
	}
	inRun(t, db, false, f.Run, func(r *store.RunTx) error {
		n, err := r.Node(f.B)
		if err != nil || n.Turns != 2 {
			t.Errorf("node B has %d turns (%v), want 2", n.Turns, err)
		}
		return nil
	})
}
