package store_test

// Every record type written through the public API reads back equal, and
// what the reads hand out are copies the caller may keep and change.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/patrdb/patrdb/model"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

func TestRunRoundTrip(t *testing.T) {
	db := storetest.Open(t)
	cfg := []byte(`{"b0":4,"k":13,"delta":0.5}`)
	meta := map[string]string{"model": "qwen", "seed": "7"}
	var created model.Run
	update(t, db, func(tx *store.Tx) error {
		r, err := tx.CreateRun("exp-1.a_b", cfg, meta)
		if err != nil {
			return err
		}
		if created, err = r.Info(); err != nil {
			return err
		}
		_, err = tx.CreateRun("exp-0", nil, nil)
		return err
	})
	cfg[0] = 'X' // the store kept its own copy
	if created.ID != "exp-1.a_b" || string(created.Config) != `{"b0":4,"k":13,"delta":0.5}` ||
		created.Status != model.RunRunning || created.LastStep != 0 || created.CreatedAt == 0 ||
		created.UpdatedAt != created.CreatedAt || !reflect.DeepEqual(created.Meta, meta) {
		t.Fatalf("created run = %+v", created)
	}
	inRun(t, db, true, "exp-1.a_b", func(r *store.RunTx) error {
		if err := r.SetConfig([]byte(`{"b0":8}`)); err != nil {
			return err
		}
		return r.SetRunStatus(model.RunFinished)
	})
	var runs []model.Run
	var ids []string
	view(t, db, func(tx *store.Tx) (err error) {
		if ids, err = tx.RunIDs(); err != nil {
			return err
		}
		runs, err = tx.Runs()
		return err
	})
	if !reflect.DeepEqual(ids, []string{"exp-0", "exp-1.a_b"}) {
		t.Fatalf("RunIDs = %v", ids)
	}
	got := runs[1]
	if got.Status != model.RunFinished || string(got.Config) != `{"b0":8}` || got.CreatedAt != created.CreatedAt ||
		got.UpdatedAt <= created.UpdatedAt || !reflect.DeepEqual(got.Meta, meta) {
		t.Fatalf("finished run = %+v", got)
	}
	if runs[0].ID != "exp-0" || runs[0].Config != nil || runs[0].Meta != nil {
		t.Fatalf("bare run = %+v", runs[0])
	}
}

func TestGroupRoundTrip(t *testing.T) {
	db := storetest.Open(t)
	var g1, g2, g3 model.Group
	var roots []uint64
	update(t, db, func(tx *store.Tx) (err error) {
		r, err := tx.CreateRun("r", nil, nil)
		if err != nil {
			return err
		}
		if g1, err = r.OpenGroup(store.GroupSpec{Step: 1, Task: "task-a", Prompt: "fix the bug", Gold: "42", Meta: map[string]string{"repo": "x"}}); err != nil {
			return err
		}
		if g2, err = r.OpenGroup(store.GroupSpec{Step: 1, Task: "task-b"}); err != nil {
			return err
		}
		if g3, err = r.OpenGroup(store.GroupSpec{Step: 2, Task: "task-c"}); err != nil {
			return err
		}
		for i := range 3 {
			n, err := r.AddNode(store.NodeSpec{Step: 1, Group: g1.ID, Ordinal: i})
			if err != nil {
				return err
			}
			roots = append(roots, n.ID)
			if err := r.SetNodeStatus(n.ID, model.NodeCompleted); err != nil {
				return err
			}
		}
		if err := r.SetGroupInterval(1, g1.ID, 2); err != nil {
			return err
		}
		return r.CloseGroup(1, g1.ID)
	})
	if g1.ID != 1 || g2.ID != 2 || g3.ID != 3 || g1.Status != model.GroupOpen || g1.Roots != nil {
		t.Fatalf("opened groups %+v %+v %+v", g1, g2, g3)
	}
	want := g1
	want.Roots, want.Status, want.Interval = roots, model.GroupClosed, 2
	inRun(t, db, false, "r", func(r *store.RunTx) error {
		got, err := r.GroupAt(1, g1.ID)
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("GroupAt = %+v, want %+v", got, want)
		}
		if got, err = r.Group(g3.ID); err != nil || got.Step != 2 || got.Task != "task-c" {
			t.Errorf("Group(%d) = %+v, %v", g3.ID, got, err)
		}
		if _, err := r.GroupAt(2, g1.ID); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("GroupAt at the wrong step: %v, want ErrNotFound", err)
		}
		if _, err := r.Group(99); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("Group(99): %v, want ErrNotFound", err)
		}
		step1, err := r.Groups(1)
		if err != nil {
			return err
		}
		all, err := r.Groups(0)
		if err != nil {
			return err
		}
		if len(step1) != 2 || step1[0].ID != g1.ID || step1[1].ID != g2.ID || len(all) != 3 || all[2].ID != g3.ID {
			t.Errorf("Groups(1) = %v, Groups(0) = %v", step1, all)
		}
		nodes, err := r.GroupNodes(got)
		if err != nil {
			return err
		}
		if len(nodes) != 0 {
			t.Errorf("GroupNodes(g3) = %v", nodes)
		}
		return nil
	})
}

