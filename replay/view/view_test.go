package view_test

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay/internal/replaytest"
	"github.com/patrdb/patrdb/replay/view"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

func viewerRun(t *testing.T) *store.DB {
	t.Helper()
	db := storetest.Open(t)
	replaytest.BuildOneTx(t, db, replaytest.MediumSpec("m"))
	return db
}

func TestViewTrajectory(t *testing.T) {
	db := viewerRun(t)
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run("m")
		if err != nil {
			return err
		}
		checked, withScores := 0, 0
		return r.ForEachGroup(0, func(g model.Group) error {
			nodes, err := r.GroupNodes(g)
			if err != nil {
				return err
			}
			advs, err := r.Advantages(g.Step, g.ID)
			if err != nil {
				return err
			}
			for _, n := range nodes {
				v, err := view.ViewTrajectory(r, n.ID)
				if err != nil {
					return err
				}
				turns, err := r.Trajectory(n.ID)
				if err != nil {
					return err
				}
				segs, _ := r.Path(n.ID)
				if len(v.Turns) != len(turns) || v.Inherited != n.Base || v.Group.ID != g.ID || v.Group.Prompt != g.Prompt || len(v.Path) != len(segs) {
					t.Fatalf("node %d: view %d turns, %d inherited, group %d, %d path nodes; want %d, %d, %d, %d", n.ID, len(v.Turns), v.Inherited, v.Group.ID, len(v.Path), len(turns), n.Base, g.ID, len(segs))
				}
				for i, pt := range turns {
					vt := v.Turns[i]
					if vt.Node != pt.Node || vt.Action != pt.Action || vt.ActionTokenCount != len(pt.ActionTokens) || vt.ObservationTokenCount != len(pt.ObservationTokens) {
						t.Fatalf("node %d turn %d: %+v vs %+v", n.ID, i, vt, pt)
					}
					sum, low := 0.0, math.Inf(1)
					for _, x := range pt.ActionLogprobs {
						sum += float64(x)
						low = min(low, float64(x))
					}
					if len(pt.ActionLogprobs) > 0 && (math.Abs(*vt.MeanLogprob-sum/float64(len(pt.ActionLogprobs))) > 1e-9 || *vt.MinLogprob != low ||
						len(vt.LogprobStrip) != min(len(pt.ActionLogprobs), view.StripBins)) {
						t.Fatalf("node %d turn %d logprob figures %v %v %v", n.ID, i, *vt.MeanLogprob, *vt.MinLogprob, vt.LogprobStrip)
					}
				}
				// A score on the path was taken by the node that stores the
				// path's turn just before it: an ancestor's scores after
				// the fork belong to other branches.
				for _, s := range v.Scores {
					if s.Turn < 1 || s.Turn > len(turns) || turns[s.Turn-1].Node != s.Node {
						t.Fatalf("node %d: score %+v is not on its path", n.ID, s)
					}
				}
				if len(n.Scores) > 0 {
					withScores++
					if !slices.ContainsFunc(v.Scores, func(s view.PathScore) bool { return s.Node == n.ID }) {
						t.Fatalf("node %d: its own scores are missing", n.ID)
					}
				}
				i := slices.IndexFunc(advs, func(a model.Advantage) bool { return a.Leaf == n.ID })
				if (i >= 0) != (v.Advantage != nil) || i >= 0 && !reflect.DeepEqual(*v.Advantage, advs[i]) {
					t.Fatalf("node %d: advantage %+v, records %+v", n.ID, v.Advantage, advs)
				}
				checked++
			}
			if checked == 0 || withScores == 0 {
				t.Fatal("no scored node checked")
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestViewGroup(t *testing.T) {
	db := viewerRun(t)
	err := db.View(func(tx *store.Tx) error {
		r, _ := tx.Run("m")
		if _, err := view.ViewGroup(r, 1<<40); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("a group the run does not have: %v, want ErrNotFound", err)
		}
		return r.ForEachGroup(0, func(g model.Group) error {
			v, err := view.ViewGroup(r, g.ID)
			if err != nil {
				return err
			}
			nodes, _ := r.GroupNodes(g)
			advs, _ := r.Advantages(g.Step, g.ID)
			if len(v.Nodes) != len(nodes) || v.Summary.Nodes != len(nodes) {
				t.Fatalf("group %d: %d nodes, store has %d", g.ID, len(v.Nodes), len(nodes))
			}
			// Depth-first: a node comes after its parent and within the
			// parent's subtree; siblings by ordinal.
			pos := map[uint64]int{}
			leaves, withAdv := 0, 0
			sumDepth := 0
			for i, n := range v.Nodes {
				pos[n.ID] = i
				if n.Parent != 0 {
					p, ok := pos[n.Parent]
					if !ok {
						t.Fatalf("group %d: node %d before its parent %d", g.ID, n.ID, n.Parent)
					}
					for _, m := range v.Nodes[p+1 : i] {
						if m.Depth <= v.Nodes[p].Depth {
							t.Fatalf("group %d: node %d is not in its parent's subtree", g.ID, n.ID)
						}
						if m.Parent == n.Parent && m.Ordinal > n.Ordinal {
							t.Fatalf("group %d: siblings out of order", g.ID)
						}
					}
				}
				if n.Status.Leaf() {
					leaves++
				}
				if n.Advantage != nil {
					withAdv++
				}
			}
			for _, c := range v.Summary.DepthCounts {
				sumDepth += c
			}
			// The tree's size in turns: the turns stored (each node's own)
			// and the longest path (a node's whole path, root first).
			stored, longest, maxDepth := 0, 0, 0
			for _, n := range nodes {
				stored += n.Turns
				longest = max(longest, n.PathLen())
				maxDepth = max(maxDepth, n.Depth)
			}
			if v.Summary.TurnsStored != stored || v.Summary.MaxPath != longest || v.Summary.MaxDepth != maxDepth {
				t.Fatalf("group %d: turns stored %d, max path %d, max depth %d; want %d, %d, %d",
					g.ID, v.Summary.TurnsStored, v.Summary.MaxPath, v.Summary.MaxDepth, stored, longest, maxDepth)
			}
			if leaves != v.Summary.Leaves || withAdv != len(advs) || v.Summary.AdvantageRange.Count != len(advs) || sumDepth != len(nodes) {
				t.Fatalf("group %d: %d leaves (summary %d), %d advantages (records %d), depth counts %v", g.ID, leaves, v.Summary.Leaves, withAdv, len(advs), v.Summary.DepthCounts)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The env steps of all steps add up to the turn records in the file.
func TestEnvSteps(t *testing.T) {
	db := viewerRun(t)
	err := db.View(func(tx *store.Tx) error {
		r, _ := tx.Run("m")
		steps, err := view.EnvSteps(r)
		if err != nil {
			return err
		}
		buckets, err := r.BucketSizes()
		if err != nil {
			return err
		}
		turns := 0
		for _, b := range buckets {
			if b.Name == "turns" {
				turns = b.Keys
			}
		}
		total := 0
		for i, s := range steps {
			total += s.EnvSteps
			if s.Step != uint64(i+1) || s.EnvStepsTotal != total || s.EnvSteps == 0 {
				t.Fatalf("step row %d: %+v (running total %d)", i, s, total)
			}
		}
		if len(steps) != replaytest.MediumSpec("m").Steps || total != turns {
			t.Fatalf("%d steps, %d env steps; the file holds %d turns", len(steps), total, turns)
		}
		// Step by step, the figures are those of the records.
		walked := map[uint64]*view.StepEnv{}
		err = r.ForEachGroup(0, func(g model.Group) error {
			w := walked[g.Step]
			if w == nil {
				w = &view.StepEnv{Step: g.Step}
				walked[g.Step] = w
			}
			w.Groups++
			nodes, err := r.GroupNodes(g)
			w.Nodes += len(nodes)
			for _, n := range nodes {
				w.EnvSteps += n.Turns
			}
			return err
		})
		if err != nil {
			return err
		}
		for _, s := range steps {
			w := walked[s.Step]
			if w == nil || w.Groups != s.Groups || w.Nodes != s.Nodes || w.EnvSteps != s.EnvSteps {
				t.Errorf("step %d: %+v; the records say %+v", s.Step, s, w)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestRubricPages(t *testing.T) {
	db := viewerRun(t)
	err := db.View(func(tx *store.Tx) error {
		r, _ := tx.Run("m")
		all, _ := r.Rubrics("")
		inPlay := 0
		for _, rb := range all {
			if rb.Pool == model.PoolPublic || rb.Pool == model.PoolCandidate {
				inPlay++
			}
		}
		// Pages of 2 cover the default selection once each, public first.
		var seen []model.Rubric
		for off := 0; ; off += 2 {
			p, err := view.Rubrics(r, view.RubricQuery{Offset: off, Limit: 2, Sort: "rho"})
			if err != nil {
				return err
			}
			if p.Total != inPlay {
				t.Fatalf("total %d, want %d", p.Total, inPlay)
			}
			if len(p.Rubrics) == 0 {
				break
			}
			seen = append(seen, p.Rubrics...)
		}
		if len(seen) != inPlay || inPlay == 0 {
			t.Fatalf("pages hold %d rubrics, want %d", len(seen), inPlay)
		}
		for i := 1; i < len(seen); i++ {
			a, b := seen[i-1], seen[i]
			if a.ID == b.ID || a.Pool == model.PoolCandidate && b.Pool == model.PoolPublic || a.Pool == b.Pool && a.Rho < b.Rho {
				t.Fatalf("order: %d (%s, rho %g) before %d (%s, rho %g)", a.ID, a.Pool, a.Rho, b.ID, b.Pool, b.Rho)
			}
		}
		p, err := view.Rubrics(r, view.RubricQuery{Pools: []model.RubricPool{model.PoolMerged, model.PoolRetired, model.PoolCandidate, model.PoolPublic}, Text: "DRAFT 2."})
		if err != nil {
			return err
		}
		for _, rb := range p.Rubrics {
			if !strings.Contains(rb.Text, "draft 2.") {
				t.Fatalf("filter let %q through", rb.Text)
			}
		}
		if p.Total == 0 || p.Pools[model.PoolMerged] == 0 {
			t.Fatalf("filtered page %+v", p)
		}
		// No limit is a page of 50; a page past the hits, or of none, is an
		// empty list (JSON []), not null.
		if p, err = view.Rubrics(r, view.RubricQuery{}); err != nil {
			return err
		}
		if p.Limit != 50 {
			t.Errorf("default page: limit %d, want 50", p.Limit)
		}
		for _, q := range []view.RubricQuery{{Text: "no rubric says this"}, {Offset: inPlay}} {
			p, err := view.Rubrics(r, q)
			if err != nil {
				return err
			}
			if b, _ := json.Marshal(p.Rubrics); string(b) != "[]" {
				t.Errorf("query %+v: rubrics %s, want []", q, b)
			}
		}
		for _, q := range []view.RubricQuery{{Limit: view.MaxRubricPage + 1}, {Offset: -1}, {Pools: []model.RubricPool{"all"}}, {Sort: "text"}} {
			if _, err := view.Rubrics(r, q); !errors.Is(err, view.ErrViewQuery) {
				t.Errorf("query %+v: %v, want ErrViewQuery", q, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
