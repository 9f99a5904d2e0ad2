package server

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// A server may be handed a file it did not write, and bbolt trusts its
// pages: a branch page that points at itself sends a cursor into an
// endless loop or Bucket.Stats into a stack overflow, which kills the
// process. So before a request touches a run, the run is checked once
// (store.Tx.Check of the run: its pages walked with bounds, then every record
// against its links and its event log); a damaged run answers 500
// "damaged" from then on and the others are served. After a run checked
// clean, the server trusts it: what changes it from then on are writes of
// this process, through bbolt. The endpoints of one group or one node
// (handleChecked) skip the whole-run check and read in checked mode
// (viewChecked) instead, which checks only what they read; a run's summary, listed or
// alone, checks only the records a summary reads (read.go, summarize); and
// the endpoints that read the summary and whole parts of a run (the step
// figures: the event log and the advantage records) walk only those parts'
// pages, once (viewParts).

// soundness remembers which runs were checked and what was found.
type soundness struct {
	mu  sync.Mutex
	ok  map[string]bool  // "" is the runs bucket itself
	bad map[string]error // damaged: the answer to every request for it
	// checking holds the checks under way: a request for a run being
	// checked waits for that check instead of starting its own. After a
	// restart every rollout worker's first request arrives at once, and
	// each checking a run of a million nodes (some 11 s) would multiply
	// that by the number of workers on a two-core machine.
	checking map[string]*runCheck
	verify   func(tx *store.Tx, id string) (exists bool, err error) // nil: verifyRun; tests count the checks
	// parts holds, by run, the parts of it whose pages walked clean
	// (viewParts); "" stands for the summary's own. Like a run that checked
	// clean, they stay sound: only this process writes the file.
	parts map[string]store.CheckParts
	walk  func(tx *store.Tx, id string, parts store.CheckParts) error // nil: walkParts; tests count the walks
}

// trusted reports whether run id checked clean in this process.
func (c *soundness) trusted(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ok[id]
}

// runCheck is one check under way; done closes when it has ended, and
// err is then its answer for the requests that waited.
type runCheck struct {
	done    chan struct{}
	started time.Time
	err     error
}

// sound returns nil when the run id (or, for "", the list of runs) may be
// read, or the error to answer with: "damaged", or "checking" when the
// run's check, which runs apart from any request, has not ended within
// Options.CheckWait. On a run of a million nodes whose file is not in the
// page cache the check reads all of it, which took 11 s here, and 53 s and
// once 5.5 min before the page walk mapped the file: a request that waited
// that long would outlive the server's write timeout and its client would
// get an empty reply. A run that does not
// exist is not remembered (it may be created), and the lookup that follows
// says it is missing.
func (s *server) sound(id string) error {
	c := &s.soundness
	c.mu.Lock()
	ok, bad, under := c.ok[id], c.bad[id], c.checking[id]
	if ok || bad != nil {
		c.mu.Unlock()
		return bad
	}
	if under == nil {
		under = &runCheck{done: make(chan struct{}), started: time.Now()}
		if c.checking == nil {
			c.checking = map[string]*runCheck{}
		}
		c.checking[id] = under
		go s.check(id, under)
	}
	c.mu.Unlock()
	wait := time.NewTimer(s.opts.CheckWait)
	defer wait.Stop()
	select {
	case <-under.done:
		return under.err
	case <-wait.C:
		return checkingError(id, time.Since(under.started))
	}
}

// check runs the check of id that c.checking[id] announced, in a read
// transaction of its own, and lets the requests waiting for it go on. It
// outlives the request that started it. A request that reads after it
// reads a snapshot at least as new, and nothing but a write of this
// process, which waits for the check, changes the run in between.
func (s *server) check(id string, under *runCheck) {
	c := &s.soundness
	defer func() {
		if p := recover(); p != nil {
			under.err = fmt.Errorf("server: checking run %q: panic: %v", id, p)
			s.opts.Logger.Error("server: panic in a run check", "run", id, "panic", p)
		}
		c.mu.Lock()
		delete(c.checking, id)
		c.mu.Unlock()
		close(under.done)
	}()
	under.err = s.db.View(func(tx *store.Tx) error { return s.checkRun(tx, id) })
}

// checkingError is the answer to a request that waited CheckWait for the
// check of run id (""; the list of runs), which has run for so long.
func checkingError(id string, so time.Duration) error {
	what := "the list of runs"
	if id != "" {
		what = fmt.Sprintf("run %q", id)
	}
	return &apiError{http.StatusServiceUnavailable, "checking", fmt.Errorf(
		"%s is being checked before its first use (every page and record, once after the server starts; %s so far): ask again in a few seconds",
		what, so.Round(time.Second))}
}

// checkRun checks id and remembers the answer when there is one: the run
// exists, and it checked clean or damaged (not an I/O error).
func (s *server) checkRun(tx *store.Tx, id string) error {
	verify := s.soundness.verify
	if verify == nil {
		verify = verifyRun
	}
	exists, err := verify(tx, id)
	if err != nil && !errors.Is(err, store.ErrCorrupt) {
		return err
	}
	if err != nil {
		err = damagedError(id, err)
	}
	if !exists {
		return nil
	}
	c := &s.soundness
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok == nil {
		c.ok, c.bad = map[string]bool{}, map[string]error{}
	}
	if err != nil {
		c.bad[id] = err
	} else {
		c.ok[id] = true
	}
	return err
}

