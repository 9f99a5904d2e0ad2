package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// timeLoop calls fn until budget has elapsed and at least minN calls were
// made, after one untimed warm-up call, and returns nanoseconds per call.
func timeLoop(budget time.Duration, minN int, fn func() error) (float64, error) {
	if err := fn(); err != nil {
		return 0, err
	}
	n := 0
	t0 := time.Now()
	for {
		if err := fn(); err != nil {
			return 0, err
		}
		n++
		if el := time.Since(t0); el >= budget && n >= minN {
			return float64(el.Nanoseconds()) / float64(n), nil
		}
	}
}

// pairLoop alternates short blocks of calls to a and b until budget has
// passed and each side ran at least five blocks, after one untimed call of
// each, and returns the median nanoseconds per call of each side over its
// blocks. Alternating in blocks of budget/10 lets a burst of load from
// elsewhere on the machine fall on both sides alike.
func pairLoop(budget time.Duration, a, b func() error) (float64, float64, error) {
	if err := a(); err != nil {
		return 0, 0, err
	}
	if err := b(); err != nil {
		return 0, 0, err
	}
	block := budget / 10
	var as, bs []float64
	t0 := time.Now()
	for len(as) < 5 || time.Since(t0) < budget {
		x, err := timeBlock(block, a)
		if err != nil {
			return 0, 0, err
		}
		y, err := timeBlock(block, b)
		if err != nil {
			return 0, 0, err
		}
		as, bs = append(as, x), append(bs, y)
	}
	return median(as), median(bs), nil
}

// timeBlock calls fn until d has passed (at least once) and returns
// nanoseconds per call.
func timeBlock(d time.Duration, fn func() error) (float64, error) {
	n := 0
	t0 := time.Now()
	for {
		if err := fn(); err != nil {
			return 0, err
		}
		n++
		if el := time.Since(t0); el >= d {
			return float64(el.Nanoseconds()) / float64(n), nil
		}
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// trajResult is the materialisation of one leaf's full trajectory.
type trajResult struct {
	Leaf   uint64  `json:"leaf"`
	Turns  int     `json:"turns"`
	Bytes  int     `json:"bytes"`   // stored bytes of those turns
	WarmNs float64 `json:"warm_ns"` // RunTx.Trajectory, LRU and page cache warm
	ColdNs float64 `json:"cold_ns"` // first call after reopening with the file dropped from the page cache; 0 if not measured
	CopyNs float64 `json:"copy_ns"` // bytes.Clone of the same number of bytes from one slice
}

// findLeaf returns the leaf with the longest path (lowest id among ties)
// and the stored bytes of its turns.
func findLeaf(db *store.DB) (leaf uint64, turns, size int, err error) {
	err = db.ViewRun(benchRun, func(r *store.RunTx) error {
		advs, err := r.Advantages(0, 0)
		if err != nil {
			return err
		}
		best := -1
		for _, a := range advs {
			n, err := r.Node(a.Leaf)
			if err != nil {
				return err
			}
			if n.PathLen() > best || (n.PathLen() == best && n.ID < leaf) {
				best, leaf = n.PathLen(), n.ID
			}
		}
		if best < 0 {
			return fmt.Errorf("bench: no leaf in the store")
		}
		// The bytes its turns take in the file: each one's framed value.
		path, err := r.Trajectory(leaf)
		if err != nil {
			return err
		}
		for i := range path {
			v, err := store.EncodeTurn(&path[i].Turn)
			if err != nil {
				return err
			}
			size += len(v)
			turns++
		}
		return nil
	})
	return leaf, turns, size, err
}

// measureTrajectory times RunTx.Trajectory of the longest leaf of the
// patrdb store at path, warm and cold, against copying its bytes.
func measureTrajectory(path string, budget time.Duration, coldIters int) (trajResult, error) {
	var res trajResult
	db, err := store.Open(path, nil)
	if err != nil {
		return res, err
	}
	res.Leaf, res.Turns, res.Bytes, err = findLeaf(db)
	if err != nil {
		_ = db.Close()
		return res, err
	}
	src := make([]byte, res.Bytes)
	for i := range src {
		src[i] = byte(i)
	}
	var sink byte
	err = db.ViewRun(benchRun, func(r *store.RunTx) error {
		var err error
		res.WarmNs, res.CopyNs, err = pairLoop(budget, func() error {
			p, err := r.Trajectory(res.Leaf)
			if err == nil && len(p) != res.Turns {
				err = fmt.Errorf("bench: trajectory of %d has %d turns, want %d", res.Leaf, len(p), res.Turns)
			}
			return err
		}, func() error {
			dst := bytes.Clone(src)
			sink ^= dst[len(dst)-1]
			return nil
		})
		return err
	})
	_ = sink
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return res, err
	}
	if !canDropCache || coldIters == 0 {
		return res, nil
	}
	var colds []float64
	for range coldIters {
		if err := dropCache(path); err != nil {
			return res, err
		}
		db, err := store.Open(path, nil)
		if err != nil {
			return res, err
		}
		var el time.Duration
		err = db.View(func(tx *store.Tx) error {
			t0 := time.Now()
			r, err := tx.Run(benchRun)
			if err != nil {
				return err
			}
			_, err = r.Trajectory(res.Leaf)
			el = time.Since(t0)
			return err
		})
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return res, err
		}
		colds = append(colds, float64(el.Nanoseconds()))
	}
	res.ColdNs = median(colds)
	return res, nil
}

