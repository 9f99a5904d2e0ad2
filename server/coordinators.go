package server

import (
	"sync"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/tree"
)

// coordinators holds one tree.Coordinator per run, made on the run's first
// rollout request from the tree config the run recorded. One per run per
// process matters: the coordinator's lease table is what keeps two workers
// off the same branch. A restarted server starts with empty tables, and
// workers holding old leases are told to lease again.
type coordinators struct {
	mu   sync.Mutex
	runs map[string]*tree.Coordinator
}

// coordinator returns run's coordinator. It reads the run (a read
// transaction of its own), so it is called before a write is queued,
// never inside one.
func (s *server) coordinator(run string) (*tree.Coordinator, error) {
	cs := &s.coords
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c := cs.runs[run]; c != nil {
		return c, nil
	}
	if err := s.db.View(func(tx *store.Tx) error {
		_, err := lookupRun(tx, run)
		return err
	}); err != nil {
		return nil, err
	}
	c, err := tree.NewCoordinator(s.db, run, nil, nil)
	if err != nil {
		return nil, err
	}
	if cs.runs == nil {
		cs.runs = map[string]*tree.Coordinator{}
	}
	cs.runs[run] = c
	return c, nil
}
