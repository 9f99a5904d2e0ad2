package store_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// The LRU of decoded nodes must be invisible: reads after writes (in the
// same transaction, in later ones, after rollbacks) and reads of old
// snapshots return exactly what bbolt holds for that transaction.

// chainModel is what the test expects of a growing chain of forks.
type chainModel struct {
	ids    []uint64 // root first; the last is the active leaf
	turns  map[uint64]int
	forks  map[uint64]int
	status map[uint64]model.NodeStatus
}

func (m *chainModel) pathLen(id uint64) int {
	total := 0
	for i, n := range m.ids {
		if n == id {
			return total + m.turns[n]
		}
		total += m.forks[m.ids[i+1]]
	}
	panic("node not in chain")
}

func (m *chainModel) check(t *testing.T, label string, r *store.RunTx) {
	t.Helper()
	for _, id := range m.ids {
		n, err := r.Node(id)
		if err != nil {
			t.Fatalf("%s: node %d: %v", label, id, err)
		}
		if n.Turns != m.turns[id] || n.Status != m.status[id] {
			t.Fatalf("%s: node %d is %s with %d turns, want %s with %d", label, id, n.Status, n.Turns, m.status[id], m.turns[id])
		}
		traj, err := r.Trajectory(id)
		if err != nil {
			t.Fatalf("%s: trajectory %d: %v", label, id, err)
		}
		if len(traj) != m.pathLen(id) {
			t.Fatalf("%s: trajectory of %d has %d turns, want %d", label, id, len(traj), m.pathLen(id))
		}
	}
}

func TestCacheReadsAfterWrites(t *testing.T) {
	o := storetest.Options()
	o.CacheNodes = 3 // smaller than the chain: evictions happen too
	db := storetest.OpenPath(t, tempPath(t, "patr.db"), o)
	m := &chainModel{turns: map[uint64]int{}, forks: map[uint64]int{}, status: map[uint64]model.NodeStatus{}}
	var gid uint64
	update(t, db, func(tx *store.Tx) error {
		r, err := tx.CreateRun("r", nil, nil)
		if err != nil {
			return err
		}
		g, err := r.OpenGroup(store.GroupSpec{Step: 1})
		if err != nil {
			return err
		}
		gid = g.ID
		n, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID})
		if err != nil {
			return err
		}
		m.ids = append(m.ids, n.ID)
		m.status[n.ID] = model.NodeActive
		return nil
	})
	for round := range 24 {
		leaf := m.ids[len(m.ids)-1]
		// Warm the cache with the current state.
		inRun(t, db, false, "r", func(r *store.RunTx) error { m.check(t, fmt.Sprintf("round %d before", round), r); return nil })

		// A write that is rolled back leaves no trace, cached or not.
		boom := errors.New("rollback")
		err := db.Update(func(tx *store.Tx) error {
			r, err := tx.Run("r")
			if err != nil {
				return err
			}
			if err := r.AppendTurns(leaf, m.turns[leaf], textTurn("ghost")); err != nil {
				return err
			}
			if err := r.SetNodeStatus(leaf, model.NodeCompleted); err != nil {
				return err
			}
			if n, err := r.Node(leaf); err != nil || n.Status != model.NodeCompleted {
				t.Fatalf("round %d: uncommitted write not visible in its own tx: %+v %v", round, n, err)
			}
			return boom
		})
		if err != boom {
			t.Fatalf("round %d: %v", round, err)
		}
		inRun(t, db, false, "r", func(r *store.RunTx) error { m.check(t, fmt.Sprintf("round %d after rollback", round), r); return nil })

		inRun(t, db, true, "r", func(r *store.RunTx) error {
			m.check(t, fmt.Sprintf("round %d in tx, before writing", round), r) // reads through the cache
			if err := r.AppendTurns(leaf, m.turns[leaf], textTurns("x", 2)...); err != nil {
				return err
			}
			m.turns[leaf] += 2
			m.check(t, fmt.Sprintf("round %d in tx, after turns", round), r)
			if round%3 == 2 {
				// Expand the leaf; the child forks at its last turn or one before.
				if err := r.Route(leaf, model.Decision{Action: model.ActionExpand}); err != nil {
					return err
				}
				m.status[leaf] = model.NodeExpanded
				fork := m.turns[leaf] - round%2
				kid, err := r.AddNode(store.NodeSpec{Step: 1, Group: gid, Parent: leaf, Fork: fork})
				if err != nil {
					return err
				}
				m.ids = append(m.ids, kid.ID)
				m.forks[kid.ID], m.status[kid.ID] = fork, model.NodeActive
				if err := r.AppendTurns(kid.ID, 0, textTurn("k")); err != nil {
					return err
				}
				m.turns[kid.ID] = 1
				m.check(t, fmt.Sprintf("round %d in tx, after expanding", round), r)
			}
			return nil
		})
		inRun(t, db, false, "r", func(r *store.RunTx) error { m.check(t, fmt.Sprintf("round %d after commit", round), r); return nil })
	}
	if len(m.ids) < 8 {
		t.Fatalf("chain only %d deep", len(m.ids))
	}
	if s := db.CacheStats(); s.Hits == 0 || s.Len > 3 {
		t.Errorf("cache stats %+v: want hits and at most 3 entries", s)
	}
}

