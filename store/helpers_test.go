package store_test

// Shared fixtures of the store's tests: a small but complete run (every
// record type, every node status), a dump of everything a run holds so two
// states can be compared with one DeepEqual, and file-level helpers.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	bolt "go.etcd.io/bbolt"
)

// update runs fn in db.Update and fails the test on error.
func update(tb testing.TB, db *store.DB, fn func(*store.Tx) error) {
	tb.Helper()
	if err := db.Update(fn); err != nil {
		tb.Fatalf("update: %v", err)
	}
}

// view runs fn in db.View and fails the test on error.
func view(tb testing.TB, db *store.DB, fn func(*store.Tx) error) {
	tb.Helper()
	if err := db.View(fn); err != nil {
		tb.Fatalf("view: %v", err)
	}
}

// inRun runs fn on run id inside a transaction of the given kind.
func inRun(tb testing.TB, db *store.DB, write bool, id string, fn func(*store.RunTx) error) {
	tb.Helper()
	do := db.ViewRun
	if write {
		do = db.UpdateRun
	}
	if err := do(id, fn); err != nil {
		tb.Fatalf("in run %s: %v", id, err)
	}
}

// fileDigest is the sha256 of the file at path, hex.
func fileDigest(tb testing.TB, path string) string {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		tb.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// copyFile copies src to a new file dst.
func copyFile(tb testing.TB, src, dst string) {
	tb.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		tb.Fatal(err)
	}
}

// syncOptions are test options with fsync on: the bytes on disk are the
// committed state when Update returns.
func syncOptions() *store.Options {
	o := storetest.Options()
	o.NoSync = false
	return o
}

// textTurn is a small turn whose fields all derive from label, so a
// trajectory can be checked by its actions alone.
func textTurn(label string) model.Turn {
	n := uint32(len(label))
	return model.Turn{
		Action:            "act " + label,
		ActionTokens:      []uint32{n, store.MaxTokenID, 7},
		ActionLogprobs:    []float32{-0.25, -math.MaxFloat32, -float32(n)},
		Observation:       "obs " + label,
		ObservationTokens: []uint32{1, 2, 3, n},
		Reward:            float64(n) / 10,
		Done:              len(label)%2 == 0,
	}
}

