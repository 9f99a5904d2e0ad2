package replay_test

import (
	"fmt"
	"reflect"
	"sort"
	"testing"

	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/store"
)

// snapshot reads the live store's records into a State, for comparison
// with what replay rebuilds from the log.
func snapshot(t testing.TB, r *store.RunTx) *replay.State {
	t.Helper()
	s := replay.NewState(r.ID())
	s.Seq = r.LastSeq()
	var err error
	if s.Info, err = r.Info(); err != nil {
		t.Fatal(err)
	}
	groups, err := r.Groups(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		s.Groups[g.ID] = g
		nodes, err := r.GroupNodes(g)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			s.Nodes[n.ID] = n
		}
	}
	rbs, err := r.Rubrics("")
	if err != nil {
		t.Fatal(err)
	}
	for _, rb := range rbs {
		s.Rubrics[rb.ID] = rb
	}
	advs, err := r.Advantages(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range advs {
		s.Advantages[replay.AdvKey{Step: a.Step, Group: a.Group, Leaf: a.Leaf}] = a
	}
	for step := uint64(1); ; step++ {
		c, err := r.Checkpoint(step)
		if err != nil || c.Step != step {
			break
		}
		s.Checkpoints[step] = c
	}
	return s
}

// liveExtras is what the State exposes through methods: the frontier and
// each node's children, read from the store.
type liveExtras struct {
	frontier []uint64
	children map[uint64][]uint64
	order    map[uint64][]uint64 // group → node ids in store.RunTx.GroupNodes order
}

func readExtras(t testing.TB, r *store.RunTx, s *replay.State) liveExtras {
	t.Helper()
	f, err := r.Frontier()
	if err != nil {
		t.Fatal(err)
	}
	ex := liveExtras{frontier: f, children: map[uint64][]uint64{}, order: map[uint64][]uint64{}}
	for _, g := range s.Groups {
		nodes, err := r.GroupNodes(g)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			ex.order[g.ID] = append(ex.order[g.ID], n.ID)
		}
	}
	for id := range s.Nodes {
		kids, err := r.Children(id)
		if err != nil {
			t.Fatal(err)
		}
		ex.children[id] = kids
	}
	return ex
}

// diffState reports how got (rebuilt) differs from want (live).
func diffState(got, want *replay.State, ex liveExtras) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if got.Seq != want.Seq {
		add("seq %d, want %d", got.Seq, want.Seq)
	}
	if !reflect.DeepEqual(got.Info, want.Info) {
		add("run record %+v, want %+v", got.Info, want.Info)
	}
	cmpMap(&out, "group", got.Groups, want.Groups)
	cmpMap(&out, "node", got.Nodes, want.Nodes)
	cmpMap(&out, "rubric", got.Rubrics, want.Rubrics)
	cmpMap(&out, "advantage", got.Advantages, want.Advantages)
	cmpMap(&out, "checkpoint", got.Checkpoints, want.Checkpoints)
	if f := got.Frontier(); !equalIDs(f, ex.frontier) {
		add("frontier %v, want %v", f, ex.frontier)
	}
	for id, want := range ex.children {
		if c := got.Children(id); !equalIDs(c, want) {
			add("children of %d: %v, want %v", id, c, want)
		}
	}
	// Each group's node order is the store's breadth-first one.
	for id, want := range ex.order {
		var ids []uint64
		for _, n := range got.GroupNodes(id) {
			ids = append(ids, n.ID)
		}
		if !reflect.DeepEqual(ids, want) {
			add("group %d nodes in order %v, want %v", id, ids, want)
		}
	}
	return out
}

func cmpMap[K comparable, V any](out *[]string, what string, got, want map[K]V) {
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			*out = append(*out, fmt.Sprintf("%s %v missing", what, k))
			continue
		}
		if !reflect.DeepEqual(g, w) {
			*out = append(*out, fmt.Sprintf("%s %v:\n  got  %+v\n  want %+v", what, k, g, w))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			*out = append(*out, fmt.Sprintf("%s %v should not exist yet", what, k))
		}
	}
}

func equalIDs(a, b []uint64) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	a, b = append([]uint64(nil), a...), append([]uint64(nil), b...)
	sort.Slice(a, func(i, j int) bool { return a[i] < a[j] })
	sort.Slice(b, func(i, j int) bool { return b[i] < b[j] })
	return reflect.DeepEqual(a, b)
}
