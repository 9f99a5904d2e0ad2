package replay_test

import (
	"errors"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/replay/internal/replaytest"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

type snap struct {
	state  *replay.State
	extras liveExtras
}

// TestStateAtEveryCommit builds a run one mutation per transaction,
// snapshots the live store after each commit, and checks that the state
// replay rebuilds after that commit's last event equals the snapshot.
func TestStateAtEveryCommit(t *testing.T) {
	db := storetest.Open(t)
	spec := replaytest.SmallSpec("r1")
	snaps := map[uint64]snap{}
	take := func() {
		if err := db.View(func(tx *store.Tx) error {
			r, err := tx.Run(spec.ID)
			if err != nil {
				return err
			}
			s := snapshot(t, r)
			snaps[s.Seq] = snap{s, readExtras(t, r, s)}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Update(func(tx *store.Tx) error { _, err := replaytest.CreateRun(tx, spec); return err }); err != nil {
		t.Fatal(err)
	}
	take()
	replaytest.GrowRun(t, spec, replaytest.PerTx(t, db, spec.ID, take))

	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run(spec.ID)
		if err != nil {
			return err
		}
		last := r.LastSeq()
		if len(snaps) < 200 {
			t.Fatalf("only %d commits: the fixture is too small to mean much", len(snaps))
		}
		// One pass: apply every event and compare at each commit.
		st := replay.NewState(spec.ID)
		compared := 0
		err = replay.Iterate(r, 0, 0, func(e replay.Event) error {
			if err := st.Apply(e); err != nil {
				return err
			}
			if sn, ok := snaps[e.Seq]; ok {
				compared++
				for _, d := range diffState(st, sn.state, sn.extras) {
					t.Errorf("after event %d (%s): %s", e.Seq, e.Kind, d)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if compared != len(snaps) {
			t.Errorf("compared %d commits, took %d snapshots", compared, len(snaps))
		}
		// StateAt from scratch at a spread of points, and at the end.
		for seq := uint64(1); seq <= last; seq += 41 {
			checkStateAt(t, r, seq, snaps)
		}
		checkStateAt(t, r, last, snaps)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func checkStateAt(t *testing.T, r *store.RunTx, seq uint64, snaps map[uint64]snap) {
	t.Helper()
	// The nearest commit at or after seq: a transaction's inner events
	// are never visible from outside, so compare at the commit point.
	for ; seq <= r.LastSeq(); seq++ {
		if _, ok := snaps[seq]; ok {
			break
		}
	}
	sn := snaps[seq]
	st, err := replay.StateAt(r, seq)
	if err != nil {
		t.Fatalf("StateAt(%d): %v", seq, err)
	}
	for _, d := range diffState(st, sn.state, sn.extras) {
		t.Errorf("StateAt(%d): %s", seq, d)
	}
}

// TestStateAtLastEqualsLive: a larger run with width caps, ties and
// rubrics, built in one transaction; the state after the last event is
// the store.
func TestStateAtLastEqualsLive(t *testing.T) {
	db := storetest.Open(t)
	spec := replaytest.MediumSpec("big")
	replaytest.BuildOneTx(t, db, spec)
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run(spec.ID)
		if err != nil {
			return err
		}
		st, err := replay.StateAt(r, r.LastSeq())
		if err != nil {
			return err
		}
		want := snapshot(t, r)
		for _, d := range diffState(st, want, readExtras(t, r, want)) {
			t.Error(d)
		}
		if len(st.Nodes) < 50 || len(st.Rubrics) < 4 || st.Custom["rubric.judge"] != spec.Steps {
			t.Errorf("fixture too thin: %d nodes, %d rubrics, custom %v", len(st.Nodes), len(st.Rubrics), st.Custom)
		}
		pools := st.Pools()
		for _, p := range []model.RubricPool{model.PoolCandidate, model.PoolPublic, model.PoolRetired, model.PoolMerged} {
			if len(pools[p]) == 0 {
				t.Errorf("no rubric ends in pool %s: the fixture should exercise every pool", p)
			}
		}
		if st.Info.Status != model.RunFinished || st.Info.LastStep != uint64(spec.Steps) {
			t.Errorf("run record %+v", st.Info)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestStateAtBounds(t *testing.T) {
	db := storetest.Open(t)
	spec := replaytest.SmallSpec("r")
	replaytest.BuildOneTx(t, db, spec)
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run(spec.ID)
		if err != nil {
			return err
		}
		if _, err := replay.StateAt(r, r.LastSeq()+1); !errors.Is(err, replay.ErrSeqRange) {
			t.Errorf("StateAt past the end: %v, want ErrSeqRange", err)
		}
		st, err := replay.StateAt(r, 0)
		if err != nil || len(st.Nodes) != 0 || st.Seq != 0 || st.Info.ID != "" {
			t.Errorf("StateAt(0) = %+v, %v; want the empty state", st, err)
		}
		st, err = replay.StateAt(r, 1)
		if err != nil || st.Info.ID != spec.ID || st.Info.Status != model.RunRunning {
			t.Errorf("StateAt(1): run %+v, %v; want the created run", st.Info, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestApplyRejectsBrokenLog: events out of order or about records no
// event created are ErrLog (and ErrCorrupt), not a silently wrong state.
func TestApplyRejectsBrokenLog(t *testing.T) {
	spec := replaytest.SmallSpec("r")
	events := smallRunEvents(t, spec)
	st := replay.NewState(spec.ID)
	if err := st.Apply(events[1]); err != nil {
		t.Fatal(err)
	}
	if err := st.Apply(events[0]); !errors.Is(err, replay.ErrLog) || !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("event going backwards: %v, want ErrLog and ErrCorrupt", err)
	}
	// A node.add whose group was never opened.
	for _, e := range events {
		if e.Kind == model.EvNodeAdd {
			if err := replay.NewState(spec.ID).Apply(e); !errors.Is(err, replay.ErrLog) {
				t.Errorf("node.add without its group: %v, want ErrLog", err)
			}
			break
		}
	}
}

// smallRunEvents builds spec's run in one transaction and returns its
// event log.
func smallRunEvents(t *testing.T, spec replaytest.RunSpec) []replay.Event {
	t.Helper()
	db := storetest.Open(t)
	replaytest.BuildOneTx(t, db, spec)
	var events []replay.Event
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run(spec.ID)
		if err != nil {
			return err
		}
		return replay.Iterate(r, 0, 0, func(e replay.Event) error { events = append(events, e); return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	return events
}

// An event handed to Apply undecoded whose payload does not decode is
// ErrCorrupt, and the state stays where it was: the event is not counted
// as a custom one and the state's place in the log does not move.
func TestApplyRefusesAnUndecodablePayload(t *testing.T) {
	st := replay.NewState("r")
	bad := replay.Event{Event: model.Event{Seq: 1, Kind: model.EvNodeAdd, Group: 1, Node: 1, Payload: []byte{0xc1}}}
	if err := st.Apply(bad); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("a node.add whose payload does not decode: %v, want ErrCorrupt", err)
	}
	if st.Seq != 0 || len(st.Custom) != 0 || len(st.Nodes) != 0 {
		t.Errorf("the refused event moved the state: seq %d, custom %v, nodes %v", st.Seq, st.Custom, st.Nodes)
	}
}

// GroupList orders by step, then by id within a step, whatever the ids
// of other steps: ids come from one sequence of the run, so a step whose
// groups were opened after a later step's holds the smaller ones.
func TestGroupListOrdersByStepThenID(t *testing.T) {
	st := replay.NewState("r")
	groups := []model.Group{{Step: 2, ID: 1}, {Step: 1, ID: 4}, {Step: 2, ID: 2}, {Step: 1, ID: 3}}
	for i, g := range groups {
		e := replay.Event{Event: model.Event{Seq: uint64(i + 1), Kind: model.EvGroupOpen, Step: g.Step, Group: g.ID}, Record: &g}
		if err := st.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	want := []model.Group{{Step: 1, ID: 3}, {Step: 1, ID: 4}, {Step: 2, ID: 1}, {Step: 2, ID: 2}}
	for range 10 { // map order differs from call to call
		got := st.GroupList()
		if len(got) != len(want) {
			t.Fatalf("GroupList: %v", got)
		}
		for i := range want {
			if got[i].Step != want[i].Step || got[i].ID != want[i].ID {
				t.Fatalf("GroupList: %v, want (step, id) %v", got, want)
			}
		}
	}
}

// A node.add of a node already added, or under a parent no event created,
// is a broken log (ErrLog), and changes nothing.
func TestApplyRefusesAMisplacedNodeAdd(t *testing.T) {
	st := replay.NewState("r")
	apply := func(seq uint64, kind model.EventKind, rec any) error {
		return st.Apply(replay.Event{Event: model.Event{Seq: seq, Kind: kind, Group: 1}, Record: rec})
	}
	if err := apply(1, model.EvGroupOpen, &model.Group{ID: 1, Step: 1}); err != nil {
		t.Fatal(err)
	}
	if err := apply(2, model.EvNodeAdd, &model.Node{ID: 1, Group: 1, Step: 1}); err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]*model.Node{
		"added twice":    {ID: 1, Group: 1, Step: 1, Ordinal: 1},
		"unknown parent": {ID: 2, Group: 1, Step: 1, Parent: 9},
	} {
		if err := apply(3, model.EvNodeAdd, n); !errors.Is(err, replay.ErrLog) {
			t.Errorf("node.add %s: %v, want ErrLog", name, err)
		}
	}
	if g := st.Groups[1]; st.Seq != 2 || len(st.Nodes) != 1 || st.Nodes[1].Ordinal != 0 || len(g.Roots) != 1 {
		t.Errorf("refused node.adds changed the state: seq %d, nodes %v, roots %v", st.Seq, st.Nodes, g.Roots)
	}
}