func TestNodeRoundTrip(t *testing.T) {
	db := storetest.Open(t)
	var added, child model.Node
	update(t, db, func(tx *store.Tx) (err error) {
		r, err := tx.CreateRun("r", nil, nil)
		if err != nil {
			return err
		}
		g, err := r.OpenGroup(store.GroupSpec{Step: 3})
		if err != nil {
			return err
		}
		if added, err = r.AddNode(store.NodeSpec{Step: 3, Group: g.ID, Ordinal: 5, EnvState: []byte("env@0"), Worker: "gpu-3", Attempt: 1}); err != nil {
			return err
		}
		if err := r.AppendTurns(added.ID, 0, textTurns("t", 4)...); err != nil {
			return err
		}
		for _, s := range []model.Score{{Interval: 0, Turn: 2, Value: 0}, {Interval: 1, Turn: 4, Value: 1}} {
			if err := r.Score(added.ID, s); err != nil {
				return err
			}
		}
		if err := r.SetEnvState(added.ID, []byte("env@4")); err != nil {
			return err
		}
		if err := r.Route(added.ID, model.Decision{Interval: 0, Action: model.ActionSurvive, Score: 0, Reference: 1, Delta: 0.5, Rule: "median"}); err != nil {
			return err
		}
		if err := r.Route(added.ID, model.Decision{Interval: 1, Action: model.ActionExpand, Score: 1, Reference: 1, Delta: 0.5, Rule: "max", Children: 2}); err != nil {
			return err
		}
		if child, err = r.AddNode(store.NodeSpec{Step: 3, Group: g.ID, Parent: added.ID, Fork: 4, Ordinal: 1}); err != nil {
			return err
		}
		if err := r.SetNodeStatus(child.ID, model.NodeTruncated); err != nil {
			return err
		}
		return r.SetReward(child.ID, -1)
	})
	want := model.Node{
		ID: added.ID, Step: 3, Group: added.Group, Ordinal: 5, Status: model.NodeExpanded, Turns: 4,
		Scores: []model.Score{{Interval: 0, Turn: 2, Value: 0}, {Interval: 1, Turn: 4, Value: 1}},
		Decisions: []model.Decision{
			{Interval: 0, Action: model.ActionSurvive, Score: 0, Reference: 1, Delta: 0.5, Rule: "median"},
			{Interval: 1, Action: model.ActionExpand, Score: 1, Reference: 1, Delta: 0.5, Rule: "max", Children: 2},
		},
		EnvState: []byte("env@4"), Worker: "gpu-3", Attempt: 1,
		TurnRanges: model.TurnRanges{{Seq: 1, Count: 4}}, // the run's first four turns
	}
	wantChild := model.Node{ID: child.ID, Step: 3, Group: added.Group, Parent: added.ID, Ordinal: 1, Fork: 4, Base: 4, Depth: 1,
		Status: model.NodeTruncated, HasReward: true, Reward: -1}
	check := func(label string, db *store.DB) {
		inRun(t, db, false, "r", func(r *store.RunTx) error {
			got, err := r.Node(added.ID)
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: node = %+v\nwant %+v", label, got, want)
			}
			gotChild, err := r.Node(child.ID)
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(gotChild, wantChild) || gotChild.PathLen() != 4 {
				t.Errorf("%s: child = %+v\nwant %+v", label, gotChild, wantChild)
			}
			kids, err := r.Children(added.ID)
			if err != nil || !reflect.DeepEqual(kids, []uint64{child.ID}) {
				t.Errorf("%s: Children = %v, %v", label, kids, err)
			}
			if _, err := r.Node(999); !errors.Is(err, model.ErrNotFound) {
				t.Errorf("%s: Node(999): %v, want ErrNotFound", label, err)
			}
			return nil
		})
	}
	check("cached", db)
	// The same reads with the LRU off decode straight from the file.
	db.Close()
	o := storetest.Options()
	o.CacheNodes = store.NoCache
	check("uncached", storetest.OpenPath(t, db.Path(), o))
}