// pointResult is RunTx.Node on random ids with and without the node LRU.
type pointResult struct {
	Nodes      int     `json:"nodes"`
	CachedNs   float64 `json:"cached_ns"`   // CacheNodes at its default
	UncachedNs float64 `json:"uncached_ns"` // CacheNodes NoCache: every read decodes
}

// measurePointReads times RunTx.Node on the store's nodes in a random
// order, through two read-only handles on the same file, one with the LRU
// at its default size and one without, alternating between them.
func measurePointReads(path string, budget time.Duration) (pointResult, error) {
	var res pointResult
	open := func(cache int) (*store.DB, error) {
		o := store.DefaultOptions()
		o.ReadOnly, o.CacheNodes = true, cache
		return store.Open(path, o)
	}
	cached, err := open(store.DefaultOptions().CacheNodes)
	if err != nil {
		return res, err
	}
	defer cached.Close()
	uncached, err := open(store.NoCache)
	if err != nil {
		return res, err
	}
	defer uncached.Close()
	err = cached.View(func(ctx *store.Tx) error {
		return uncached.View(func(utx *store.Tx) error {
			cr, err := ctx.Run(benchRun)
			if err != nil {
				return err
			}
			ur, err := utx.Run(benchRun)
			if err != nil {
				return err
			}
			n := int(storetest.BoltTx(ctx).Bucket([]byte("runs")).Bucket([]byte(benchRun)).Bucket([]byte("nodes")).Sequence())
			if n == 0 {
				return fmt.Errorf("bench: no nodes")
			}
			res.Nodes = n
			ids := rand.New(rand.NewPCG(1, 2)).Perm(n)
			for _, id := range ids { // fill the LRU and the page cache
				if _, err := cr.Node(uint64(id + 1)); err != nil {
					return err
				}
			}
			var i, j int
			res.CachedNs, res.UncachedNs, err = pairLoop(budget, func() error {
				_, err := cr.Node(uint64(ids[i%n] + 1))
				i++
				return err
			}, func() error {
				_, err := ur.Node(uint64(ids[j%n] + 1))
				j++
				return err
			})
			return err
		})
	})
	return res, err
}

// replayResult is a scan of a run's whole event log.
type replayResult struct {
	Events   int     `json:"events"`
	ReplayNs float64 `json:"replay_ns"` // RunTx.Events: CRC check and decode of every event
	WalkNs   float64 `json:"walk_ns"`   // bare bbolt cursor walk of the events bucket
	// CopyNs is the least a safe decoder must do: the walk plus checking
	// each value's CRC32C and copying it out of the mmap.
	CopyNs float64 `json:"copy_ns"`
}

func (r replayResult) replayPerSec() float64 { return float64(r.Events) / (r.ReplayNs / 1e9) }
func (r replayResult) walkPerSec() float64   { return float64(r.Events) / (r.WalkNs / 1e9) }
func (r replayResult) copyPerSec() float64   { return float64(r.Events) / (r.CopyNs / 1e9) }

