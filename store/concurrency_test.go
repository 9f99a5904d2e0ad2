package store_test

// Concurrency under -race: View readers run while one
// writer commits the crash loop's workload, one interval per transaction.
// Every reader snapshot must be
//
//   - repeatable: two full reads inside one View are equal;
//   - closed: every node's parent exists in it, every frontier entry is an
//     active node and every active node is on the frontier;
//   - coherent with the node LRU: the record served through the cache
//     equals the one decoded from the snapshot's own page (cache.go's
//     protocol must never hand a reader a node from another snapshot);
//   - monotonic: a reader never sees fewer committed transactions than in
//     its previous View.
//
// Check runs concurrently too: it must stay clean while the writer commits.

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

func TestConcurrentReadersSeeSnapshots(t *testing.T) {
	for _, cache := range []int{store.NoCache, 7, 16384} {
		t.Run(fmt.Sprintf("cache=%d", cache), func(t *testing.T) {
			testConcurrentReaders(t, cache)
		})
	}
}

func testConcurrentReaders(t *testing.T, cacheNodes int) {
	txs := uint64(80)
	if testing.Short() {
		txs = 40
	}
	w := newWorkload(7, nil)
	o := w.options(true)
	o.CacheNodes = cacheNodes
	db, err := store.Open(filepath.Join(t.TempDir(), "c.db"), o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	var done atomic.Bool
	var views, checks atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	for rd := 0; rd < 3; rd++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last uint64
			for !done.Load() {
				var c uint64
				err := db.View(func(tx *store.Tx) error {
					a, err := readSnapshot(tx)
					if err != nil {
						return err
					}
					b, err := readSnapshot(tx)
					if err != nil {
						return err
					}
					if !reflect.DeepEqual(a, b) {
						return fmt.Errorf("two reads in one View differ (txs %d vs %d)", a.txs, b.txs)
					}
					c = a.txs
					return nil
				})
				if err != nil {
					report(err)
					return
				}
				if c < last {
					report(fmt.Errorf("a later View saw %d transactions after %d", c, last))
					return
				}
				last = c
				views.Add(1)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; !done.Load(); n++ {
			// DB.Check holds writers off; Tx.Check inside a View does
			// not, and must skip what a commit could make look wrong.
			var vs []store.Violation
			var err error
			if n%2 == 0 {
				vs, err = db.Check(nil)
			} else {
				err = db.View(func(tx *store.Tx) error { vs, _ = tx.Check(nil); return nil })
			}
			if err != nil {
				report(err)
				return
			}
			if len(vs) > 0 {
				report(fmt.Errorf("Check during writes: %v", vs))
				return
			}
			checks.Add(1)
		}
	}()
	for i := uint64(1); i <= txs; i++ {
		if err := w.apply(db, i, i == 1); err != nil {
			done.Store(true)
			wg.Wait()
			t.Fatalf("writer, transaction %d: %v", i, err)
		}
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := db.CacheStats()
	t.Logf("%d transactions, %d reader views (each read twice), %d concurrent checks; cache hits %d misses %d",
		txs, views.Load(), checks.Load(), st.Hits, st.Misses)
	if views.Load() < 10 {
		t.Errorf("only %d reader views ran alongside the writer", views.Load())
	}
}

// snapshot is everything a reader sees of the last run.
type snapshot struct {
	txs      uint64
	run      model.Run
	groups   []model.Group
	nodes    []model.Node
	frontier []uint64
	turns    map[uint64]int
	paths    map[uint64]int
}

// readSnapshot reads the last run through the API and checks the
// snapshot's invariants on the way.
func readSnapshot(tx *store.Tx) (*snapshot, error) {
	s := &snapshot{turns: map[uint64]int{}, paths: map[uint64]int{}}
	ids, err := tx.RunIDs()
	if err != nil || len(ids) == 0 {
		return s, err
	}
	for _, id := range ids {
		r, err := tx.Run(id)
		if err != nil {
			return nil, err
		}
		if err := r.Events(1, func(e model.Event) error {
			if e.Kind == evTxMarker {
				s.txs++
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	r, err := tx.Run(ids[len(ids)-1])
	if err != nil {
		return nil, err
	}
	if s.run, err = r.Info(); err != nil {
		return nil, err
	}
	if s.groups, err = r.Groups(0); err != nil {
		return nil, err
	}
	if s.frontier, err = r.Frontier(); err != nil {
		return nil, err
	}
	raw := storetest.BoltTx(tx).Bucket([]byte("runs")).Bucket([]byte(r.ID())).Bucket([]byte("nodes"))
	byID := map[uint64]model.Node{}
	c := raw.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		id := binary.BigEndian.Uint64(k)
		n, err := r.Node(id) // through the LRU
		if err != nil {
			return nil, err
		}
		page, err := store.DecodeRecord("node", v) // from this snapshot's page
		if err != nil {
			return nil, err
		}
		if !reflect.DeepEqual(normNode(n), normNode(*page.(*model.Node))) {
			return nil, fmt.Errorf("node %d from the cache differs from the snapshot's page:\n cache %+v\n page  %+v", id, n, *page.(*model.Node))
		}
		byID[id] = n
		s.nodes = append(s.nodes, n)
	}
	active := 0
	for _, n := range s.nodes {
		if n.Parent != 0 {
			if _, ok := byID[n.Parent]; !ok {
				return nil, fmt.Errorf("node %d is visible but its parent %d is not", n.ID, n.Parent)
			}
		}
		if n.Status == model.NodeActive {
			active++
		}
		turns, err := r.Turns(n.ID)
		if err != nil {
			return nil, err
		}
		s.turns[n.ID] = len(turns)
		path, err := r.Trajectory(n.ID)
		if err != nil {
			return nil, err
		}
		if len(path) != n.PathLen() {
			return nil, fmt.Errorf("node %d: trajectory of %d turns, path length %d", n.ID, len(path), n.PathLen())
		}
		s.paths[n.ID] = len(path)
	}
	for _, id := range s.frontier {
		n, ok := byID[id]
		if !ok || n.Status != model.NodeActive {
			return nil, fmt.Errorf("frontier lists node %d, which is %q in the same snapshot", id, n.Status)
		}
	}
	if active != len(s.frontier) {
		return nil, fmt.Errorf("%d active nodes but %d frontier entries", active, len(s.frontier))
	}
	return s, nil
}
