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

	cases = append(cases, badInput{name: "unknown run", want: store.ErrNotFound, read: true,
		op: func(tx *store.Tx, _ *store.RunTx, _ fixture) error { _, err := tx.Run("no-such-run"); return err }})

	// Runs.
	add("duplicate run id", store.ErrExists, func(tx *store.Tx, _ *store.RunTx, f fixture) error {
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
		add("run id "+name, store.ErrInvalid, func(tx *store.Tx, _ *store.RunTx, _ fixture) error {
			_, err := tx.CreateRun(id, nil, nil)
			return err
		})
	}
	add("policy version not ahead of the run's", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, _ fixture) error { return r.PublishVersion(0) })
	add("run status unknown", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, _ fixture) error { return r.SetRunStatus("paused") })

	// Groups.
	add("group at step 0", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
		_, err := r.OpenGroup(store.GroupSpec{Step: 0})
		return err
	})
	add("close group with active nodes", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error { return r.CloseGroup(fixtureStep, f.G1.ID) })
	add("close unknown group", store.ErrNotFound, func(_ *store.Tx, r *store.RunTx, _ fixture) error { return r.CloseGroup(1, 77) })
	add("group interval goes back", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		if err := r.SetGroupInterval(fixtureStep, f.G2.ID, 3); err != nil {
			return err
		}
		return r.SetGroupInterval(fixtureStep, f.G2.ID, 2)
	})

	// Nodes.
	add("unknown group", store.ErrNotFound, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
		_, err := r.AddNode(store.NodeSpec{Step: fixtureStep, Group: 99})
		return err
	})
	add("group at the wrong step", store.ErrNotFound, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		_, err := r.AddNode(store.NodeSpec{Step: fixtureStep + 1, Group: f.G1.ID})
		return err
	})
	add("missing parent", store.ErrNotFound, addNode(store.NodeSpec{Parent: 9999, Fork: 0}))
	add("fork past the parent's turns", store.ErrInvalid, addNode(store.NodeSpec{Parent: markA, Fork: 4, Ordinal: 5}))
	add("negative fork", store.ErrInvalid, addNode(store.NodeSpec{Parent: markA, Fork: -1, Ordinal: 5}))
	add("root with a fork point", store.ErrInvalid, addNode(store.NodeSpec{Fork: 1, Ordinal: 5}))
	add("parent in another group", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		_, err := r.AddNode(store.NodeSpec{Step: fixtureStep, Group: f.G2.ID, Parent: f.A, Fork: 1, Ordinal: 5})
		return err
	})
	add("parent is pruned", store.ErrInvalid, addNode(store.NodeSpec{Parent: markP, Fork: 1}))
	add("duplicate ordinal under a parent", store.ErrExists, addNode(store.NodeSpec{Parent: markA, Fork: 1, Ordinal: 0}))
	add("duplicate root ordinal", store.ErrExists, addNode(store.NodeSpec{Ordinal: 2}))
	add("negative ordinal", store.ErrInvalid, addNode(store.NodeSpec{Ordinal: -1}))

	// Rewards and scores.
	for name, v := range map[string]float64{"NaN": nan, "+Inf": inf, "-Inf": -inf} {
		add("reward "+name, store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error { return r.SetReward(f.C, v) })
		add("turn reward "+name, store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
			tn := textTurn("bad")
			tn.Reward = v
			return r.AppendTurns(f.B, 2, textTurn("fine"), tn)
		})
	}
	// Turn content a trainer would choke on later (EncodeTurns applies the
	// same rule: TestEncodeTurnsValidates).
	badTurn := func(name string, mutate func(*store.Turn)) {
		add("turn "+name, store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
			tn := textTurn("bad")
			mutate(&tn)
			return r.AppendTurns(f.B, 2, textTurn("fine"), tn)
		})
	}
	badTurn("action not UTF-8", func(t *store.Turn) { t.Action = "ok \xff\xfe" })
	badTurn("observation with a lone surrogate", func(t *store.Turn) { t.Observation = "\xed\xa0\x80" })
	badTurn("fewer logprobs than tokens", func(t *store.Turn) { t.ActionLogprobs = t.ActionLogprobs[:1] })
	badTurn("more logprobs than tokens", func(t *store.Turn) { t.ActionLogprobs = append(t.ActionLogprobs, -1) })
	for name, v := range map[string]float32{"NaN": float32(nan), "+Inf": float32(inf), "-Inf": float32(-inf), "positive": 0.5} {
		badTurn("logprob "+name, func(t *store.Turn) { t.ActionLogprobs[1] = v })
	}
	add("group prompt not UTF-8", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
		_, err := r.OpenGroup(store.GroupSpec{Step: 1, Task: "t", Prompt: "\xc3"})
		return err
	})
	add("group meta not UTF-8", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
		_, err := r.OpenGroup(store.GroupSpec{Step: 1, Task: "t", Meta: map[string]string{"k": "\xff"}})
		return err
	})
	add("node worker not UTF-8", store.ErrInvalid, addNode(store.NodeSpec{Ordinal: 7, Worker: "w\xff"}))
	add("fail a pruned node", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error { return r.FailNode(f.P, "boom") })
	add("failure reason not UTF-8", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error { return r.FailNode(f.B, "\xff") })
	add("reward of an expanded node", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error { return r.SetReward(f.A, 1) })
	for name, v := range map[string]float64{"1.5": 1.5, "-0.01": -0.01, "NaN": nan, "+Inf": inf, "1+eps": math.Nextafter(1, 2)} {
		add("score "+name, store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
			return r.Score(f.B, store.Score{Interval: 1, Turn: 2, Value: v})
		})
	}
	add("score of a pruned node", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		return r.Score(f.P, store.Score{Interval: 1, Value: 0.5})
	})
	add("score of an unknown node", store.ErrNotFound, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
		return r.Score(424242, store.Score{Value: 0.5})
	})
	add("routing action unknown", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		return r.Route(f.B, store.Decision{Action: "explode"})
	})
	add("routing a completed node", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		return r.Route(f.C, store.Decision{Action: store.ActionSurvive})
	})
	add("routing with NaN score", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		return r.Route(f.B, store.Decision{Action: store.ActionSurvive, Score: nan})
	})

	// Status lifecycle.
	for _, c := range []struct {
		name string
		node func(fixture) uint64
		to   store.NodeStatus
	}{
		{"pruned→active", func(f fixture) uint64 { return f.P }, store.NodeActive},
		{"completed→pruned", func(f fixture) uint64 { return f.C }, store.NodePruned},
		{"expanded→active", func(f fixture) uint64 { return f.A }, store.NodeActive},
		{"active→active", func(f fixture) uint64 { return f.B }, store.NodeActive},
		{"failed→completed", func(f fixture) uint64 { return f.F }, store.NodeCompleted},
		{"active→unknown", func(f fixture) uint64 { return f.B }, "sleeping"},
	} {
		add("status "+c.name, store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
			return r.SetNodeStatus(c.node(f), c.to)
		})
	}

	// Turns.
	add("turns to a completed node", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		return r.AppendTurns(f.C, 2, textTurn("late"))
	})
	add("turns to an expanded node", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		return r.AppendTurns(f.A, 3, textTurn("late"))
	})
	add("turn index gap", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		return r.AppendTurns(f.B, 3, textTurn("gap")) // B has 2 turns: index 2 is next
	})
	add("negative turn index", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		return r.AppendTurns(f.B, -1, textTurn("neg"))
	})
	add("turns to an unknown node", store.ErrNotFound, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
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
	add("encoded turns to a completed node", store.ErrInvalid, encoded(func(f fixture) uint64 { return f.C }, 2))
	add("encoded turns to an expanded node", store.ErrInvalid, encoded(func(f fixture) uint64 { return f.A }, 3))
	add("encoded turn index gap", store.ErrInvalid, encoded(func(f fixture) uint64 { return f.B }, 3))
	add("negative encoded turn index", store.ErrInvalid, encoded(func(f fixture) uint64 { return f.B }, -1))
	add("encoded turns to an unknown node", store.ErrNotFound, encoded(func(fixture) uint64 { return 31337 }, 0))

	// Advantages.
	adv := func(leaf func(fixture) uint64, group func(fixture) uint64, mut func(*store.Advantage)) func(*store.Tx, *store.RunTx, fixture) error {
		return func(_ *store.Tx, r *store.RunTx, f fixture) error {
			a := store.Advantage{Step: fixtureStep, Group: group(f), Leaf: leaf(f), Outcome: 1, Total: 1, Mean: 0.5, Std: 0.5, Advantage: 1}
			if mut != nil {
				mut(&a)
			}
			return r.PutAdvantage(a)
		}
	}
	g1 := func(f fixture) uint64 { return f.G1.ID }
	add("advantage of an expanded node", store.ErrInvalid, adv(func(f fixture) uint64 { return f.A }, g1, nil))
	add("advantage of an active node", store.ErrInvalid, adv(func(f fixture) uint64 { return f.B }, g1, nil))
	add("advantage of a failed node", store.ErrInvalid, adv(func(f fixture) uint64 { return f.F }, g1, nil))
	add("advantage for a node of another group", store.ErrInvalid, adv(func(f fixture) uint64 { return f.C }, func(f fixture) uint64 { return f.G2.ID }, nil))
	add("advantage for an unknown leaf", store.ErrNotFound, adv(func(fixture) uint64 { return 5555 }, g1, nil))
	add("advantage for an unknown group", store.ErrNotFound, adv(func(f fixture) uint64 { return f.C }, func(fixture) uint64 { return 66 }, nil))
	add("advantage NaN", store.ErrInvalid, adv(func(f fixture) uint64 { return f.C }, g1, func(a *store.Advantage) { a.Advantage = nan }))
	add("advantage negative std", store.ErrInvalid, adv(func(f fixture) uint64 { return f.C }, g1, func(a *store.Advantage) { a.Std = -1 }))

	// Rubrics.
	add("rubric retired→public", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		_, err := r.MoveRubric(f.RRetired, store.RubricMove{To: store.PoolPublic})
		return err
	})
	add("rubric public→candidate", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		_, err := r.MoveRubric(f.RPublic, store.RubricMove{To: store.PoolCandidate})
		return err
	})
	add("rubric merged into a non-public rubric", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		_, err := r.MoveRubric(f.RCand1, store.RubricMove{To: store.PoolMerged, MergedInto: f.RCand2})
		return err
	})
	add("rubric merged into a missing rubric", store.ErrNotFound, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		_, err := r.MoveRubric(f.RCand1, store.RubricMove{To: store.PoolMerged, MergedInto: 999})
		return err
	})
	add("rubric to an unknown pool", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		_, err := r.MoveRubric(f.RCand1, store.RubricMove{To: "limbo"})
		return err
	})
	add("move of an unknown rubric", store.ErrNotFound, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
		_, err := r.MoveRubric(999, store.RubricMove{To: store.PoolRetired})
		return err
	})
	add("rubric with an existing id", store.ErrExists, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		_, err := r.PutRubric(store.Rubric{ID: f.RPublic, Pool: store.PoolCandidate})
		return err
	})
	add("rubric in an unknown pool", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
		_, err := r.PutRubric(store.Rubric{Pool: "limbo"})
		return err
	})
	add("rubric with NaN usage sum", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
		_, err := r.PutRubric(store.Rubric{Pool: store.PoolCandidate, Usage: store.RubricUsage{SumXY: nan}})
		return err
	})
	add("rubric update changing the pool", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, f fixture) error {
		rb, err := r.Rubric(f.RCand1)
		if err != nil {
			return err
		}
		rb.Pool = store.PoolPublic
		return r.UpdateRubric(rb)
	})

	// Checkpoints.
	for name, step := range map[string]uint64{"equal to LastStep": 2, "before LastStep": 1} {
		add("checkpoint step "+name, store.ErrStepCompleted, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
			return r.PutCheckpoint(store.Checkpoint{Step: step, Inline: []byte("s")})
		})
	}
	add("checkpoint step zero", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
		return r.PutCheckpoint(store.Checkpoint{Step: 0, Inline: []byte("s")})
	})
	add("checkpoint with neither inline nor URI", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
		return r.PutCheckpoint(store.Checkpoint{Step: 3, Hash: "sha256:00"})
	})
	add("checkpoint completing a step with open groups", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
		return r.PutCheckpoint(store.Checkpoint{Step: fixtureStep, URI: "file:///w3"})
	})
	add("checkpoint past a step with open groups", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
		return r.PutCheckpoint(store.Checkpoint{Step: fixtureStep + 5, URI: "file:///w8"})
	})

	// Events.
	add("event with an empty kind", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
		_, err := r.AppendEvent("", 0, 0, 0, 0, nil)
		return err
	})
	add("event payload msgpack cannot encode", store.ErrInvalid, func(_ *store.Tx, r *store.RunTx, _ fixture) error {
		_, err := r.AppendEvent("x", 0, 0, 0, 0, make(chan int))
		return err
	})
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
	sentinels := []error{store.ErrInvalid, store.ErrNotFound, store.ErrExists, store.ErrCorrupt, store.ErrReadOnly, store.ErrTxDone}

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
		if err := r.Score(f.B, store.Score{Interval: 1, Value: 1}); err != nil {
			return err
		}
		if err := r.SetNodeStatus(f.F, store.NodeActive); err != nil {
			return err
		}
		_, err := r.MoveRubric(f.RCand1, store.RubricMove{To: store.PoolMerged, MergedInto: f.RPublic})
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
	err := db.Update(func(tx *store.Tx) error {
		r, err := tx.Run(f.Run)
		if err != nil {
			return err
		}
		if err := r.AppendTurns(f.B, 2, textTurn("ok")); err != nil {
			return err
		}
		return mine
	})
	if err != mine {
		t.Errorf("Update returned %v, want the function's own error", err)
	}
	err = db.Update(func(tx *store.Tx) error {
		r, err := tx.Run(f.Run)
		if err != nil {
			return err
		}
		_ = r.AppendTurns(f.B, 5, textTurn("gap"))                    // fails
		if err := r.AppendTurns(f.B, 2, textTurn("ok")); err != nil { // fine on its own
			t.Errorf("corrected call: %v", err)
		}
		return nil
	})
	if !errors.Is(err, store.ErrInvalid) {
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