// damagedError is the answer for damage found in run id (""; the list of
// runs).
func damagedError(id string, err error) error {
	what := "the list of runs"
	if id != "" {
		what = fmt.Sprintf("run %q", id)
	}
	return &apiError{http.StatusInternalServerError, "damaged", fmt.Errorf(
		"%s is damaged (%w): patrdb check on a copy of the file lists the damage; other runs are still served", what, err)}
}

// verifyRun checks the runs bucket's pages and, for a run id, the run.
func verifyRun(tx *store.Tx, id string) (exists bool, err error) {
	if id == "" {
		return true, walkParts(tx, "", store.CheckRunList)
	}
	_, err = tx.Check(&store.CheckOptions{Run: id})
	if errors.Is(err, model.ErrNotFound) {
		return false, nil
	}
	return true, err
}

// walkParts walks the pages of parts (of run id, for a run's), as one
// error.
func walkParts(tx *store.Tx, id string, parts store.CheckParts) error {
	_, err := tx.Check(&store.CheckOptions{Run: id, Parts: parts})
	return err
}

// soundRequest checks what a request is about to touch: the runs bucket
// and, when the path names one and wholeRun is set, the run (an endpoint
// without it reads through viewChecked).
func (s *server) soundRequest(r *http.Request, wholeRun bool) error {
	if err := s.sound(""); err != nil {
		return err
	}
	id := r.PathValue("run")
	if !wholeRun || id == "" || !store.ValidRunID(id) {
		return nil // a bad id is the endpoint's 400
	}
	return s.sound(id)
}

// viewChecked is viewRun for the endpoints of one group or one node
// (registered with handleChecked): a run that checked clean, or that this
// server checked and trusts, is read as viewRun reads it; any other run
// in a transaction in checked mode (store.Tx.CheckReads), whose reads
// check the pages and records they touch, so the first request for one group of a big run does not pay for
// the whole run. Damage on what it reads answers "damaged"; damage
// elsewhere in the run does not, even once the whole-run check of another
// endpoint found it, so the answer does not depend on the order of
// requests.
func (s *server) viewChecked(r *http.Request, fn func(*store.RunTx) error) error {
	id := r.PathValue("run")
	if s.soundness.trusted(id) || !store.ValidRunID(id) {
		return s.viewRun(r, fn)
	}
	return s.db.View(func(tx *store.Tx) error {
		err := tx.CheckReads()
		var rt *store.RunTx
		if err == nil {
			rt, err = tx.Run(id)
		}
		if errors.Is(err, model.ErrNotFound) {
			return notFound("run %q", id)
		}
		if err == nil {
			err = fn(rt)
		}
		if errors.Is(err, store.ErrCorrupt) {
			return damagedError(id, err)
		}
		return err
	})
}

// viewParts is viewRun for the endpoints that read a run's summary and the
// small records beside it (env-steps, the rubrics page) and, for parts
// given, those parts whole (the step figures read the event log and the
// advantage records): a run this server does not trust yet is read once
// store's Check has walked the pages of just those (CheckOptions.Parts), so the viewer's
// run page opens in the time they take, not in the whole-run check's. The
// parts that walked clean are remembered, and a viewer polling a live run
// does not walk them again. Damage in what it reads answers "damaged";
// as for viewChecked, damage elsewhere in the run does not.
func (s *server) viewParts(r *http.Request, parts store.CheckParts, fn func(*store.RunTx) error) error {
	id := r.PathValue("run")
	if s.soundness.trusted(id) || !store.ValidRunID(id) {
		return s.viewRun(r, fn)
	}
	return s.db.View(func(tx *store.Tx) error {
		walk := s.soundness.unwalked(id, store.CheckSummary|parts)
		if walk != 0 {
			verify := s.soundness.walk
			if verify == nil {
				verify = walkParts
			}
			if err := verify(tx, id, walk); err != nil {
				if errors.Is(err, store.ErrCorrupt) {
					return damagedError(id, err)
				}
				return err
			}
		}
		rt, err := lookupRun(tx, id)
		if err != nil {
			return err
		}
		if walk != 0 {
			s.soundness.walked(id, walk)
		}
		if err = fn(rt); errors.Is(err, store.ErrCorrupt) {
			return damagedError(id, err)
		}
		return err
	})
}

// unwalked is the parts of run id, of those given, whose pages have not
// walked clean yet (0: none is left). CheckSummary's pages come with
// every other part's, so they are walked once.
func (c *soundness) unwalked(id string, parts store.CheckParts) store.CheckParts {
	c.mu.Lock()
	defer c.mu.Unlock()
	left := parts &^ c.parts[id]
	if left != 0 && left != store.CheckSummary {
		left &^= store.CheckSummary
	}
	return left
}

// walked remembers that the pages of parts of run id, and its summary's,
// walked clean.
func (c *soundness) walked(id string, parts store.CheckParts) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.parts == nil {
		c.parts = map[string]store.CheckParts{}
	}
	c.parts[id] |= parts | store.CheckSummary
}