// heldView is a View transaction kept open in its own goroutine, running
// the functions it is given, so a test can interleave it with commits.
type heldView struct {
	ops  chan func(*store.RunTx)
	ack  chan struct{}
	done chan struct{}
	once sync.Once
}

func holdView(t *testing.T, db *store.DB, run string) *heldView {
	t.Helper()
	h := &heldView{ops: make(chan func(*store.RunTx)), ack: make(chan struct{}), done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		defer close(h.done)
		_ = db.View(func(tx *store.Tx) error {
			r, err := tx.Run(run)
			started <- err
			if err != nil {
				return err
			}
			for fn := range h.ops {
				fn(r)
				h.ack <- struct{}{}
			}
			return nil
		})
	}()
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	// However the test ends, the View must end before the DB closes.
	t.Cleanup(h.close)
	return h
}

// do runs fn inside the held View and waits for it. fn runs on another
// goroutine: it must report with t.Error, never t.Fatal.
func (h *heldView) do(fn func(*store.RunTx)) { h.ops <- fn; <-h.ack }

func (h *heldView) close() { h.once.Do(func() { close(h.ops); <-h.done }) }

// A View that began before a commit keeps reading its own snapshot: after a
// newer reader has put the committed nodes in the cache, and without
// putting its old nodes where a newer reader would find them.
func TestCacheKeepsOldSnapshots(t *testing.T) {
	db := storetest.Open(t)
	var root, bulk uint64
	nodes := make([]uint64, 3) // children of root: read old-first, new-first, never before the commit
	update(t, db, func(tx *store.Tx) error {
		r, n, err := runWithRoot(tx)
		if err != nil {
			return err
		}
		root = n.ID
		group := n.Group
		if err := r.AppendTurns(root, 0, textTurns("r", 3)...); err != nil {
			return err
		}
		if err := r.Route(root, model.Decision{Action: model.ActionExpand}); err != nil {
			return err
		}
		for i := range nodes {
			n, err := r.AddNode(store.NodeSpec{Step: 1, Group: group, Parent: root, Fork: 3, Ordinal: i})
			if err != nil {
				return err
			}
			nodes[i] = n.ID
			if err := r.AppendTurns(n.ID, 0, textTurns("l", 2)...); err != nil {
				return err
			}
		}
		// A big turn, rewritten small below, leaves megabytes of free pages:
		// the commit under test then needs no larger mmap, which bbolt could
		// only take once every reader (the held View) has finished.
		n, err = r.AddNode(store.NodeSpec{Step: 1, Group: group, Ordinal: 1})
		if err != nil {
			return err
		}
		bulk = n.ID
		big := textTurn("big")
		big.Observation = strings.Repeat("o", 4<<20)
		return r.AppendTurns(bulk, 0, big)
	})
	inRun(t, db, true, "r", func(r *store.RunTx) error { return r.AppendTurns(bulk, 0, textTurn("small")) })
	inRun(t, db, true, "r", func(r *store.RunTx) error { return r.SetEnvState(bulk, []byte("released")) })

	type state struct {
		status  model.NodeStatus
		turns   int
		trajLen int
	}
	// read reports errors with t.Error: it also runs in the held View's
	// goroutine, where t.Fatal would leave the test waiting forever.
	read := func(t *testing.T, r *store.RunTx, id uint64) state {
		n, err := r.Node(id)
		if err != nil {
			t.Error(err)
			return state{}
		}
		traj, err := r.Trajectory(id)
		if err != nil {
			t.Error(err)
		}
		return state{n.Status, n.Turns, len(traj)}
	}
	oldState := state{model.NodeActive, 2, 5}
	newState := state{model.NodePruned, 3, 6}

	old := holdView(t, db, "r")
	var oldFrontier []uint64
	old.do(func(r *store.RunTx) {
		if got := read(t, r, nodes[0]); got != oldState {
			t.Errorf("before the commit: %+v", got)
		}
		oldFrontier, _ = r.Frontier()
	})
	done := make(chan error, 1)
	go func() {
		done <- db.UpdateRun("r", func(r *store.RunTx) error {
			for _, id := range nodes {
				if err := r.AppendTurns(id, 2, textTurn("new")); err != nil {
					return err
				}
				if err := r.Route(id, model.Decision{Action: model.ActionPrune}); err != nil {
					return err
				}
			}
			return nil
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		old.close()
		<-done
		t.Fatal("the write blocked behind the open View (bbolt remapping?)")
	}

	// The old reader is first to read nodes[1] after the commit: it must
	// not seed the cache with its version.
	old.do(func(r *store.RunTx) {
		if got := read(t, r, nodes[1]); got != oldState {
			t.Errorf("old View, node read first after the commit: %+v, want %+v", got, oldState)
		}
	})
	// Newer readers, twice so the second is served from the cache.
	for i := range 2 {
		inRun(t, db, false, "r", func(r *store.RunTx) error {
			for _, id := range nodes {
				if got := read(t, r, id); got != newState {
					t.Errorf("new View %d, node %d: %+v, want %+v", i, id, got, newState)
				}
			}
			return nil
		})
	}
	// The old reader still sees its snapshot for all of them, including
	// nodes[2], which it reads for the first time now that the cache holds
	// the newer version.
	old.do(func(r *store.RunTx) {
		for _, id := range nodes {
			if got := read(t, r, id); got != oldState {
				t.Errorf("old View after the cache filled, node %d: %+v, want %+v", id, got, oldState)
			}
		}
		if f, _ := r.Frontier(); fmt.Sprint(f) != fmt.Sprint(oldFrontier) {
			t.Errorf("old View's frontier moved: %v -> %v", oldFrontier, f)
		}
	})
	old.close()
	if s := db.CacheStats(); s.Hits == 0 {
		t.Errorf("cache never hit: %+v", s)
	}
}

func TestCacheStatsCountHits(t *testing.T) {
	for _, size := range []int{16384, store.NoCache} {
		t.Run(fmt.Sprintf("cache %d", size), func(t *testing.T) {
			o := storetest.Options()
			o.CacheNodes = size
			db := storetest.OpenPath(t, tempPath(t, "patr.db"), o)
			var leaf uint64
			update(t, db, func(tx *store.Tx) error {
				r, err := tx.CreateRun("r", nil, nil)
				if err != nil {
					return err
				}
				g, err := r.OpenGroup(store.GroupSpec{Step: 1})
				if err != nil {
					return err
				}
				parent := uint64(0)
				for depth := range 5 {
					n, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Parent: parent, Fork: min(depth, 1)})
					if err != nil {
						return err
					}
					if err := r.AppendTurns(n.ID, 0, textTurns("t", 2)...); err != nil {
						return err
					}
					if depth < 4 {
						if err := r.Route(n.ID, model.Decision{Action: model.ActionExpand}); err != nil {
							return err
						}
					}
					parent, leaf = n.ID, n.ID
				}
				return nil
			})
			traj := func() {
				inRun(t, db, false, "r", func(r *store.RunTx) error {
					p, err := r.Trajectory(leaf)
					if err == nil && len(p) != 2+4*1 {
						t.Errorf("trajectory has %d turns, want 6", len(p))
					}
					return err
				})
			}
			traj() // warm
			warm := db.CacheStats()
			const reads = 10
			for range reads {
				traj()
			}
			s := db.CacheStats()
			if size == store.NoCache {
				if s.Hits != 0 || s.Len != 0 {
					t.Errorf("disabled cache reports %+v", s)
				}
				return
			}
			if s.Hits-warm.Hits < reads*5 || s.Misses != warm.Misses || s.Len < 5 {
				t.Errorf("after %d warm reads of a 5-node path: %+v (warm %+v); want >= %d new hits, no new misses",
					reads, s, warm, reads*5)
			}
		})
	}
}