func TestTurnRoundTrip(t *testing.T) {
	db := storetest.Open(t)
	special := model.Turn{
		Action:            "héllo\x00world", // any bytes, not only UTF-8 text
		ActionTokens:      []uint32{0, 1, store.MaxTokenID, 151643},
		ActionLogprobs:    []float32{0, -1e-30, -math.MaxFloat32, -math.SmallestNonzeroFloat32},
		Observation:       string(bytes.Repeat([]byte("obs "), 1000)),
		ObservationTokens: make([]uint32, 1200),
		Reward:            -0.5,
		Done:              true,
		PolicyVersion:     1<<63 + 5,
	}
	for i := range special.ObservationTokens {
		special.ObservationTokens[i] = uint32(i * 977)
	}
	empty := model.Turn{Action: "noop"} // no tokens, no observation
	var id uint64
	update(t, db, func(tx *store.Tx) error {
		r, n, err := runWithRoot(tx)
		if err != nil {
			return err
		}
		id = n.ID
		return r.AppendTurns(id, 0, special, empty)
	})
	same := func(label string, got, want model.Turn) {
		t.Helper()
		lp := func(xs []float32) []uint32 { // compare float bits: -0 and subnormals included
			out := make([]uint32, len(xs))
			for i, x := range xs {
				out[i] = math.Float32bits(x)
			}
			return out
		}
		if got.Action != want.Action || got.Observation != want.Observation || got.Reward != want.Reward || got.Done != want.Done ||
			got.PolicyVersion != want.PolicyVersion ||
			len(got.ActionTokens) != len(want.ActionTokens) || len(got.ObservationTokens) != len(want.ObservationTokens) ||
			(len(want.ActionTokens) > 0 && !reflect.DeepEqual(got.ActionTokens, want.ActionTokens)) ||
			(len(want.ObservationTokens) > 0 && !reflect.DeepEqual(got.ObservationTokens, want.ObservationTokens)) ||
			!reflect.DeepEqual(lp(got.ActionLogprobs), lp(want.ActionLogprobs)) {
			t.Errorf("%s: turn differs\n got %+v\nwant %+v", label, got, want)
		}
	}
	inRun(t, db, false, "r", func(r *store.RunTx) error {
		turns, err := r.Turns(id)
		if err != nil {
			return err
		}
		if len(turns) != 2 {
			t.Fatalf("Turns = %d, want 2", len(turns))
		}
		same("Turns[0]", turns[0], special)
		same("Turns[1]", turns[1], empty)
		one, err := r.Turn(id, 0)
		if err != nil {
			return err
		}
		same("Turn(0)", one, special)
		if _, err := r.Turn(id, 2); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("Turn past the end: %v, want ErrNotFound", err)
		}
		if _, err := r.Turn(id, -1); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("Turn(-1): %v, want ErrNotFound", err)
		}
		return nil
	})

	// The exported codec frames the turn as documented and packs token ids
	// and logprobs as little-endian 32-bit words, not msgpack arrays.
	raw, err := store.EncodeTurn(&special)
	if err != nil {
		t.Fatal(err)
	}
	if raw[0] != 1 {
		t.Errorf("format byte = %d, want 1", raw[0])
	}
	packed := func(xs []uint32) []byte {
		b := make([]byte, 0, 4*len(xs))
		for _, x := range xs {
			b = binary.LittleEndian.AppendUint32(b, x)
		}
		return b
	}
	if !bytes.Contains(raw, packed(special.ActionTokens)) || !bytes.Contains(raw, packed(special.ObservationTokens)) {
		t.Error("token ids are not stored as packed little-endian words")
	}
	lpBits := make([]uint32, len(special.ActionLogprobs))
	for i, x := range special.ActionLogprobs {
		lpBits[i] = math.Float32bits(x)
	}
	if !bytes.Contains(raw, packed(lpBits)) {
		t.Error("logprobs are not stored as packed little-endian float32")
	}
	payload := 4*(len(special.ActionTokens)+len(special.ActionLogprobs)+len(special.ObservationTokens)) + len(special.Action) + len(special.Observation)
	if overhead := len(raw) - payload; overhead < 5 || overhead > 40 {
		t.Errorf("encoded turn is %d bytes for %d bytes of content: %d bytes of framing", len(raw), payload, overhead)
	}
	dec, err := store.DecodeTurn(raw)
	if err != nil {
		t.Fatal(err)
	}
	same("DecodeTurn", dec, special)
	raw[len(raw)-1] ^= 0x01
	if _, err := store.DecodeTurn(raw); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("DecodeTurn of a flipped bit: %v, want ErrCorrupt", err)
	}
}

