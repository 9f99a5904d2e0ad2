package server

import (
	"net/http"
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

// rolloutRequest reads what every rollout handler starts from, each refusal
// in its turn: the path's {idName} segment when idName is given (400), the
// JSON body into req when req is not nil (400, 413, 415), then the
// coordinator of the path's run (404 for an unknown run), whose Run is the
// run's id. The handler's own checks of the request come after.
func (s *server) rolloutRequest(w http.ResponseWriter, r *http.Request, idName string, req any) (c *tree.Coordinator, id uint64, err error) {
	if idName != "" {
		if id, err = pathID(r, idName); err != nil {
			return nil, 0, err
		}
	}
	if req != nil {
		if err = decodeBody(w, r, s.opts.MaxBodyBytes, req); err != nil {
			return nil, 0, err
		}
	}
	c, err = s.coordinator(r.PathValue("run"))
	return c, id, err
}
