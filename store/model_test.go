package store_test

// Property-based state machine: random sequences of store
// operations — valid ones and deliberately invalid ones — run against an
// independent in-memory model of one run. After every action the store's
// records, turns, children, frontier, advantages, rubrics, trajectories and
// event log equal the model's and Check is clean; an invalid action returns
// its sentinel error and leaves every byte of every bucket as it was.
// Reopen and Compact (bbolt.Compact into a new file) must lose nothing,
// including the id sequences.
//
// Replay a failure with the seed rapid prints: go test -run TestModel -rapid.seed=N ./store/

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
	"pgregory.net/rapid"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

const modelRun = "m"

type modelNode struct {
	n     model.Node
	turns []model.Turn
	kids  []uint64
}

type modelMachine struct {
	tb   testing.TB
	path string
	opts *store.Options
	db   *store.DB

	groups    map[uint64]*model.Group
	nodes     map[uint64]*modelNode
	adv       map[[3]uint64]model.Advantage
	rubrics   map[uint64]model.Rubric
	nodeSeq   uint64
	turnSeq   uint64 // the run's turn sequence: new turns are numbered in append order
	groupSeq  uint64
	rubricSeq uint64
	events    []model.EventKind
	lastRec   any // the record the newest event's payload must equal; nil: not checked
	counts    map[string]int
}

func TestModel(t *testing.T) {
	counts := map[string]int{}
	defer func() {
		keys := slices.Sorted(maps.Keys(counts))
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s=%d", k, counts[k]))
		}
		t.Logf("model actions run: %s", strings.Join(parts, " "))
	}()
	rapid.Check(t, func(rt *rapid.T) {
		m := newModelMachine(t, rt)
		m.counts = counts
		defer func() { _ = m.db.Close() }()
		rt.Repeat(map[string]func(*rapid.T){
			"OpenGroup":    m.OpenGroup,
			"AddNode":      m.AddNode,
			"AppendTurns":  m.AppendTurns,
			"Score":        m.Score,
			"Route":        m.Route,
			"Complete":     m.Complete,
			"SetReward":    m.SetReward,
			"PutAdvantage": m.PutAdvantage,
			"CloseGroup":   m.CloseGroup,
			"PutRubric":    m.PutRubric,
			"MoveRubric":   m.MoveRubric,
			"Reopen":       m.Reopen,
			"Compact":      m.Compact,
			"":             m.Check,
		})
	})
}

func newModelMachine(t *testing.T, rt *rapid.T) *modelMachine {
	dir, err := os.MkdirTemp(t.TempDir(), "model-")
	if err != nil {
		rt.Fatal(err)
	}
	o := storetest.Options()
	// A tiny LRU evicts constantly, a big one serves everything, none
	// reads every node from its page.
	o.CacheNodes = rapid.SampledFrom([]int{store.NoCache, 3, 1024}).Draw(rt, "cache")
	o.PageSize = 4096
	m := &modelMachine{tb: t, path: filepath.Join(dir, "m.db"), opts: o,
		groups: map[uint64]*model.Group{}, nodes: map[uint64]*modelNode{},
		adv: map[[3]uint64]model.Advantage{}, rubrics: map[uint64]model.Rubric{}}
	if m.db, err = store.Open(m.path, o); err != nil {
		rt.Fatal(err)
	}
	if err := m.db.Update(func(tx *store.Tx) error {
		_, err := tx.CreateRun(modelRun, []byte(`{"model":true}`), map[string]string{"b": "2", "a": "1"})
		return err
	}); err != nil {
		rt.Fatal(err)
	}
	m.events = append(m.events, model.EvRunCreate)
	return m
}

// ---------------------------------------------------------------------------
// Running actions.

func (m *modelMachine) update(fn func(r *store.RunTx) error) error {
	return m.db.UpdateRun(modelRun, func(r *store.RunTx) error {
		return fn(r)
	})
}

// ok runs a valid action: it must succeed.
func (m *modelMachine) ok(t *rapid.T, what string, fn func(r *store.RunTx) error) {
	if err := m.update(fn); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	m.counts["valid"]++
}

// bad runs an invalid action: it must fail with want and change no byte.
func (m *modelMachine) bad(t *rapid.T, what string, want error, fn func(r *store.RunTx) error) {
	before := dumpDB(t, m.db)
	err := m.update(fn)
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
	if after := dumpDB(t, m.db); !bytes.Equal(before, after) {
		t.Fatalf("%s: failed with %v but changed the file", what, err)
	}
	m.lastRec = nil
	m.counts["invalid"]++
	m.counts["invalid:"+strings.TrimPrefix(fmt.Sprint(want), "patrdb: ")]++
}

// variant draws which input an action gets: 0, the valid one (and what
// shrinking goes to), three times in four; otherwise one of the n
// deliberately invalid inputs 1..n.
func variant(t *rapid.T, n int) int {
	if rapid.IntRange(0, 3).Draw(t, "misuse") < 3 {
		return 0
	}
	return rapid.IntRange(1, n).Draw(t, "variant")
}