func TestAdvantageRoundTrip(t *testing.T) {
	db := storetest.Open(t)
	f := buildFixture(t, db)
	// Rewriting the advantage of one leaf replaces it: re-closing a group
	// after a crash is safe.
	full := model.Advantage{Step: fixtureStep, Group: f.G1.ID, Leaf: f.C, Outcome: 1, RubricScore: 0.25, Lambda: 0.1, Total: 1.025,
		Mean: 0.5125, Std: 0.5, Advantage: 1.025, Rubrics: []uint64{f.RPublic, 9}, ZeroVariance: true, ZeroVarianceAfter: false}
	var g2Leaf uint64
	update(t, db, func(tx *store.Tx) error {
		r, err := tx.Run(f.Run)
		if err != nil {
			return err
		}
		if err := r.PutAdvantage(full); err != nil {
			return err
		}
		if err := r.SetNodeStatus(f.X, model.NodeCompleted); err != nil {
			return err
		}
		g2Leaf = f.X
		return r.PutAdvantage(model.Advantage{Step: fixtureStep, Group: f.G2.ID, Leaf: f.X, ZeroVariance: true, ZeroVarianceAfter: true})
	})
	inRun(t, db, false, f.Run, func(r *store.RunTx) error {
		g1, err := r.Advantages(fixtureStep, f.G1.ID)
		if err != nil {
			return err
		}
		if len(g1) != 2 || g1[0].Leaf != f.P || !reflect.DeepEqual(g1[1], full) {
			t.Errorf("Advantages(1, g1) = %+v", g1)
		}
		step, err := r.Advantages(fixtureStep, 0)
		if err != nil {
			return err
		}
		all, err := r.Advantages(0, 0)
		if err != nil {
			return err
		}
		if len(step) != 3 || step[2].Leaf != g2Leaf || !reflect.DeepEqual(step, all) {
			t.Errorf("Advantages(1,0) = %+v, Advantages(0,0) = %+v", step, all)
		}
		none, err := r.Advantages(2, 0)
		if err != nil || len(none) != 0 {
			t.Errorf("Advantages(2,0) = %v, %v", none, err)
		}
		return nil
	})
}