// The versions a commit wrote go into the node cache once it has
// finished: the next transaction, which continues the branches this one
// wrote, reads them without decoding, and gets exactly what was written.
// A copy AddNode returned does not reach the cached version.
func TestCacheHoldsCommittedWrites(t *testing.T) {
	db := storetest.Open(t)
	var ids []uint64
	update(t, db, func(tx *store.Tx) error {
		r, n, err := runWithRoot(tx)
		if err != nil {
			return err
		}
		ids = append(ids, n.ID)
		for o := 1; o < 4; o++ {
			n, err := r.AddNode(store.NodeSpec{Step: 1, Group: n.Group, Ordinal: o, EnvState: []byte("env")})
			if err != nil {
				return err
			}
			n.EnvState[0] = 'X' // the caller's copy
			ids = append(ids, n.ID)
		}
		return nil
	})
	inRun(t, db, true, "r", func(r *store.RunTx) error {
		for i, id := range ids {
			if err := r.AppendTurns(id, 0, textTurns("t", i+1)...); err != nil {
				return err
			}
		}
		return r.Score(ids[0], model.Score{Value: 0.5, Turn: 1})
	})
	before := db.CacheStats()
	inRun(t, db, false, "r", func(r *store.RunTx) error {
		for i, id := range ids {
			n, err := r.Node(id)
			if err != nil {
				return err
			}
			if n.Turns != i+1 || (i > 0 && string(n.EnvState) != "env") || (i == 0 && len(n.Scores) != 1) {
				t.Errorf("node %d: %d turns, env state %q, scores %v; want %d turns, env, one score on the first", id, n.Turns, n.EnvState, n.Scores, i+1)
			}
		}
		return nil
	})
	after := db.CacheStats()
	if hits, misses := after.Hits-before.Hits, after.Misses-before.Misses; hits != uint64(len(ids)) || misses != 0 {
		t.Errorf("reading the %d nodes the last commit wrote: %d hits, %d misses; want %d hits", len(ids), hits, misses, len(ids))
	}
}