// measureReplay times full scans of the events bucket: RunTx.Events, a
// bare cursor walk, and a walk that CRC-checks and copies every value.
func measureReplay(path string) (replayResult, error) {
	var res replayResult
	o := store.DefaultOptions()
	o.ReadOnly = true
	db, err := store.Open(path, o)
	if err != nil {
		return res, err
	}
	defer db.Close()
	walk := func(check bool) (int, time.Duration, error) {
		var n, sum int
		var el time.Duration
		err := db.View(func(tx *store.Tx) error {
			b := storetest.BoltTx(tx).Bucket([]byte("runs")).Bucket([]byte(benchRun)).Bucket([]byte("events"))
			t0 := time.Now()
			c := b.Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				n++
				if !check {
					sum += len(v)
					continue
				}
				if len(v) < 6 || crc32.Checksum(v[5:], castagnoli) != binary.BigEndian.Uint32(v[1:5]) {
					return fmt.Errorf("bench: event %x fails its CRC", k)
				}
				c := bytes.Clone(v[5:])
				sum += len(c) + int(c[len(c)-1])
			}
			el = time.Since(t0)
			return nil
		})
		_ = sum
		return n, el, err
	}
	replay := func() (int, time.Duration, error) {
		var m int
		var el time.Duration
		err := db.ViewRun(benchRun, func(r *store.RunTx) error {
			var err error
			var last uint64
			t0 := time.Now()
			err = r.Events(0, func(e model.Event) error {
				m++
				last = e.Seq
				return nil
			})
			el = time.Since(t0)
			if err == nil && last != uint64(m) {
				err = fmt.Errorf("bench: replay saw %d events ending at %d", m, last)
			}
			return err
		})
		return m, el, err
	}
	// One untimed pass of each warms the page cache and the heap; then
	// five rounds alternate the three scans and each keeps its median.
	if _, _, err := walk(true); err != nil {
		return res, err
	}
	if _, _, err := replay(); err != nil {
		return res, err
	}
	var walks, copies, replays []float64
	for range 5 {
		n, el, err := walk(false)
		if err != nil {
			return res, err
		}
		res.Events = n
		walks = append(walks, float64(el.Nanoseconds()))
		if _, el, err = walk(true); err != nil {
			return res, err
		}
		copies = append(copies, float64(el.Nanoseconds()))
		m, el, err := replay()
		if err != nil {
			return res, err
		}
		if m != n {
			return res, fmt.Errorf("bench: replay saw %d events, the bucket holds %d", m, n)
		}
		replays = append(replays, float64(el.Nanoseconds()))
	}
	res.WalkNs, res.CopyNs, res.ReplayNs = median(walks), median(copies), median(replays)
	return res, nil
}

// resumeResult is reopening a store and loading its frontier.
type resumeResult struct {
	Frontier int     `json:"frontier"`
	WarmNs   float64 `json:"warm_ns"` // median over iterations, file in the page cache
	ColdNs   float64 `json:"cold_ns"` // median with the file dropped from the page cache first; 0 if not measured
}

// resumeOnce opens path, loads the frontier nodes and their groups, and
// closes: what a trainer does before continuing a half-grown batch.
func resumeOnce(path string) (int, time.Duration, error) {
	t0 := time.Now()
	db, err := store.Open(path, nil)
	if err != nil {
		return 0, 0, err
	}
	n := 0
	err = db.ViewRun(benchRun, func(r *store.RunTx) error {
		nodes, err := r.FrontierNodes()
		if err != nil {
			return err
		}
		seen := map[[2]uint64]bool{}
		for _, nd := range nodes {
			k := [2]uint64{nd.Step, nd.Group}
			if seen[k] {
				continue
			}
			seen[k] = true
			if _, err := r.GroupAt(nd.Step, nd.Group); err != nil {
				return err
			}
		}
		n = len(nodes)
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return n, time.Since(t0), err
}

// measureResumeAll times resumeOnce on every store, round-robin, iters
// times warm and coldIters times with the file evicted from the page cache
// first, and keeps each store's medians.
func measureResumeAll(paths []string, iters, coldIters int) ([]resumeResult, error) {
	res := make([]resumeResult, len(paths))
	warm := make([][]float64, len(paths))
	cold := make([][]float64, len(paths))
	for _, p := range paths {
		if _, _, err := resumeOnce(p); err != nil {
			return nil, err
		}
	}
	for range iters {
		for i, p := range paths {
			n, el, err := resumeOnce(p)
			if err != nil {
				return nil, err
			}
			res[i].Frontier = n
			warm[i] = append(warm[i], float64(el.Nanoseconds()))
		}
	}
	for range coldIters {
		if !canDropCache {
			break
		}
		for i, p := range paths {
			if err := dropCache(p); err != nil {
				return nil, err
			}
			_, el, err := resumeOnce(p)
			if err != nil {
				return nil, err
			}
			cold[i] = append(cold[i], float64(el.Nanoseconds()))
		}
	}
	for i := range res {
		res[i].WarmNs, res[i].ColdNs = median(warm[i]), median(cold[i])
	}
	return res, nil
}