func TestRubricRoundTrip(t *testing.T) {
	db := storetest.Open(t)
	usage := model.RubricUsage{Activations: 3, LastActivation: 7, PairsJudged: 24, LastVariance: 0.0625, LowVarStreak: 1, GroupsUnlocked: 2,
		N: 12, SumX: 5.5, SumY: 6, SumXY: 3.25, SumXX: 3.125, SumYY: 4.5}
	draft := model.Rubric{Pool: model.PoolCandidate, Text: "checks the exit code", Feature: "exit_code",
		Origin: model.RubricOrigin{Step: 4, Group: 2, Anchors: []uint64{10, 11, 12}}, Support: 2, Variance: 0.3, Rho: 0.6, CreatedStep: 4}
	var d1, d2, pub, explicit model.Rubric
	update(t, db, func(tx *store.Tx) (err error) {
		r, err := tx.CreateRun("r", nil, nil)
		if err != nil {
			return err
		}
		if d1, err = r.PutRubric(draft); err != nil {
			return err
		}
		if d2, err = r.PutRubric(model.Rubric{Pool: model.PoolCandidate, Text: "d2", CreatedStep: 4}); err != nil {
			return err
		}
		if pub, err = r.PutRubric(model.Rubric{Pool: model.PoolPublic, Text: "consolidated", Parents: []uint64{d1.ID, d2.ID}, CreatedStep: 5, Usage: model.RubricUsage{LastActivation: -1}}); err != nil {
			return err
		}
		if explicit, err = r.PutRubric(model.Rubric{ID: 40, Pool: model.PoolCandidate, Text: "imported"}); err != nil {
			return err
		}
		pub.Usage = usage
		if err := r.UpdateRubric(pub); err != nil {
			return err
		}
		if _, err := r.MoveRubric(d1.ID, store.RubricMove{To: model.PoolMerged, Step: 5, MergedInto: pub.ID}); err != nil {
			return err
		}
		if _, err := r.MoveRubric(d2.ID, store.RubricMove{To: model.PoolRetired, Step: 5, Reason: "rho below 0.2"}); err != nil {
			return err
		}
		next, err := r.PutRubric(model.Rubric{Pool: model.PoolCandidate, Text: "after explicit"})
		if err != nil {
			return err
		}
		if next.ID != 41 {
			t.Errorf("id after an explicit 40 = %d, want 41", next.ID)
		}
		return nil
	})
	if d1.ID != 1 || d2.ID != 2 || pub.ID != 3 || explicit.ID != 40 {
		t.Fatalf("ids %d %d %d %d", d1.ID, d2.ID, pub.ID, explicit.ID)
	}
	wantD1 := draft
	wantD1.ID, wantD1.Pool, wantD1.MergedInto = d1.ID, model.PoolMerged, pub.ID
	wantPub := pub
	inRun(t, db, false, "r", func(r *store.RunTx) error {
		got, err := r.Rubric(d1.ID)
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(got, wantD1) {
			t.Errorf("merged draft = %+v\nwant %+v", got, wantD1)
		}
		if got, err = r.Rubric(pub.ID); err != nil || !reflect.DeepEqual(got, wantPub) {
			t.Errorf("public rubric with usage sums = %+v (%v)\nwant %+v", got, err, wantPub)
		}
		if got, err = r.Rubric(d2.ID); err != nil || got.Pool != model.PoolRetired || got.RetireStep != 5 || got.RetireReason != "rho below 0.2" {
			t.Errorf("retired rubric = %+v (%v)", got, err)
		}
		if _, err := r.Rubric(1000); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("Rubric(1000): %v, want ErrNotFound", err)
		}
		for pool, want := range map[model.RubricPool][]uint64{
			model.PoolCandidate: {40, 41}, model.PoolPublic: {pub.ID}, model.PoolRetired: {d2.ID}, model.PoolMerged: {d1.ID}, "": {1, 2, 3, 40, 41},
		} {
			rbs, err := r.Rubrics(pool)
			if err != nil {
				return err
			}
			var ids []uint64
			for _, rb := range rbs {
				ids = append(ids, rb.ID)
			}
			if !reflect.DeepEqual(ids, want) {
				t.Errorf("Rubrics(%q) = %v, want %v", pool, ids, want)
			}
		}
		return nil
	})
}