// textTurns makes count turns labelled prefix0, prefix1, ...
func textTurns(prefix string, count int) []model.Turn {
	out := make([]model.Turn, count)
	for i := range out {
		out[i] = textTurn(fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

// fixture names the records buildFixture writes.
type fixture struct {
	Run string
	G1  model.Group // step 1: A (expanded) → B (active); roots P (pruned), C (completed), F (failed)
	G2  model.Group // step 1: root X (active)

	A, B, P, C, F, X uint64

	RPublic, RRetired, RCand1, RCand2 uint64
	LastStep                          uint64
}

// buildFixture writes a run holding every record type in one transaction:
//
//	g1: A(3 turns, expanded) ── B(fork 2, 2 turns, active)
//	    P(1 turn, pruned, reward 0)  C(2 turns, completed, reward 1)  F(failed)
//	g2: X(1 turn, active)
//
// plus advantages for P and C, rubrics in every pool but merged, checkpoints
// for steps 1 (inline) and 2 (URI), and one custom event.
// fixtureStep is the step of the fixture's groups: after the two completed
// steps its checkpoints record, as a trainer's open groups always are.
const fixtureStep = 3

func buildFixture(tb testing.TB, db *store.DB) fixture {
	tb.Helper()
	f := fixture{Run: "r1"}
	update(tb, db, func(tx *store.Tx) error {
		r, err := tx.CreateRun(f.Run, []byte(`{"b0":4,"k":5}`), map[string]string{"owner": "test"})
		if err != nil {
			return err
		}
		if f.G1, err = r.OpenGroup(store.GroupSpec{Step: fixtureStep, Task: "t1", Prompt: "p1", Gold: "gold", Meta: map[string]string{"split": "train"}}); err != nil {
			return err
		}
		if f.G2, err = r.OpenGroup(store.GroupSpec{Step: fixtureStep, Task: "t2", Prompt: "p2"}); err != nil {
			return err
		}
		add := func(g model.Group, parent uint64, fork, ordinal int) (uint64, error) {
			n, err := r.AddNode(store.NodeSpec{Step: g.Step, Group: g.ID, Parent: parent, Fork: fork, Ordinal: ordinal, Worker: "w0", EnvState: []byte{byte(ordinal)}})
			return n.ID, err
		}
		steps := []func() error{
			func() (err error) { f.A, err = add(f.G1, 0, 0, 0); return },
			func() error { return r.AppendTurns(f.A, 0, textTurns("a", 3)...) },
			func() error { return r.Score(f.A, model.Score{Interval: 0, Turn: 3, Value: 0.75}) },
			func() error {
				return r.Route(f.A, model.Decision{Interval: 0, Action: model.ActionExpand, Score: 0.75, Reference: 0.75, Delta: 0.5, Rule: "max", Children: 1})
			},
			func() (err error) { f.B, err = add(f.G1, f.A, 2, 0); return },
			func() error { return r.AppendTurns(f.B, 0, textTurns("b", 2)...) },
			func() (err error) { f.P, err = add(f.G1, 0, 0, 1); return },
			func() error { return r.AppendTurns(f.P, 0, textTurn("p0")) },
			func() error { return r.Score(f.P, model.Score{Interval: 0, Turn: 1, Value: 0.1}) },
			func() error {
				return r.Route(f.P, model.Decision{Interval: 0, Action: model.ActionPrune, Score: 0.1, Reference: 0.75, Delta: 0.5, Rule: "max"})
			},
			func() error { return r.SetReward(f.P, 0) },
			func() (err error) { f.C, err = add(f.G1, 0, 0, 2); return },
			func() error { return r.AppendTurns(f.C, 0, textTurns("c", 2)...) },
			func() error { return r.SetNodeStatus(f.C, model.NodeCompleted) },
			func() error { return r.SetReward(f.C, 1) },
			func() (err error) { f.F, err = add(f.G1, 0, 0, 3); return },
			func() error { return r.SetNodeStatus(f.F, model.NodeFailed) },
			func() (err error) { f.X, err = add(f.G2, 0, 0, 0); return },
			func() error { return r.AppendTurns(f.X, 0, textTurn("x0")) },
			func() error {
				return r.PutAdvantage(model.Advantage{Step: fixtureStep, Group: f.G1.ID, Leaf: f.P, Outcome: 0, Total: 0, Mean: 0.5, Std: 0.5, Advantage: -1, Rubrics: []uint64{1}})
			},
			func() error {
				return r.PutAdvantage(model.Advantage{Step: fixtureStep, Group: f.G1.ID, Leaf: f.C, Outcome: 1, Total: 1, Mean: 0.5, Std: 0.5, Advantage: 1, Rubrics: []uint64{1}})
			},
			func() error {
				rb, err := r.PutRubric(model.Rubric{Pool: model.PoolCandidate, Text: "cites the file it edits", Origin: model.RubricOrigin{Step: 1, Group: f.G1.ID, Anchors: []uint64{f.C, f.P}}, Support: 1, Variance: 0.2, Rho: 0.5, CreatedStep: 1})
				if err != nil {
					return err
				}
				f.RPublic = rb.ID
				_, err = r.MoveRubric(rb.ID, store.RubricMove{To: model.PoolPublic, Step: 1})
				return err
			},
			func() error {
				rb, err := r.PutRubric(model.Rubric{Pool: model.PoolPublic, Text: "runs the tests", CreatedStep: 1})
				if err != nil {
					return err
				}
				f.RRetired = rb.ID
				_, err = r.MoveRubric(rb.ID, store.RubricMove{To: model.PoolRetired, Step: 2, Reason: "low variance"})
				return err
			},
			func() error {
				rb, err := r.PutRubric(model.Rubric{Pool: model.PoolCandidate, Text: "draft one", CreatedStep: 2})
				f.RCand1 = rb.ID
				return err
			},
			func() error {
				rb, err := r.PutRubric(model.Rubric{Pool: model.PoolCandidate, Text: "draft two", CreatedStep: 2})
				f.RCand2 = rb.ID
				return err
			},
			func() error {
				return r.PutCheckpoint(model.Checkpoint{Step: 1, Inline: []byte("policy-1"), Meta: map[string]string{"lr": "0.1"}})
			},
			func() error {
				return r.PutCheckpoint(model.Checkpoint{Step: 2, URI: "file:///ckpt/step-2.safetensors", Hash: "sha256:00ff"})
			},
			func() error {
				_, err := r.AppendEvent("test.note", 2, f.G1.ID, f.A, f.RPublic, map[string]any{"why": "fixture"})
				return err
			},
		}
		for i, step := range steps {
			if err := step(); err != nil {
				return fmt.Errorf("fixture step %d: %w", i, err)
			}
		}
		f.LastStep = 2
		return nil
	})
	return f
}

// runDump is everything a run holds, read through the public API.
type runDump struct {
	Info        model.Run
	Groups      []model.Group
	Nodes       []model.Node
	Turns       map[uint64][]model.Turn
	Paths       map[uint64][]model.Segment
	Traj        map[uint64][]model.PathTurn
	Children    map[uint64][]uint64
	Frontier    []uint64
	Advantages  []model.Advantage
	Rubrics     []model.Rubric
	Checkpoints []model.Checkpoint
	Events      []model.Event
	LastSeq     uint64
}

func dumpRun(tb testing.TB, db *store.DB, id string) runDump {
	tb.Helper()
	d := runDump{Turns: map[uint64][]model.Turn{}, Paths: map[uint64][]model.Segment{}, Traj: map[uint64][]model.PathTurn{}, Children: map[uint64][]uint64{}}
	inRun(tb, db, false, id, func(r *store.RunTx) (err error) {
		if d.Info, err = r.Info(); err != nil {
			return err
		}
		if d.Groups, err = r.Groups(0); err != nil {
			return err
		}
		for _, g := range d.Groups {
			nodes, err := r.GroupNodes(g)
			if err != nil {
				return err
			}
			d.Nodes = append(d.Nodes, nodes...)
		}
		for _, n := range d.Nodes {
			if d.Turns[n.ID], err = r.Turns(n.ID); err != nil {
				return err
			}
			if d.Paths[n.ID], err = r.Path(n.ID); err != nil {
				return err
			}
			if d.Traj[n.ID], err = r.Trajectory(n.ID); err != nil {
				return err
			}
			if d.Children[n.ID], err = r.Children(n.ID); err != nil {
				return err
			}
		}
		if d.Frontier, err = r.Frontier(); err != nil {
			return err
		}
		if d.Advantages, err = r.Advantages(0, 0); err != nil {
			return err
		}
		if d.Rubrics, err = r.Rubrics(""); err != nil {
			return err
		}
		for s := uint64(1); s <= d.Info.LastStep; s++ {
			c, err := r.Checkpoint(s)
			if err != nil {
				return err
			}
			d.Checkpoints = append(d.Checkpoints, c)
		}
		d.LastSeq = r.LastSeq()
		return r.Events(0, func(e model.Event) error { d.Events = append(d.Events, e); return nil })
	})
	return d
}

// tempPath is a fresh file path in t's temp dir.
func tempPath(tb testing.TB, name string) string {
	tb.Helper()
	return filepath.Join(tb.TempDir(), name)
}

// rawBucket is one of a run's sub-buckets as bbolt sees it (the layout of
// doc.go), for tests that inspect or damage the file below the API.
func rawBucket(tb testing.TB, tx *store.Tx, run, name string) *bolt.Bucket {
	tb.Helper()
	b := storetest.BoltTx(tx).Bucket([]byte("runs")).Bucket([]byte(run)).Bucket([]byte(name))
	if b == nil {
		tb.Fatalf("no bucket runs/%s/%s", run, name)
	}
	return b
}

// runWithRoot creates run "r" with one group at step 1 and one root branch
// in it: the smallest tree most single-purpose tests start from.
func runWithRoot(tx *store.Tx) (*store.RunTx, model.Node, error) {
	r, err := tx.CreateRun("r", nil, nil)
	if err != nil {
		return nil, model.Node{}, err
	}
	g, err := r.OpenGroup(store.GroupSpec{Step: 1})
	if err != nil {
		return nil, model.Node{}, err
	}
	n, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID})
	return r, n, err
}

// turnKeyOf is the key of a node's own turn in the turns bucket.
func turnKeyOf(tb testing.TB, db *store.DB, run string, node uint64, index int) []byte {
	tb.Helper()
	var k []byte
	view(tb, db, func(tx *store.Tx) error {
		r, err := tx.Run(run)
		if err != nil {
			return err
		}
		k, err = store.TurnKey(r, node, index)
		return err
	})
	return k
}
