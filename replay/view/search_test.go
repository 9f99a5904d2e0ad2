package view_test

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay/internal/replaytest"
	"github.com/patrdb/patrdb/replay/view"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// The search finds exactly the nodes a walk of every trajectory finds:
// those whose prompt or path (inherited prefix included) holds the text,
// within the status and reward filters.
func TestSearchMatchesEveryTrajectory(t *testing.T) {
	db := viewerRun(t)
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run("m")
		if err != nil {
			return err
		}
		type node struct {
			n    model.Node
			task string
			text string
		}
		var all []node
		err = r.ForEachGroup(0, func(g model.Group) error {
			nodes, err := r.GroupNodes(g)
			for _, n := range nodes {
				path, err := r.Trajectory(n.ID)
				if err != nil {
					return err
				}
				var b strings.Builder
				b.WriteString(g.Prompt + "\n")
				for _, t := range path {
					b.WriteString(t.Action + "\n" + t.Observation + "\n")
				}
				all = append(all, node{n, g.Task, strings.ToLower(b.String())})
			}
			return err
		})
		if err != nil {
			return err
		}
		// A word some paths hold and others not: one turn's action.
		var word string
		for _, x := range all {
			if x.n.Depth > 0 && x.n.Status == model.NodeCompleted {
				turns, _ := r.Turns(x.n.ID)
				if len(turns) > 0 {
					word = strings.ToUpper(turns[0].Action) // case is ignored
					break
				}
			}
		}
		one := 0.5
		for _, q := range []view.NodeQuery{
			{Text: word, Limit: view.MaxSearchLimit},
			{Text: word, Statuses: []model.NodeStatus{model.NodeCompleted}, Limit: view.MaxSearchLimit},
			{Statuses: []model.NodeStatus{model.NodePruned, model.NodeTruncated}, Limit: view.MaxSearchLimit},
			{LeavesOnly: true, MinReward: &one, Limit: view.MaxSearchLimit},
		} {
			res, err := view.Search(r, q)
			if err != nil {
				return err
			}
			var want []uint64
			for _, x := range all {
				if (q.Text == "" || strings.Contains(x.text, strings.ToLower(q.Text))) &&
					(len(q.Statuses) == 0 || slices.Contains(q.Statuses, x.n.Status)) &&
					(!q.LeavesOnly || x.n.Status.Leaf()) &&
					(q.MinReward == nil || x.n.HasReward && x.n.Reward >= *q.MinReward) {
					want = append(want, x.n.ID)
				}
			}
			task := map[uint64]string{}
			for _, x := range all {
				task[x.n.ID] = x.task
			}
			var got []uint64
			for _, h := range res.Hits {
				got = append(got, h.Node)
				if h.Task != task[h.Node] || (q.Text == "" && h.MatchTurn != -2) {
					t.Errorf("hit %d: task %q, match turn %d; want %q and -2 without text", h.Node, h.Task, h.MatchTurn, task[h.Node])
				}
				if q.Text != "" && !strings.Contains(strings.ToLower(h.MatchSnippet), strings.ToLower(q.Text)) {
					t.Errorf("hit %d: snippet %q lacks %q", h.Node, h.MatchSnippet, q.Text)
				}
			}
			slices.Sort(got)
			slices.Sort(want)
			if len(want) == 0 || len(want) == len(all) || !slices.Equal(got, want) || res.More || res.Scanned != len(all) {
				t.Errorf("query %+v: %d hits %v, a walk finds %d %v (of %d nodes, %d scanned)", q, len(got), got, len(want), want, len(all), res.Scanned)
			}
		}
		// The limit stops the search and says so; bad queries are refused.
		res, err := view.Search(r, view.NodeQuery{Limit: 3})
		if err != nil || len(res.Hits) != 3 || !res.More || res.Hits[0].Step < res.Hits[2].Step {
			t.Errorf("limit 3: %d hits, more %v, %v", len(res.Hits), res.More, err)
		}
		lo, hi, nan, inf := 1.0, 0.0, math.NaN(), math.Inf(1)
		for _, q := range []view.NodeQuery{{Statuses: []model.NodeStatus{"lost"}}, {MinReward: &lo, MaxReward: &hi},
			{MinReward: &nan}, {MaxScore: &inf}, {MinAdvantage: &nan}} {
			if _, err := view.Search(r, q); !errors.Is(err, view.ErrViewQuery) {
				t.Errorf("query %+v: %v, want ErrViewQuery", q, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Branches of one group part where their paths stop sharing stored turns:
// each branch shows its own turns from there, the turns before are the
// same stored turns in both.
func TestViewBranchesPartAtTheFork(t *testing.T) {
	db := viewerRun(t)
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run("m")
		if err != nil {
			return err
		}
		checked := 0
		err = r.ForEachGroup(0, func(g model.Group) error {
			nodes, err := r.GroupNodes(g)
			if err != nil {
				return err
			}
			var leaves []model.Node
			for _, n := range nodes {
				if n.Status.Leaf() && n.Depth > 0 {
					leaves = append(leaves, n)
				}
			}
			if len(leaves) < 2 {
				return nil
			}
			a, b := leaves[0], leaves[1]
			v, err := view.ViewBranches(r, []uint64{a.ID, b.ID})
			if err != nil {
				return err
			}
			ta, _ := r.Trajectory(a.ID)
			tb, _ := r.Trajectory(b.ID)
			k := 0
			for k < len(ta) && k < len(tb) && ta[k].Node == tb[k].Node && ta[k].Index == tb[k].Index {
				k++
			}
			if v.Fork != k || len(v.Branches) != 2 || len(v.Branches[0].Turns) != len(ta)-k || len(v.Branches[1].Turns) != len(tb)-k {
				t.Errorf("group %d: fork %d (walk: %d), %d and %d turns past it", g.ID, v.Fork, k, len(v.Branches[0].Turns), len(v.Branches[1].Turns))
			}
			if len(v.Branches[0].Turns) > 0 && len(v.Branches[1].Turns) > 0 && v.Branches[0].Turns[0].Node == v.Branches[1].Turns[0].Node &&
				v.Branches[0].Turns[0].Index == v.Branches[1].Turns[0].Index {
				t.Errorf("group %d: the branches' first turns past the fork are one stored turn", g.ID)
			}
			for _, br := range v.Branches {
				for _, iv := range br.Intervals {
					if iv.Turn < v.Fork {
						t.Errorf("node %d: a score at turn %d, before the fork %d", br.Node, iv.Turn, v.Fork)
					}
				}
			}
			checked++
			return nil
		})
		if err != nil || checked == 0 {
			t.Fatalf("%d groups checked: %v", checked, err)
		}
		// One group only; 2 to MaxBranches nodes.
		var first, other uint64
		_ = r.ForEachGroup(0, func(g model.Group) error {
			if first == 0 {
				first = g.Roots[0]
			} else if other == 0 {
				other = g.Roots[0]
			}
			return nil
		})
		for _, ids := range [][]uint64{{first}, {first, other}, {first, first}} {
			if _, err := view.ViewBranches(r, ids); !errors.Is(err, view.ErrViewQuery) {
				t.Errorf("branches %v: %v, want ErrViewQuery", ids, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A policy-version query keeps the nodes whose version range holds the
// version, both ends included; a text match's snippet is cut at
// character boundaries, so text in any script comes back as valid UTF-8.
func TestSearchVersionsAndSnippets(t *testing.T) {
	db := storetest.Open(t)
	long := strings.Repeat("é", 100) + " needle " + strings.Repeat("語", 100)
	var ids []uint64
	err := db.Update(func(tx *store.Tx) error {
		r, err := tx.CreateRun("v", nil, nil)
		if err != nil {
			return err
		}
		g, err := r.OpenGroup(store.GroupSpec{Step: 1, Task: "t", Prompt: "p"})
		if err != nil {
			return err
		}
		for i, versions := range [][]uint64{{2, 4}, {4, 5}, {5, 6}, {1, 3}} {
			n, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Ordinal: i})
			if err != nil {
				return err
			}
			ids = append(ids, n.ID)
			for j, v := range versions {
				if err := r.AppendTurns(n.ID, j, model.Turn{Action: "a", Observation: long, PolicyVersion: v}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *store.Tx) error {
		r, err := tx.Run("v")
		if err != nil {
			return err
		}
		for version, want := range map[uint64][]uint64{4: {ids[0], ids[1]}, 3: {ids[0], ids[3]}, 6: {ids[2]}, 7: nil} {
			res, err := view.Search(r, view.NodeQuery{PolicyVersion: version})
			if err != nil {
				return err
			}
			var got []uint64
			for _, h := range res.Hits {
				got = append(got, h.Node)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("policy version %d: nodes %v, want %v", version, got, want)
			}
		}
		res, err := view.Search(r, view.NodeQuery{Text: "NEEDLE"})
		if err != nil {
			return err
		}
		for _, h := range res.Hits {
			if !utf8.ValidString(h.MatchSnippet) || !strings.Contains(h.MatchSnippet, "needle") {
				t.Errorf("node %d: snippet %q", h.Node, h.MatchSnippet)
			}
		}
		if len(res.Hits) != len(ids) {
			t.Errorf("text search: %d hits, want %d", len(res.Hits), len(ids))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Reward bounds include their ends: a node whose reward equals both the
// minimum and the maximum asked for is found. A snippet that starts one
// byte into a two-byte character starts at the character instead. Text in
// the run's first node (id 1) is found in its child's inherited prefix.
func TestSearchBoundEndsAndSnippetStart(t *testing.T) {
	db := storetest.Open(t)
	obs := "é" + strings.Repeat("a", 59) + "Needle" // the text at byte 61: 60 bytes before it reach back to byte 1
	var id uint64
	var child model.Node
	err := db.Update(func(tx *store.Tx) error {
		r, _, n, err := replaytest.OneNode(tx, "b")
		if err != nil {
			return err
		}
		id = n.ID
		if err := r.AppendTurns(n.ID, 0, model.Turn{Action: "a", Observation: obs}); err != nil {
			return err
		}
		if err := r.SetReward(n.ID, 0.5); err != nil {
			return err
		}
		if child, err = r.AddNode(store.NodeSpec{Step: 1, Group: n.Group, Parent: n.ID, Fork: 1}); err != nil {
			return err
		}
		return r.AppendTurns(child.ID, 0, model.Turn{Action: "b", Observation: "o", Done: true})
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *store.Tx) error {
		r, err := tx.Run("b")
		if err != nil {
			return err
		}
		half := 0.5
		res, err := view.Search(r, view.NodeQuery{MinReward: &half, MaxReward: &half})
		if err != nil {
			return err
		}
		if len(res.Hits) != 1 || res.Hits[0].Node != id {
			t.Errorf("reward in [0.5, 0.5]: %+v, want node %d", res.Hits, id)
		}
		res, err = view.Search(r, view.NodeQuery{Text: "needle"})
		if err != nil {
			return err
		}
		if len(res.Hits) != 2 || res.Hits[0].MatchSnippet != obs || res.Hits[1].Node != child.ID || res.Hits[1].MatchTurn != 0 || res.Hits[1].MatchSnippet != obs {
			t.Errorf("text search: %+v, want nodes %d and %d, the text at turn 0, snippet %q", res.Hits, id, child.ID, obs)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A search's limit is at most MaxSearchLimit, however many are asked for,
// and a limit of 1 is one hit.
func TestSearchLimitIsCapped(t *testing.T) {
	db := storetest.Open(t)
	replaytest.FlatRun(t, db, "big", replaytest.FlatGroup{Step: 1, Leaves: view.MaxSearchLimit + 1, Tokens: 0})
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run("big")
		if err != nil {
			return err
		}
		res, err := view.Search(r, view.NodeQuery{Limit: 2 * view.MaxSearchLimit})
		if err != nil {
			return err
		}
		if len(res.Hits) != view.MaxSearchLimit || !res.More {
			t.Errorf("limit %d over %d nodes: %d hits, more %v; want %d and more", 2*view.MaxSearchLimit, view.MaxSearchLimit+1, len(res.Hits), res.More, view.MaxSearchLimit)
		}
		// A limit of 1 is one hit; text in the prompt is found there.
		res, err = view.Search(r, view.NodeQuery{Text: "P", Limit: 1})
		if err != nil {
			return err
		}
		if len(res.Hits) != 1 || !res.More || res.Hits[0].MatchTurn != -1 || res.Hits[0].MatchWhere != "prompt" || res.Hits[0].MatchSnippet != "p" {
			t.Errorf("limit 1, text of the prompt: %d hits (first %+v), more %v; want one hit in the prompt", len(res.Hits), res.Hits[:min(1, len(res.Hits))], res.More)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A snippet that would end one byte into a two-byte character ends after
// the character instead.
func TestSearchSnippetEndsAtACharacter(t *testing.T) {
	db := storetest.Open(t)
	obs := "needle" + strings.Repeat("a", 59) + "é" + "zzz" // 60 bytes after the text end inside é
	err := db.Update(func(tx *store.Tx) error {
		r, _, n, err := replaytest.OneNode(tx, "e")
		if err != nil {
			return err
		}
		return r.AppendTurns(n.ID, 0, model.Turn{Action: "a", Observation: obs})
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *store.Tx) error {
		r, err := tx.Run("e")
		if err != nil {
			return err
		}
		res, err := view.Search(r, view.NodeQuery{Text: "needle"})
		if err != nil {
			return err
		}
		if want := "needle" + strings.Repeat("a", 59) + "é…"; len(res.Hits) != 1 || res.Hits[0].MatchSnippet != want {
			t.Errorf("snippet: %+v, want %q", res.Hits, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