func TestCheckpointRoundTrip(t *testing.T) {
	db := storetest.Open(t)
	inline := model.Checkpoint{Step: 1, Inline: []byte{0, 1, 2, 255}, Meta: map[string]string{"rng": "pcg:9"}}
	uri := model.Checkpoint{Step: 3, URI: "s3://bucket/run/step-3/", Hash: "sha256:abcd", Meta: map[string]string{"kind": "lora"}}
	update(t, db, func(tx *store.Tx) error {
		r, err := tx.CreateRun("r", nil, nil)
		if err != nil {
			return err
		}
		if _, err := r.Checkpoint(0); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("Checkpoint of a fresh run: %v, want ErrNotFound", err)
		}
		buf := append([]byte(nil), inline.Inline...)
		c := inline
		c.Inline = buf
		if err := r.PutCheckpoint(c); err != nil {
			return err
		}
		buf[0] = 99 // the store copied the inline state
		info, err := r.Info()
		if err != nil || info.LastStep != 1 {
			t.Errorf("LastStep in the same transaction = %d (%v), want 1", info.LastStep, err)
		}
		return r.PutCheckpoint(uri)
	})
	inRun(t, db, false, "r", func(r *store.RunTx) error {
		info, err := r.Info()
		if err != nil {
			return err
		}
		if info.LastStep != 3 {
			t.Errorf("LastStep = %d, want 3", info.LastStep)
		}
		for _, c := range []struct {
			at   uint64
			want *model.Checkpoint
		}{{0, &uri}, {1, &inline}, {2, &inline}, {3, &uri}, {100, &uri}} {
			got, err := r.Checkpoint(c.at)
			if err != nil {
				t.Errorf("Checkpoint(%d): %v", c.at, err)
				continue
			}
			if got.CreatedAt == 0 {
				t.Errorf("Checkpoint(%d) has no CreatedAt", c.at)
			}
			got.CreatedAt = 0
			if !reflect.DeepEqual(got, *c.want) {
				t.Errorf("Checkpoint(%d) = %+v, want %+v", c.at, got, *c.want)
			}
		}
		return nil
	})
	// No checkpoint at or before a step below the first one.
	update(t, db, func(tx *store.Tx) error {
		r, err := tx.CreateRun("late", nil, nil)
		if err != nil {
			return err
		}
		if err := r.PutCheckpoint(model.Checkpoint{Step: 5, URI: "file:///w"}); err != nil {
			return err
		}
		for _, at := range []uint64{1, 4} {
			if _, err := r.Checkpoint(at); !errors.Is(err, model.ErrNotFound) {
				t.Errorf("Checkpoint(%d) before the first (5): %v, want ErrNotFound", at, err)
			}
		}
		return nil
	})
}

