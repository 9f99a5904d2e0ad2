package store

import (
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/patrdb/patrdb/model"
)

// nodeKey is a node's key in the cache: its run's tag (nodeCache.tag) and
// its id in one word. A commit adds every node it wrote, hundreds a step,
// and a map keyed by one word hashes and compares it inline, where a key
// holding the run's name hashed the name every time.
type nodeKey uint64

// The run's tag takes the top tagBits of a key, the node id the rest. A
// handle tags up to 2^16-1 runs (the tags of runs since dropped are kept:
// at most a few megabytes), and a node id past 2^48 (more nodes than a
// file can hold) is never cached: such runs and nodes read from the file.
const (
	tagBits = 16
	idBits  = 64 - tagBits
	maxTag  = 1<<tagBits - 1
)

// cacheKey is node id's key in run tag's entries; ok false when the node
// is not cached (tag 0: the run has none).
func cacheKey(tag, id uint64) (k nodeKey, ok bool) {
	if tag == 0 || id>>idBits != 0 {
		return 0, false
	}
	return nodeKey(tag<<idBits | id), true
}

// nodeCache is the LRU of decoded nodes. bbolt gives every transaction its
// own snapshot, so the cache must never hand a reader a node from another
// snapshot. The protocol:
//
//   - an entry is valid for every snapshot at or after the one it was read
//     from, until a commit writes that node;
//   - a writer marks the nodes it wrote pending before its commit becomes
//     visible, and get and put pass over a pending node until the commit
//     finishes; once it has, the written versions replace the cached ones,
//     valid from that commit on (the next transaction continues the
//     branches this one wrote, so it finds them without decoding), and a
//     commit that failed leaves the cached versions, which are still the
//     file's. (Evicting them at the start of the commit and adding them
//     back cost a list entry and two map writes a node, for nothing.)
//   - a reader may insert only when its snapshot is the latest committed one
//     and the node is not pending, so an old snapshot never seeds the cache.
type nodeCache struct {
	mu        sync.Mutex
	lru       *simplelru.LRU[nodeKey, cacheEntry]
	committed uint64
	pending   map[uint64]pendingRun // by run tag: the nodes being committed
	tags      map[string]uint64     // run id → its tag (1 on), never reused
	hits      uint64
	misses    uint64
}

// pendingRun is one run's nodes in the commit under way.
type pendingRun struct {
	nodes   map[uint64]*dirtyNode // written or dropped, by id (RunTx.dirty, and the dropped)
	written []*dirtyNode          // those written (RunTx.listed)
	dropped []uint64              // those dropped (RunTx.droppedNodes)
}

type cacheEntry struct {
	since uint64      // snapshot the node was read at
	node  *model.Node // never mutated after insertion
}

func newNodeCache(size int) *nodeCache {
	c := &nodeCache{}
	if size > 0 {
		c.lru, _ = simplelru.NewLRU[nodeKey, cacheEntry](size, nil)
	}
	return c
}

// tag is run id's tag, the top of its nodes' keys (0: its nodes are not
// cached). A handle tags a run the first time it binds it.
func (c *nodeCache) tag(run string) uint64 {
	if c.lru == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.tags[run]
	if !ok && len(c.tags) < maxTag {
		if c.tags == nil {
			c.tags = map[string]uint64{}
		}
		t = uint64(len(c.tags)) + 1
		c.tags[run] = t
	}
	return t
}

func (c *nodeCache) get(tag, id uint64, snapshot uint64) (*model.Node, bool) {
	k, ok := cacheKey(tag, id)
	if !ok {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, p := c.pending[tag].nodes[id]; p {
		c.misses++
		return nil, false
	}
	e, ok := c.lru.Get(k)
	if !ok || e.since > snapshot {
		c.misses++
		return nil, false
	}
	c.hits++
	return e.node, true
}

func (c *nodeCache) put(tag, id uint64, snapshot uint64, n *model.Node) {
	k, ok := cacheKey(tag, id)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if snapshot != c.committed {
		return
	}
	if _, p := c.pending[tag].nodes[id]; p {
		return
	}
	c.lru.Add(k, cacheEntry{since: snapshot, node: n})
}

// latest is the txid of the last commit.
func (c *nodeCache) latest() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.committed
}

func (c *nodeCache) setCommitted(txid uint64) {
	c.mu.Lock()
	c.committed = txid
	c.mu.Unlock()
}

func (c *nodeCache) beginCommit(runs map[string]*RunTx) {
	if c.lru == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending = make(map[uint64]pendingRun, len(runs))
	for _, r := range runs {
		if r.cacheTag == 0 || len(r.dirty) == 0 && len(r.droppedNodes) == 0 {
			continue
		}
		p := pendingRun{nodes: r.dirty, written: r.listed, dropped: r.droppedNodes}
		if len(p.dropped) != 0 {
			p.nodes = make(map[uint64]*dirtyNode, len(r.dirty)+len(p.dropped))
			for id, d := range r.dirty {
				p.nodes[id] = d
			}
			for _, id := range p.dropped {
				p.nodes[id] = nil // no record: forgotten at the commit
			}
		}
		c.pending[r.cacheTag] = p
	}
}

// endCommit ends the commit beginCommit began: when it succeeded, as
// txid, the nodes it wrote replace their cached versions and those it
// dropped leave the cache. It walks each run's list of written nodes,
// not the map by id: the list is a slice, hundreds of nodes a step.
func (c *nodeCache) endCommit(txid uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ok {
		c.committed = txid
		for tag, p := range c.pending {
			for _, d := range p.written {
				d.r, d.rec = nil, nil // the cache keeps d with d.n (dirtyNode.node), not the transaction
				if k, ok := cacheKey(tag, d.n.ID); ok {
					c.lru.Add(k, cacheEntry{since: txid, node: d.n})
				}
			}
			for _, id := range p.dropped { // after the written: a node changed, then dropped, is gone
				if k, ok := cacheKey(tag, id); ok {
					c.lru.Remove(k)
				}
			}
		}
	}
	c.pending = nil
}

// CacheStats reports hits and misses of the node LRU since Open.
type CacheStats struct {
	Hits, Misses uint64
	Len          int
}

// CacheStats returns the node LRU's counters.
func (db *DB) CacheStats() CacheStats {
	c := db.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	s := CacheStats{Hits: c.hits, Misses: c.misses}
	if c.lru != nil {
		s.Len = c.lru.Len()
	}
	return s
}