func (m *modelMachine) event(kind model.EventKind, rec any) {
	m.events = append(m.events, kind)
	m.lastRec = rec
}

func (m *modelMachine) nodeIDs(keep func(*modelNode) bool) []uint64 {
	var ids []uint64
	for id, n := range m.nodes {
		if keep(n) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

func (m *modelMachine) pickNode(t *rapid.T, keep func(*modelNode) bool) *modelNode {
	ids := m.nodeIDs(keep)
	if len(ids) == 0 {
		t.Skip("no such node")
	}
	return m.nodes[rapid.SampledFrom(ids).Draw(t, "node")]
}

func (m *modelMachine) pickGroup(t *rapid.T, keep func(*model.Group) bool) *model.Group {
	var ids []uint64
	for id, g := range m.groups {
		if keep(g) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		t.Skip("no such group")
	}
	slices.Sort(ids)
	return m.groups[rapid.SampledFrom(ids).Draw(t, "group")]
}

// pickLive picks an active node three times in four: actions that need
// one then mostly succeed and trees grow; otherwise any node, which is
// usually a deliberate invalid call.
func (m *modelMachine) pickLive(t *rapid.T) *modelNode {
	if len(m.nodes) == 0 {
		t.Skip("no nodes") // before any draw: rapid then tries another action
	}
	if rapid.IntRange(0, 3).Draw(t, "anynode") < 3 && len(m.nodeIDs(isActive)) > 0 {
		return m.pickNode(t, isActive)
	}
	return m.pickNode(t, anyNode)
}

func isActive(n *modelNode) bool { return n.n.Status == model.NodeActive }
func anyNode(*modelNode) bool    { return true }

// ---------------------------------------------------------------------------
// Actions.

func (m *modelMachine) OpenGroup(t *rapid.T) {
	spec := store.GroupSpec{Step: rapid.Uint64Range(1, 3).Draw(t, "step"), Task: rapid.StringN(0, 8, -1).Draw(t, "task"),
		Prompt: rapid.String().Draw(t, "prompt"), Gold: rapid.StringN(0, 6, -1).Draw(t, "gold")}
	if rapid.Bool().Draw(t, "meta") {
		spec.Meta = map[string]string{"x": "1", "map": "4x4", "k": rapid.String().Draw(t, "metav")}
	}
	if variant(t, 1) == 1 {
		spec.Step = 0
		m.bad(t, "OpenGroup step 0", model.ErrInvalid, func(r *store.RunTx) error { _, err := r.OpenGroup(spec); return err })
		return
	}
	var got model.Group
	m.ok(t, "OpenGroup", func(r *store.RunTx) (err error) { got, err = r.OpenGroup(spec); return err })
	m.groupSeq++
	g := model.Group{ID: m.groupSeq, Step: spec.Step, Task: spec.Task, Prompt: spec.Prompt, Gold: spec.Gold,
		Status: model.GroupOpen, Meta: spec.Meta}
	if !reflect.DeepEqual(normGroup(got), normGroup(g)) {
		t.Fatalf("OpenGroup returned %+v, model %+v", got, g)
	}
	m.groups[g.ID] = &g
	m.event(model.EvGroupOpen, g)
}

func (m *modelMachine) AddNode(t *rapid.T) {
	g := m.pickGroup(t, func(*model.Group) bool { return true })
	if g.Status != model.GroupOpen && rapid.IntRange(0, 3).Draw(t, "closedok") < 3 {
		// Mostly grow open groups; a closed one is a deliberate misuse.
		for _, id := range slices.Sorted(maps.Keys(m.groups)) {
			if m.groups[id].Status == model.GroupOpen {
				g = m.groups[id]
			}
		}
	}
	spec := store.NodeSpec{Step: g.Step, Group: g.ID, Ordinal: rapid.IntRange(0, 3).Draw(t, "ordinal"),
		Worker: rapid.StringN(0, 4, -1).Draw(t, "worker"), Attempt: rapid.IntRange(0, 2).Draw(t, "attempt")}
	if rapid.Bool().Draw(t, "envstate") {
		spec.EnvState = rapid.SliceOfN(rapid.Byte(), 1, 8).Draw(t, "env")
	}
	var parent *modelNode
	var siblings []uint64
	inGroup := func(n *modelNode) bool { return n.n.Group == g.ID }
	if len(m.nodeIDs(inGroup)) > 0 && rapid.Bool().Draw(t, "child") {
		parent = m.pickNode(t, inGroup)
		spec.Parent = parent.n.ID
		spec.Fork = rapid.IntRange(0, parent.n.Turns).Draw(t, "fork")
		siblings = parent.kids
	} else {
		siblings = g.Roots
	}
	dup := false
	for _, s := range siblings {
		dup = dup || m.nodes[s].n.Ordinal == spec.Ordinal
	}
	parentOK := parent == nil || parent.n.Status == model.NodeActive || parent.n.Status == model.NodeExpanded
	var want error
	switch {
	case g.Status != model.GroupOpen:
		want = model.ErrInvalid
	case !parentOK:
		want = model.ErrInvalid
	case dup:
		want = model.ErrExists
	}
	if want == nil {
		// The input is valid as drawn; maybe break it on purpose.
		switch variant(t, 4) {
		case 1:
			spec.Group = g.ID + 1000
			want = model.ErrNotFound
		case 2:
			if parent == nil {
				spec.Fork = 1
			} else {
				spec.Fork = parent.n.Turns + 1
			}
			want = model.ErrInvalid
		case 3:
			spec.Parent = m.nodeSeq + 1
			want = model.ErrNotFound
		case 4:
			spec.Ordinal = -1
			want = model.ErrInvalid
		}
	}
	if want != nil {
		m.bad(t, fmt.Sprintf("AddNode %+v", spec), want, func(r *store.RunTx) error { _, err := r.AddNode(spec); return err })
		return
	}
	var got model.Node
	m.ok(t, "AddNode", func(r *store.RunTx) (err error) { got, err = r.AddNode(spec); return err })
	m.nodeSeq++
	n := model.Node{ID: m.nodeSeq, Step: g.Step, Group: g.ID, Parent: spec.Parent, Ordinal: spec.Ordinal, Fork: spec.Fork,
		Status: model.NodeActive, EnvState: spec.EnvState, Worker: spec.Worker, Attempt: spec.Attempt}
	if parent != nil {
		n.Base = parent.n.Base + spec.Fork
		n.Depth = parent.n.Depth + 1
		parent.kids = append(parent.kids, n.ID)
	} else {
		g.Roots = append(g.Roots, n.ID)
	}
	if !reflect.DeepEqual(normNode(got), normNode(n)) {
		t.Fatalf("AddNode returned %+v, model %+v", got, n)
	}
	m.nodes[n.ID] = &modelNode{n: n}
	m.event(model.EvNodeAdd, n)
}

// tokenID draws a token id the store accepts.
var tokenID = rapid.Uint32Range(0, store.MaxTokenID)

func genTurn(t *rapid.T, label string) model.Turn {
	na := rapid.IntRange(0, 5).Draw(t, label+"na")
	return model.Turn{
		Action:            rapid.StringN(0, 10, -1).Draw(t, label+"action"),
		ActionTokens:      rapid.SliceOfN(tokenID, na, na).Draw(t, label+"atok"),
		ActionLogprobs:    rapid.SliceOfN(rapid.Float32Range(-30, 0), na, na).Draw(t, label+"alp"),
		Observation:       rapid.String().Draw(t, label+"obs"),
		ObservationTokens: rapid.SliceOfN(tokenID, 0, 8).Draw(t, label+"otok"),
		Reward:            rapid.Float64Range(-1, 1).Draw(t, label+"reward"),
		Done:              rapid.Bool().Draw(t, label+"done"),
	}
}

func (m *modelMachine) AppendTurns(t *rapid.T) {
	n := m.pickLive(t)
	from := rapid.IntRange(0, n.n.Turns).Draw(t, "from")
	turns := make([]model.Turn, rapid.IntRange(1, 3).Draw(t, "count"))
	for i := range turns {
		turns[i] = genTurn(t, fmt.Sprint(i))
	}
	var want error
	if n.n.Status != model.NodeActive {
		want = model.ErrInvalid
	} else {
		switch variant(t, 4) {
		case 1:
			from = n.n.Turns + 1
			want = model.ErrInvalid
		case 2:
			turns[len(turns)-1].Reward = math.NaN()
			want = model.ErrInvalid
		case 3:
			want = model.ErrNotFound
		case 4:
			last := &turns[len(turns)-1]
			last.ObservationTokens = append(last.ObservationTokens, rapid.Uint32Range(store.MaxTokenID+1, math.MaxUint32).Draw(t, "wideid"))
			want = model.ErrInvalid
		}
	}
	id := n.n.ID
	if want == model.ErrNotFound {
		id = m.nodeSeq + 7
	}
	if want != nil {
		m.bad(t, fmt.Sprintf("AppendTurns node %d from %d", id, from), want, func(r *store.RunTx) error { return r.AppendTurns(id, from, turns...) })
		return
	}
	m.ok(t, "AppendTurns", func(r *store.RunTx) error { return r.AppendTurns(id, from, turns...) })
	var seq uint64
	if fresh := from + len(turns) - len(n.turns); fresh > 0 {
		seq = m.turnSeq + 1
		m.turnSeq += uint64(fresh)
	}
	for i, tu := range turns {
		if from+i < len(n.turns) {
			n.turns[from+i] = tu
		} else {
			n.turns = append(n.turns, tu)
		}
	}
	n.n.Turns = len(n.turns)
	m.event(model.EvTurns, model.TurnsPayload{From: from, Count: len(turns), Turns: n.n.Turns, Seq: seq})
}

func (m *modelMachine) Score(t *rapid.T) {
	n := m.pickLive(t)
	s := model.Score{Interval: rapid.IntRange(0, 3).Draw(t, "interval"), Turn: n.n.PathLen(),
		Value: rapid.Float64Range(0, 1).Draw(t, "value")}
	var want error
	if n.n.Status != model.NodeActive {
		want = model.ErrInvalid
	} else {
		switch variant(t, 3) {
		case 1:
			s.Value = rapid.SampledFrom([]float64{math.NaN(), math.Inf(1), -0.01, 1.01}).Draw(t, "badvalue")
			want = model.ErrInvalid
		case 2:
			s.Interval = -1
			want = model.ErrInvalid
		}
	}
	if want != nil {
		m.bad(t, fmt.Sprintf("Score %d %+v", n.n.ID, s), want, func(r *store.RunTx) error { return r.Score(n.n.ID, s) })
		return
	}
	m.ok(t, "Score", func(r *store.RunTx) error { return r.Score(n.n.ID, s) })
	replaced := false
	for i := range n.n.Scores {
		if n.n.Scores[i].Interval == s.Interval {
			n.n.Scores[i], replaced = s, true
		}
	}
	if !replaced {
		n.n.Scores = append(n.n.Scores, s)
	}
	m.event(model.EvNodeScore, n.n)
}

func (m *modelMachine) Route(t *rapid.T) {
	n := m.pickLive(t)
	d := model.Decision{Interval: rapid.IntRange(0, 3).Draw(t, "interval"),
		Action: rapid.SampledFrom([]model.Action{model.ActionExpand, model.ActionSurvive, model.ActionPrune}).Draw(t, "action"),
		Score:  rapid.Float64Range(0, 1).Draw(t, "score"), Reference: rapid.Float64Range(0, 1).Draw(t, "ref"),
		Delta: 0.5, Rule: rapid.SampledFrom([]string{"max", "median"}).Draw(t, "rule")}
	if d.Action == model.ActionExpand {
		d.Children = 2
	}
	var want error
	if n.n.Status != model.NodeActive {
		want = model.ErrInvalid
	} else {
		switch variant(t, 3) {
		case 1:
			d.Action = "explode"
			want = model.ErrInvalid
		case 2:
			d.Reference = math.Inf(-1)
			want = model.ErrInvalid
		case 3:
			d.Children = -1
			want = model.ErrInvalid
		}
	}
	if want != nil {
		m.bad(t, fmt.Sprintf("Route %d %+v", n.n.ID, d), want, func(r *store.RunTx) error { return r.Route(n.n.ID, d) })
		return
	}
	m.ok(t, "Route", func(r *store.RunTx) error { return r.Route(n.n.ID, d) })
	switch d.Action {
	case model.ActionExpand:
		n.n.Status = model.NodeExpanded
	case model.ActionPrune:
		n.n.Status = model.NodePruned
	}
	replaced := false
	for i := range n.n.Decisions {
		if n.n.Decisions[i].Interval == d.Interval {
			n.n.Decisions[i], replaced = d, true
		}
	}
	if !replaced {
		n.n.Decisions = append(n.n.Decisions, d)
	}
	m.event(model.EvNodeRoute, n.n)
}

// Complete moves a node along its lifecycle: an active node finishes
// (completed, truncated, failed, ...), a failed one is retried. Any other
// move is drawn as an invalid one.
func (m *modelMachine) Complete(t *rapid.T) {
	n := m.pickLive(t)
	all := []model.NodeStatus{model.NodeActive, model.NodeExpanded, model.NodeCompleted, model.NodePruned, model.NodeTruncated, model.NodeFailed}
	to := rapid.SampledFrom(all).Draw(t, "to")
	from := n.n.Status
	valid := (from == model.NodeActive && to != model.NodeActive) ||
		(from == model.NodeFailed && to == model.NodeActive && m.groups[n.n.Group].Status == model.GroupOpen)
	if variant(t, 1) == 1 {
		to, valid = "finished", false
	}
	if !valid {
		m.bad(t, fmt.Sprintf("SetNodeStatus %d %s→%s", n.n.ID, from, to), model.ErrInvalid, func(r *store.RunTx) error { return r.SetNodeStatus(n.n.ID, to) })
		return
	}
	m.ok(t, "SetNodeStatus", func(r *store.RunTx) error { return r.SetNodeStatus(n.n.ID, to) })
	if from == model.NodeFailed {
		n.n.Attempt++
	}
	n.n.Status = to
	m.event(model.EvNodeStatus, n.n)
}

func (m *modelMachine) SetReward(t *rapid.T) {
	n := m.pickNode(t, anyNode)
	x := rapid.Float64Range(-1, 1).Draw(t, "reward")
	var want error
	if n.n.Status == model.NodeExpanded {
		want = model.ErrInvalid
	} else if variant(t, 1) == 1 {
		x, want = math.NaN(), model.ErrInvalid
	}
	if want != nil {
		m.bad(t, fmt.Sprintf("SetReward %d %v", n.n.ID, x), want, func(r *store.RunTx) error { return r.SetReward(n.n.ID, x) })
		return
	}
	m.ok(t, "SetReward", func(r *store.RunTx) error { return r.SetReward(n.n.ID, x) })
	n.n.Reward, n.n.HasReward = x, true
	m.event(model.EvNodeReward, n.n)
}

func (m *modelMachine) PutAdvantage(t *rapid.T) {
	if len(m.nodes) == 0 {
		t.Skip("no nodes")
	}
	isLeaf := func(n *modelNode) bool { return n.n.Status.Leaf() }
	pick := anyNode
	if len(m.nodeIDs(isLeaf)) > 0 && rapid.IntRange(0, 3).Draw(t, "anynode") < 3 {
		pick = isLeaf
	}
	n := m.pickNode(t, pick)
	a := model.Advantage{Step: n.n.Step, Group: n.n.Group, Leaf: n.n.ID, Outcome: n.n.Reward,
		RubricScore: rapid.Float64Range(-0.5, 0.5).Draw(t, "rs"), Lambda: 0.1,
		Mean: rapid.Float64Range(-1, 1).Draw(t, "mean"), Std: rapid.Float64Range(0, 1).Draw(t, "std"),
		Advantage: rapid.Float64Range(-3, 3).Draw(t, "adv"), ZeroVariance: rapid.Bool().Draw(t, "zv")}
	if rapid.Bool().Draw(t, "rubrics") {
		a.Rubrics = []uint64{1, 3}
	}
	a.Total = a.Outcome + a.Lambda*a.RubricScore
	var want error
	if !n.n.Status.Leaf() {
		want = model.ErrInvalid
	} else {
		switch variant(t, 3) {
		case 1:
			a.Std = -1
			want = model.ErrInvalid
		case 2:
			a.Advantage = math.NaN()
			want = model.ErrInvalid
		case 3:
			a.Group += 1000
			want = model.ErrNotFound
		}
	}
	if want != nil {
		m.bad(t, fmt.Sprintf("PutAdvantage %+v", a), want, func(r *store.RunTx) error { return r.PutAdvantage(a) })
		return
	}
	m.ok(t, "PutAdvantage", func(r *store.RunTx) error { return r.PutAdvantage(a) })
	m.adv[[3]uint64{a.Step, a.Group, a.Leaf}] = a
	m.event(model.EvAdvantage, a)
}

func (m *modelMachine) CloseGroup(t *rapid.T) {
	g := m.pickGroup(t, func(*model.Group) bool { return true })
	var want error
	if g.Status != model.GroupOpen {
		want = model.ErrInvalid
	}
	for _, n := range m.nodes {
		if n.n.Group == g.ID && n.n.Status == model.NodeActive {
			want = model.ErrInvalid
		}
	}
	step, id := g.Step, g.ID
	if want == nil && variant(t, 1) == 1 {
		step, want = g.Step+10, model.ErrNotFound
	}
	if want != nil {
		m.bad(t, fmt.Sprintf("CloseGroup %d", g.ID), want, func(r *store.RunTx) error { return r.CloseGroup(step, id) })
		return
	}
	m.ok(t, "CloseGroup", func(r *store.RunTx) error { return r.CloseGroup(step, id) })
	g.Status = model.GroupClosed
	m.event(model.EvGroupClose, *g)
}

func (m *modelMachine) PutRubric(t *rapid.T) {
	rb := model.Rubric{
		Pool:        rapid.SampledFrom([]model.RubricPool{model.PoolCandidate, model.PoolPublic, model.PoolRetired, model.PoolMerged}).Draw(t, "pool"),
		Text:        rapid.String().Draw(t, "text"),
		Feature:     rapid.StringN(0, 6, -1).Draw(t, "feature"),
		Origin:      model.RubricOrigin{Step: rapid.Uint64Range(1, 3).Draw(t, "ostep"), Group: 1, Anchors: []uint64{1, 2, 3}},
		Support:     rapid.IntRange(0, 5).Draw(t, "support"),
		Variance:    rapid.Float64Range(0, 1).Draw(t, "var"),
		Rho:         rapid.Float64Range(-1, 1).Draw(t, "rho"),
		Usage:       model.RubricUsage{LastActivation: -1, N: 2, SumX: 1.5, SumY: 0.5, SumXY: 0.25, SumXX: 1.25, SumYY: 0.25},
		CreatedStep: rapid.Uint64Range(1, 3).Draw(t, "cstep"),
	}
	explicit := rapid.Bool().Draw(t, "explicit")
	if explicit {
		rb.ID = rapid.Uint64Range(1, m.rubricSeq+3).Draw(t, "id")
	}
	if rb.Pool == model.PoolMerged {
		rb.MergedInto = m.pickInto(t)
	}
	// The expected error in the order the store validates.
	var want error
	switch variant(t, 3) {
	case 1:
		rb.Pool = "limbo"
		want = model.ErrInvalid
	case 2:
		rb.Usage.SumXY = math.Inf(1)
		want = model.ErrInvalid
	case 3:
		rb.Support = -1
		want = model.ErrInvalid
	}
	if into, ok := m.rubrics[rb.MergedInto]; want == nil && rb.Pool == model.PoolMerged {
		switch {
		case !ok:
			want = model.ErrNotFound
		case into.Pool != model.PoolPublic && into.Pool != model.PoolRetired:
			want = model.ErrInvalid
		}
	}
	if _, exists := m.rubrics[rb.ID]; want == nil && explicit && exists {
		want = model.ErrExists
	}
	if want != nil {
		m.bad(t, fmt.Sprintf("PutRubric id %d", rb.ID), want, func(r *store.RunTx) error { _, err := r.PutRubric(rb); return err })
		return
	}
	var got model.Rubric
	m.ok(t, "PutRubric", func(r *store.RunTx) (err error) { got, err = r.PutRubric(rb); return err })
	if rb.ID == 0 {
		m.rubricSeq++
		rb.ID = m.rubricSeq
	} else if rb.ID > m.rubricSeq {
		m.rubricSeq = rb.ID
	}
	if !reflect.DeepEqual(normRubric(got), normRubric(rb)) {
		t.Fatalf("PutRubric returned %+v, model %+v", got, rb)
	}
	m.rubrics[rb.ID] = rb
	m.event(model.EvRubricPut, rb)
}

// pickInto draws the rubric a draft merges into: mostly a public one.
func (m *modelMachine) pickInto(t *rapid.T) uint64 {
	var pubs []uint64
	for _, id := range slices.Sorted(maps.Keys(m.rubrics)) {
		if m.rubrics[id].Pool == model.PoolPublic {
			pubs = append(pubs, id)
		}
	}
	if len(pubs) > 0 && rapid.IntRange(0, 3).Draw(t, "anyinto") < 3 {
		return rapid.SampledFrom(pubs).Draw(t, "into")
	}
	return rapid.Uint64Range(0, m.rubricSeq+1).Draw(t, "into")
}

func (m *modelMachine) MoveRubric(t *rapid.T) {
	var ids []uint64
	for id := range m.rubrics {
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		t.Skip("no rubrics")
	}
	slices.Sort(ids)
	id := rapid.SampledFrom(ids).Draw(t, "rubric")
	rb := m.rubrics[id]
	// Mostly a move the lifecycle allows; otherwise any pool.
	targets := map[model.RubricPool][]model.RubricPool{
		model.PoolCandidate: {model.PoolPublic, model.PoolMerged, model.PoolRetired},
		model.PoolPublic:    {model.PoolRetired},
	}[rb.Pool]
	if len(targets) == 0 || rapid.IntRange(0, 3).Draw(t, "anypool") == 3 {
		targets = []model.RubricPool{model.PoolCandidate, model.PoolPublic, model.PoolRetired, model.PoolMerged}
	}
	mv := store.RubricMove{To: rapid.SampledFrom(targets).Draw(t, "to"),
		Step: rapid.Uint64Range(1, 5).Draw(t, "step"), Reason: rapid.StringN(0, 8, -1).Draw(t, "reason")}
	var want error
	switch {
	case !(rb.Pool == model.PoolCandidate && mv.To != model.PoolCandidate) && !(rb.Pool == model.PoolPublic && mv.To == model.PoolRetired):
		want = model.ErrInvalid
	case mv.To == model.PoolMerged:
		mv.MergedInto = m.pickInto(t)
		into, ok := m.rubrics[mv.MergedInto]
		switch {
		case !ok:
			want = model.ErrNotFound
		case into.Pool != model.PoolPublic:
			want = model.ErrInvalid
		}
	}
	if want == nil && variant(t, 1) == 1 {
		id, want = m.rubricSeq+9, model.ErrNotFound
	}
	if want != nil {
		m.bad(t, fmt.Sprintf("MoveRubric %d %s→%+v", id, rb.Pool, mv), want, func(r *store.RunTx) error { _, err := r.MoveRubric(id, mv); return err })
		return
	}
	m.ok(t, "MoveRubric", func(r *store.RunTx) error { _, err := r.MoveRubric(id, mv); return err })
	switch mv.To {
	case model.PoolMerged:
		rb.MergedInto = mv.MergedInto
	case model.PoolRetired:
		rb.RetireStep, rb.RetireReason = mv.Step, mv.Reason
	}
	rb.Pool = mv.To
	m.rubrics[id] = rb
	m.event(model.EvRubricMove, rb)
}

// Reopen closes the file and opens it again: the LRU starts cold and
// everything must come back from the pages.
func (m *modelMachine) Reopen(t *rapid.T) {
	if err := m.db.Close(); err != nil {
		t.Fatal(err)
	}
	var err error
	if m.db, err = store.Open(m.path, m.opts); err != nil {
		t.Fatalf("reopen: %v", err)
	}
	m.lastRec = nil
	m.counts["reopen"]++
}

// Compact copies the file with bbolt.Compact (what `patrdb compact` does)
// and continues on the copy: records and id sequences must survive.
func (m *modelMachine) Compact(t *rapid.T) {
	dst := m.path + ".compact"
	out, err := bolt.Open(dst, 0o600, &bolt.Options{PageSize: 4096, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := bolt.Compact(out, storetest.Bolt(m.db), rapid.SampledFrom([]int64{0, 4096}).Draw(t, "txmax")); err != nil {
		t.Fatalf("compact: %v", err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dst, m.path); err != nil {
		t.Fatal(err)
	}
	if m.db, err = store.Open(m.path, m.opts); err != nil {
		t.Fatalf("open the compacted file: %v", err)
	}
	m.lastRec = nil
	m.counts["compact"]++
}

// ---------------------------------------------------------------------------
// The invariant: the store equals the model.

func (m *modelMachine) Check(t *rapid.T) {
	m.counts["checks"]++
	vs, err := m.db.Check(nil)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	for _, v := range vs {
		t.Errorf("check: %s", v)
	}
	err = m.db.ViewRun(modelRun, func(r *store.RunTx) error {
		m.compareGroups(t, r)
		m.compareNodes(t, r)
		m.compareAdvantages(t, r)
		m.compareRubrics(t, r)
		m.compareEvents(t, r)
		return nil
	})
	if err != nil {
		t.Fatalf("reading the store: %v", err)
	}
}

func (m *modelMachine) compareGroups(t *rapid.T, r *store.RunTx) {
	got, err := r.Groups(0)
	if err != nil {
		t.Fatal(err)
	}
	var want []model.Group
	for _, g := range m.groups {
		want = append(want, normGroup(*g))
	}
	sort.Slice(want, func(i, j int) bool {
		return want[i].Step < want[j].Step || (want[i].Step == want[j].Step && want[i].ID < want[j].ID)
	})
	for i := range got {
		got[i] = normGroup(got[i])
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("groups:\n got %+v\nwant %+v", got, want)
	}
}

func (m *modelMachine) compareNodes(t *rapid.T, r *store.RunTx) {
	frontier, err := r.Frontier()
	if err != nil {
		t.Fatal(err)
	}
	if want := m.nodeIDs(isActive); !slices.Equal(frontier, want) {
		t.Fatalf("frontier %v, model's active nodes %v", frontier, want)
	}
	for id := uint64(1); id <= m.nodeSeq; id++ {
		mn := m.nodes[id]
		got, err := r.Node(id)
		if err != nil {
			t.Fatalf("node %d: %v", id, err)
		}
		if !reflect.DeepEqual(normNode(got), normNode(mn.n)) {
			t.Fatalf("node %d:\n got %+v\nwant %+v", id, got, mn.n)
		}
		held := 0
		for _, rg := range got.TurnRanges {
			held += rg.Count
		}
		if held != got.Turns {
			t.Fatalf("node %d: turn ranges %v hold %d turns, record says %d", id, got.TurnRanges, held, got.Turns)
		}
		turns, err := r.Turns(id)
		if err != nil {
			t.Fatalf("turns of %d: %v", id, err)
		}
		if !turnsEqual(turns, mn.turns) {
			t.Fatalf("turns of node %d:\n got %+v\nwant %+v", id, turns, mn.turns)
		}
		kids, err := r.Children(id)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(kids, mn.kids) {
			t.Fatalf("children of %d: %v, model %v", id, kids, mn.kids)
		}
		path, err := r.Trajectory(id)
		if err != nil {
			t.Fatalf("trajectory of %d: %v", id, err)
		}
		if want := m.trajectory(id); !pathEqual(path, want) {
			t.Fatalf("trajectory of %d: %d turns, model %d", id, len(path), len(want))
		}
	}
	if _, err := r.Node(m.nodeSeq + 1); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("node past the sequence: %v", err)
	}
}

// trajectory is the model's materialised path: each ancestor's first Fork
// turns, root first, then the node's own.
func (m *modelMachine) trajectory(id uint64) []model.PathTurn {
	n := m.nodes[id]
	var segs []model.PathTurn
	for i, tu := range n.turns {
		segs = append(segs, model.PathTurn{Turn: tu, Node: id, Index: i})
	}
	for n.n.Parent != 0 {
		fork := n.n.Fork
		p := m.nodes[n.n.Parent]
		var pre []model.PathTurn
		for i := 0; i < fork; i++ {
			pre = append(pre, model.PathTurn{Turn: p.turns[i], Node: p.n.ID, Index: i})
		}
		segs = append(pre, segs...)
		n = p
	}
	return segs
}

func (m *modelMachine) compareAdvantages(t *rapid.T, r *store.RunTx) {
	got, err := r.Advantages(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([][3]uint64, 0, len(m.adv))
	for k := range m.adv {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		return a[0] < b[0] || (a[0] == b[0] && (a[1] < b[1] || (a[1] == b[1] && a[2] < b[2])))
	})
	if len(got) != len(keys) {
		t.Fatalf("%d advantages, model %d", len(got), len(keys))
	}
	for i, k := range keys {
		if !reflect.DeepEqual(normAdv(got[i]), normAdv(m.adv[k])) {
			t.Fatalf("advantage %v:\n got %+v\nwant %+v", k, got[i], m.adv[k])
		}
	}
}

func (m *modelMachine) compareRubrics(t *rapid.T, r *store.RunTx) {
	got, err := r.Rubrics("")
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for id := range m.rubrics {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if len(got) != len(ids) {
		t.Fatalf("%d rubrics, model %d", len(got), len(ids))
	}
	for i, id := range ids {
		if !reflect.DeepEqual(normRubric(got[i]), normRubric(m.rubrics[id])) {
			t.Fatalf("rubric %d:\n got %+v\nwant %+v", id, got[i], m.rubrics[id])
		}
	}
}

func (m *modelMachine) compareEvents(t *rapid.T, r *store.RunTx) {
	var kinds []model.EventKind
	var last model.Event
	if err := r.Events(1, func(e model.Event) error {
		kinds = append(kinds, e.Kind)
		last = e
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(kinds, m.events) {
		t.Fatalf("event log %v, model %v", kinds, m.events)
	}
	if r.LastSeq() != uint64(len(m.events)) {
		t.Fatalf("LastSeq %d, model %d events", r.LastSeq(), len(m.events))
	}
	// The payload of the newest event is the record after the mutation.
	if m.lastRec == nil {
		return
	}
	rec := reflect.New(reflect.TypeOf(m.lastRec))
	if err := store.DecodePayload(last, rec.Interface()); err != nil {
		t.Fatalf("event %d payload: %v", last.Seq, err)
	}
	got, want := rec.Elem().Interface(), m.lastRec
	switch w := want.(type) {
	case model.Node:
		got, want = normNode(got.(model.Node)), normNode(w)
	case model.Group:
		got, want = normGroup(got.(model.Group)), normGroup(w)
	case model.Rubric:
		got, want = normRubric(got.(model.Rubric)), normRubric(w)
	case model.Advantage:
		got, want = normAdv(got.(model.Advantage)), normAdv(w)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("event %d (%s) payload:\n got %+v\nwant %+v", last.Seq, last.Kind, got, want)
	}
}

// ---------------------------------------------------------------------------
// Normalisation: the store does not distinguish a nil slice or map from an
// empty one.

func normNode(n model.Node) model.Node {
	if len(n.Scores) == 0 {
		n.Scores = nil
	}
	if len(n.Decisions) == 0 {
		n.Decisions = nil
	}
	if len(n.EnvState) == 0 {
		n.EnvState = nil
	}
	n.TurnRanges = nil // where the turns are stored; compareNodes checks they hold Turns
	return n
}

func normGroup(g model.Group) model.Group {
	if len(g.Roots) == 0 {
		g.Roots = nil
	}
	if len(g.Meta) == 0 {
		g.Meta = nil
	}
	return g
}

func normRubric(rb model.Rubric) model.Rubric {
	if len(rb.Parents) == 0 {
		rb.Parents = nil
	}
	if len(rb.Origin.Anchors) == 0 {
		rb.Origin.Anchors = nil
	}
	return rb
}

func normAdv(a model.Advantage) model.Advantage {
	if len(a.Rubrics) == 0 {
		a.Rubrics = nil
	}
	return a
}

func normTurn(tu model.Turn) model.Turn {
	if len(tu.ActionTokens) == 0 {
		tu.ActionTokens = nil
	}
	if len(tu.ActionLogprobs) == 0 {
		tu.ActionLogprobs = nil
	}
	if len(tu.ObservationTokens) == 0 {
		tu.ObservationTokens = nil
	}
	return tu
}

func turnsEqual(a, b []model.Turn) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !reflect.DeepEqual(normTurn(a[i]), normTurn(b[i])) {
			return false
		}
	}
	return true
}

func pathEqual(a, b []model.PathTurn) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Node != b[i].Node || a[i].Index != b[i].Index || !reflect.DeepEqual(normTurn(a[i].Turn), normTurn(b[i].Turn)) {
			return false
		}
	}
	return true
}

// dumpDB serialises every bucket, key, value and sequence of the file.
func dumpDB(t interface{ Fatal(...any) }, db *store.DB) []byte {
	var buf bytes.Buffer
	var walk func(path string, c *bolt.Cursor, sub func([]byte) *bolt.Bucket)
	walk = func(path string, c *bolt.Cursor, sub func([]byte) *bolt.Bucket) {
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if v == nil {
				b := sub(k)
				fmt.Fprintf(&buf, "%s/%x seq=%d\n", path, k, b.Sequence())
				walk(path+"/"+string(k), b.Cursor(), b.Bucket)
				continue
			}
			fmt.Fprintf(&buf, "%s %x=%x\n", path, k, v)
		}
	}
	if err := storetest.Bolt(db).View(func(tx *bolt.Tx) error {
		walk("", tx.Cursor(), tx.Bucket)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
