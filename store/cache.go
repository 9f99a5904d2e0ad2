package store

import (
	"maps"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/patrdb/patrdb/model"
)

type nodeKey struct {
	run string
	id  uint64
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
	pending   map[string]map[uint64]*dirtyNode // run → id → node being committed
	hits      uint64
	misses    uint64
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

func (c *nodeCache) get(k nodeKey, snapshot uint64) (*model.Node, bool) {
	if c.lru == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, p := c.pending[k.run][k.id]; p {
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

func (c *nodeCache) put(k nodeKey, snapshot uint64, n *model.Node) {
	if c.lru == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if snapshot != c.committed {
		return
	}
	if _, p := c.pending[k.run][k.id]; p {
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
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending = make(map[string]map[uint64]*dirtyNode, len(runs))
	for id, r := range runs {
		if len(r.dirty) != 0 {
			c.pending[id] = r.dirty
		}
		if len(r.droppedNodes) != 0 {
			gone := maps.Clone(c.pending[id])
			if gone == nil {
				gone = make(map[uint64]*dirtyNode, len(r.droppedNodes))
			}
			for _, n := range r.droppedNodes {
				gone[n] = &dirtyNode{} // no record: forgotten at the commit
			}
			c.pending[id] = gone
		}
	}
}

func (c *nodeCache) endCommit(txid uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ok {
		c.committed = txid
		if c.lru != nil {
			for run, dirty := range c.pending {
				for id, d := range dirty {
					if d.n == nil {
						c.lru.Remove(nodeKey{run, id})
						continue
					}
					d.r, d.rec = nil, nil // the cache keeps d with d.n (dirtyNode.node), not the transaction
					c.lru.Add(nodeKey{run, id}, cacheEntry{since: txid, node: d.n})
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