func TestEventsRoundTrip(t *testing.T) {
	db := storetest.Open(t)
	type judge struct {
		Rubric uint64
		A, B   uint64
		Winner string
		Scores []float64
	}
	payload := judge{Rubric: 3, A: 10, B: 11, Winner: "A", Scores: []float64{0.5, 1}}
	var node model.Node
	var customSeq uint64
	update(t, db, func(tx *store.Tx) error {
		r, err := tx.CreateRun("r", nil, nil) // 1 run.create
		if err != nil {
			return err
		}
		g, err := r.OpenGroup(store.GroupSpec{Step: 2, Task: "t"}) // 2 group.open
		if err != nil {
			return err
		}
		if node, err = r.AddNode(store.NodeSpec{Step: 2, Group: g.ID}); err != nil { // 3 node.add
			return err
		}
		if err := r.AppendTurns(node.ID, 0, textTurns("a", 3)...); err != nil { // 4 node.turns
			return err
		}
		if err := r.AppendTurns(node.ID, 1, textTurn("again")); err != nil { // 5 node.turns (rewrite)
			return err
		}
		if err := r.Score(node.ID, model.Score{Value: 0.5}); err != nil { // 6 node.score
			return err
		}
		if customSeq, err = r.AppendEvent("rubric.judge", 2, g.ID, node.ID, 3, payload); err != nil { // 7
			return err
		}
		if _, err := r.AppendEvent("marker", 0, 0, 0, 0, nil); err != nil { // 8, no payload
			return err
		}
		if err := r.SetNodeStatus(node.ID, model.NodeCompleted); err != nil { // 9 node.status
			return err
		}
		if err := r.CloseGroup(2, g.ID); err != nil { // 10 group.close
			return err
		}
		return r.PutCheckpoint(model.Checkpoint{Step: 2, Inline: []byte("s")}) // 11 ckpt.put, 12 run.status
	})
	if customSeq != 7 {
		t.Errorf("AppendEvent returned seq %d, want 7", customSeq)
	}
	var events []model.Event
	var last uint64
	inRun(t, db, false, "r", func(r *store.RunTx) error {
		last = r.LastSeq()
		return r.Events(1, func(e model.Event) error { events = append(events, e); return nil })
	})
	kinds := []model.EventKind{model.EvRunCreate, model.EvGroupOpen, model.EvNodeAdd, model.EvTurns, model.EvTurns, model.EvNodeScore,
		"rubric.judge", "marker", model.EvNodeStatus, model.EvGroupClose, model.EvCheckpoint, model.EvRunStatus}
	if len(events) != len(kinds) || last != uint64(len(kinds)) {
		t.Fatalf("%d events, LastSeq %d; want %d", len(events), last, len(kinds))
	}
	for i, e := range events {
		if e.Seq != uint64(i+1) || e.Kind != kinds[i] || e.Time == 0 {
			t.Errorf("event %d = seq %d kind %q time %d, want seq %d kind %q", i, e.Seq, e.Kind, e.Time, i+1, kinds[i])
		}
		if i > 0 && e.Time < events[i-1].Time {
			t.Errorf("event %d goes back in time", e.Seq)
		}
	}
	// Store kinds carry the record after the mutation.
	var added model.Node
	if err := store.DecodePayload(events[2], &added); err != nil || added.ID != node.ID || added.Status != model.NodeActive || added.Turns != 0 {
		t.Errorf("node.add payload = %+v (%v)", added, err)
	}
	if e := events[2]; e.Step != 2 || e.Group != node.Group || e.Node != node.ID {
		t.Errorf("node.add event labels = %+v", e)
	}
	var tp model.TurnsPayload
	if err := store.DecodePayload(events[4], &tp); err != nil || tp.From != 1 || tp.Count != 1 || tp.Turns != 3 {
		t.Errorf("rewrite turns payload = %+v (%v), want from 1 count 1 turns 3", tp, err)
	}
	var scored model.Node
	if err := store.DecodePayload(events[5], &scored); err != nil || len(scored.Scores) != 1 || scored.Scores[0].Value != 0.5 {
		t.Errorf("node.score payload = %+v (%v)", scored, err)
	}
	var ck model.Checkpoint
	if err := store.DecodePayload(events[10], &ck); err != nil || ck.Step != 2 || string(ck.Inline) != "s" {
		t.Errorf("ckpt.put payload = %+v (%v)", ck, err)
	}
	var run model.Run
	if err := store.DecodePayload(events[11], &run); err != nil || run.LastStep != 2 {
		t.Errorf("run.status payload after the checkpoint = %+v (%v)", run, err)
	}
	// A custom kind keeps its labels and the caller's payload.
	custom := events[6]
	if custom.Step != 2 || custom.Node != node.ID || custom.Rubric != 3 {
		t.Errorf("custom event labels = %+v", custom)
	}
	var got judge
	if err := store.DecodePayload(custom, &got); err != nil || !reflect.DeepEqual(got, payload) {
		t.Errorf("custom payload = %+v (%v), want %+v", got, err, payload)
	}
	if len(events[7].Payload) != 0 {
		t.Errorf("nil payload stored as %x", events[7].Payload)
	}
	var wrong model.Node
	if err := store.DecodePayload(model.Event{Seq: 1, Payload: []byte{0xc1}}, &wrong); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("DecodePayload of garbage: %v, want ErrCorrupt", err)
	}
	// Events(from) starts in the middle.
	var tail []uint64
	inRun(t, db, false, "r", func(r *store.RunTx) error {
		return r.Events(9, func(e model.Event) error { tail = append(tail, e.Seq); return nil })
	})
	if !reflect.DeepEqual(tail, []uint64{9, 10, 11, 12}) {
		t.Errorf("Events(9) = %v", tail)
	}
}