// A commit that fails (here the file reaches MaxSize) after the cache
// marked the nodes it wrote pending leaves the cached versions, which are
// still the file's: a later read gets the node as it was, from the cache,
// and the same as a fresh process decodes from the file.
func TestCacheAfterAFailedCommit(t *testing.T) {
	path := tempPath(t, "capped.db")
	o := storetest.Options()
	o.MaxSize = 2 << 20
	db := storetest.OpenPath(t, path, o)
	var id uint64
	update(t, db, func(tx *store.Tx) error {
		r, n, err := runWithRoot(tx)
		id = n.ID
		if err != nil {
			return err
		}
		return r.AppendTurns(id, 0, textTurns("t", 2)...)
	})
	read := func(db *store.DB) (n model.Node) {
		inRun(t, db, false, "r", func(r *store.RunTx) (err error) { n, err = r.Node(id); return })
		return n
	}
	want := read(db) // and cached
	big := textTurns("big", 300)
	for i := range big {
		big[i].Observation = strings.Repeat("o", 10_000)
	}
	err := db.UpdateRun("r", func(r *store.RunTx) error {
		if err := r.Score(id, model.Score{Value: 1, Turn: 2}); err != nil {
			return err
		}
		return r.AppendTurns(id, 2, big...)
	})
	if !errors.Is(err, store.ErrFull) {
		t.Fatalf("a 3 MB commit into a 2 MiB file: %v, want ErrFull", err)
	}
	before := db.CacheStats()
	got := read(db)
	if hits := db.CacheStats().Hits - before.Hits; hits != 1 {
		t.Errorf("reading the node after the failed commit: %d cache hits, want 1", hits)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("after the failed commit the node reads\n%+v\nwant\n%+v", got, want)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	fresh := storetest.OpenPath(t, path, storetest.Options())
	if got := read(fresh); !reflect.DeepEqual(got, want) {
		t.Errorf("a fresh process reads\n%+v\nwant\n%+v", got, want)
	}
}

// The cache keys a node by its run and its id together: two runs number
// their nodes alike, and each reads its own, warm and after the commit
// that wrote both.
func TestCacheKeepsRunsApart(t *testing.T) {
	db := storetest.Open(t)
	runs := []string{"a", "b", "c"}
	update(t, db, func(tx *store.Tx) error {
		for i, id := range runs {
			r, err := tx.CreateRun(id, nil, nil)
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
			if err := r.AppendTurns(n.ID, 0, textTurns(id, i+1)...); err != nil {
				return err
			}
		}
		return nil
	})
	for range 2 { // the commit's versions, then the readers' own
		for i, id := range runs {
			inRun(t, db, false, id, func(r *store.RunTx) error {
				n, err := r.Node(1)
				if err == nil && n.Turns != i+1 {
					t.Errorf("run %s: node 1 has %d turns, want %d", id, n.Turns, i+1)
				}
				return err
			})
		}
	}
	if s := db.CacheStats(); s.Hits < uint64(2*len(runs)) || s.Len != len(runs) {
		t.Errorf("cache %+v: want every read a hit, one entry a run", s)
	}
}