// Records handed out are copies: changing them, or holding them past the
// transaction and further writes, never changes what the store returns.
func TestReadsAreCopies(t *testing.T) {
	db := storetest.Open(t)
	f := buildFixture(t, db)
	var n model.Node
	var traj []model.PathTurn
	var g model.Group
	inRun(t, db, false, f.Run, func(r *store.RunTx) (err error) {
		if n, err = r.Node(f.A); err != nil {
			return err
		}
		if g, err = r.GroupAt(fixtureStep, f.G1.ID); err != nil {
			return err
		}
		traj, err = r.Trajectory(f.B)
		return err
	})
	before := dumpRun(t, db, f.Run)
	n.Scores[0].Value = 0.01
	n.Decisions[0].Action = "mutated"
	n.EnvState[0] = 0xEE
	g.Roots[0] = 12345
	traj[0].ActionTokens[0] = 42
	// Grow the file (and bbolt's mmap) so values that still pointed into the
	// old mapping would show garbage.
	inRun(t, db, true, f.Run, func(r *store.RunTx) error {
		g, err := r.OpenGroup(store.GroupSpec{Step: 9})
		if err != nil {
			return err
		}
		big := textTurn("big")
		big.Observation = string(bytes.Repeat([]byte("x"), 1<<20))
		nd, err := r.AddNode(store.NodeSpec{Step: 9, Group: g.ID})
		if err != nil {
			return err
		}
		return r.AppendTurns(nd.ID, 0, big, big, big)
	})
	if traj[1].Action != "act a1" || traj[2].Action != "act b0" || traj[2].Observation != "obs b0" {
		t.Errorf("trajectory held past its transaction changed: %+v", traj[:3])
	}
	after := dumpRun(t, db, f.Run)
	for _, nd := range after.Nodes {
		if nd.ID == f.A && (nd.Scores[0].Value != 0.75 || nd.Decisions[0].Action != model.ActionExpand || nd.EnvState[0] != 0) {
			t.Errorf("mutating a returned node changed the store: %+v", nd)
		}
	}
	for id, tr := range before.Traj {
		if !reflect.DeepEqual(tr, after.Traj[id]) {
			t.Errorf("trajectory of %d changed after mutating a returned copy", id)
		}
	}
	if !reflect.DeepEqual(before.Nodes, after.Nodes[:len(before.Nodes)]) || !reflect.DeepEqual(before.Groups, after.Groups[:len(before.Groups)]) {
		t.Error("mutating returned records changed later reads")
	}
}

func TestReopenReadsBackEverything(t *testing.T) {
	path := tempPath(t, "patr.db")
	db := storetest.OpenPath(t, path, storetest.Options())
	f := buildFixture(t, db)
	update(t, db, func(tx *store.Tx) error { // a second run, so runs do not bleed into each other
		r, err := tx.CreateRun("r2", []byte(`{}`), nil)
		if err != nil {
			return err
		}
		g, err := r.OpenGroup(store.GroupSpec{Step: 1})
		if err != nil {
			return err
		}
		n, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID})
		if err != nil {
			return err
		}
		return r.AppendTurns(n.ID, 0, textTurns("z", 5)...)
	})
	want := map[string]runDump{f.Run: dumpRun(t, db, f.Run), "r2": dumpRun(t, db, "r2")}
	if len(want[f.Run].Nodes) != 6 || len(want[f.Run].Events) < 20 || len(want[f.Run].Rubrics) != 4 || len(want[f.Run].Checkpoints) != 2 {
		t.Fatalf("fixture is smaller than expected: %d nodes %d events %d rubrics %d checkpoints",
			len(want[f.Run].Nodes), len(want[f.Run].Events), len(want[f.Run].Rubrics), len(want[f.Run].Checkpoints))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, cache := range []int{16, store.NoCache} {
		o := storetest.Options()
		o.CacheNodes = cache
		db2 := storetest.OpenPath(t, path, o)
		for id, w := range want {
			if got := dumpRun(t, db2, id); !reflect.DeepEqual(got, w) {
				t.Errorf("cache %d: run %s after reopen differs\n got %+v\nwant %+v", cache, id, got, w)
			}
		}
		if err := db2.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
