package store

import (
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/patrdb/patrdb/store/internal/pagewalk"
)

// Guards for readers of a file that has not been checked. bbolt trusts its
// pages: a branch page that points at itself or at its parent sends a
// cursor into an endless loop and Bucket.Stats into unbounded recursion (a
// fatal stack overflow that recover cannot catch). A reader that cannot
// trust the file (a command-line tool, a server opening a file it did not
// write) calls VerifyRun before it reads a run, or CheckRun to also know
// that every record it will read is intact and consistent.

// VerifyRuns walks, with bounds and without bbolt, the pages a reader
// follows to list the runs: the root, meta and runs buckets' own pages,
// not the runs' headers (a damaged one is that run's damage, which
// VerifyRun and VerifySummary report). It returns nil or a *CorruptError
// naming the first damaged bucket and page (a page reached twice, outside
// the file, of the wrong type, ...).
func (tx *Tx) VerifyRuns() error {
	return tx.verifyPages(func(p string) pagewalk.Reach {
		if p == "meta" || p == string(bucketRuns) {
			return pagewalk.Whole
		}
		return pagewalk.Skip // listing the runs opens none of them
	})
}

// VerifyRun is VerifyRuns plus every page of run id's buckets: once it
// returns nil, cursors and Bucket.Stats over the run terminate. A run that
// does not exist verifies as nil (the lookup that follows says so).
func (tx *Tx) VerifyRun(id string) error {
	prefix := string(bucketRuns) + "/" + id
	return tx.verifyPages(func(p string) pagewalk.Reach {
		if p == "meta" || p == string(bucketRuns) || p == prefix || strings.HasPrefix(p, prefix+"/") {
			return pagewalk.Whole
		}
		return pagewalk.Skip
	})
}

// VerifySummary walks, with bounds, the pages a run's summary and the
// small records beside it read (the run record, its counters and group
// index, rubrics and checkpoints), so that RunTx.Summary, Rubrics and
// Checkpoint terminate on a file nobody has checked, and the path to the
// run's last event, which must agree with the events sequence: the
// summary's event count is that sequence. A run without counters is
// summarised by reading its records, so then it is VerifyRun. It costs
// time in proportion to those small buckets, not to the run.
func (tx *Tx) VerifySummary(id string) error {
	if err := tx.VerifyParts(id); err != nil {
		return err
	}
	return tx.lastEventAgrees(id)
}

// A RunPart is a part of a run that a reader reads whole, for VerifyParts.
type RunPart string

// The parts of a run VerifyParts walks on request.
const (
	PartEvents     RunPart = bEvents // the event log: RunTx.Events
	PartAdvantages RunPart = bAdv    // the advantage records: RunTx.Advantages
)

// VerifyParts walks the pages VerifySummary walks (but for the path to the
// last event) plus the pages of parts, for a reader of a file nobody has
// checked that reads the run's counters, rubrics and checkpoints, and
// those parts of run id whole (the step figures read the event log and
// the advantage records): once it returns nil, reading them through RunTx
// terminates, and a damaged record among them is an ErrCorrupt as it is
// decoded (each has a CRC). The nodes and turns, most of a run, are not
// walked, so it costs time in proportion to the parts; what it cannot see,
// as VerifySummary, is a record that disagrees with the ones it links to
// (CheckRun sees that).
func (tx *Tx) VerifyParts(id string, parts ...RunPart) error {
	prefix := string(bucketRuns) + "/" + id
	walk := map[string]bool{prefix: true}
	for _, name := range []string{bCounts, bGroupIDs, bRubrics, bCkpt, bScalars} {
		walk[prefix+"/"+name] = true
	}
	for _, part := range parts {
		if part != PartEvents && part != PartAdvantages {
			return invalidf("verify: no run part %q (want %q or %q)", part, PartEvents, PartAdvantages)
		}
		walk[prefix+"/"+string(part)] = true
	}
	err := tx.verifyPages(func(p string) pagewalk.Reach {
		switch {
		case p == "meta" || p == string(bucketRuns) || walk[p]:
			return pagewalk.Whole
		case strings.HasPrefix(p, prefix+"/"):
			return pagewalk.Header // the run's handle opens every sub-bucket
		}
		return pagewalk.Skip
	})
	if err != nil {
		return err
	}
	runs, err := tx.runsBucket()
	if runs == nil {
		return err
	}
	run := runs.Bucket([]byte(id))
	if run != nil && (run.Bucket([]byte(bCounts)) == nil || run.Bucket([]byte(bGroupIDs)) == nil) {
		return tx.VerifyRun(id)
	}
	return nil
}

// lastEventAgrees walks, with bounds, the pages a cursor follows to run
// id's last event, and compares that event with the events bucket's
// sequence, which a summary reports as the run's event count: a damaged
// sequence (0, with thousands of events on file) is damage, not a figure.
// nil when the run does not exist (its lookup says so).
func (tx *Tx) lastEventAgrees(id string) error {
	p := pagewalk.NewPaths(tx.db.path, tx.btx.DB().Info().PageSize, uint64(tx.btx.Cursor().Bucket().Root()))
	if err := p.Open(); err != nil {
		return err
	}
	defer p.Close()
	found := false
	if runs, ok := p.Sub(p.Root(), string(bucketRuns)); ok {
		if run, ok := p.Sub(runs, id); ok {
			if events, ok := p.Sub(run, bEvents); ok {
				found = p.Last(events)
			}
		}
	}
	if err := walkError(&p.Walker); err != nil || !found {
		return err
	}
	r, err := tx.handle(id)
	if err != nil {
		return err
	}
	return r.checkSequence(bEvents)
}

// VerifyMetas reports a damaged meta page on a read-only DB as a
// *CorruptError. bbolt then reads the other one, the commit before the
// last: what a reader sees may be older than what was acknowledged. On a
// writable DB it returns nil: this process's commits rewrite the meta
// pages, so they can be read torn while one is written.
func (tx *Tx) VerifyMetas() error {
	if err := tx.check(false); err != nil || !tx.db.opts.ReadOnly {
		return err
	}
	f, err := os.Open(tx.db.path)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, m := range pagewalk.ReadMetas(f, tx.btx.DB().Info().PageSize) {
		if m.Err != "" {
			return &CorruptError{Bucket: "(file)", Reason: m.Fallback()}
		}
	}
	return nil
}

// VerifyFile walks every page of the snapshot's b-trees, as a copy of the
// whole file (Compact) reads them.
func (tx *Tx) VerifyFile() error { return tx.verifyPages(nil) }

func (tx *Tx) verifyPages(scope pagewalk.Scope) error {
	if err := tx.check(false); err != nil {
		return err
	}
	// A write transaction's pages are in memory until it commits; the walk
	// covers the committed snapshot it started from, which is what bbolt
	// reads for every page it has not touched. The freelist is not walked
	// (no txid matches): readers do not follow it, and a commit running
	// alongside may replace it.
	_, w := pagewalk.Walk(tx.db.path, tx.btx.DB().Info().PageSize, math.MaxUint64,
		uint64(tx.btx.Cursor().Bucket().Root()), scope, false)
	return walkError(w)
}

// walkError is the first problem a page walk found as a *CorruptError
// naming its bucket, with how many more there are; nil when none.
func walkError(w *pagewalk.Walker) error {
	if len(w.Problems) == 0 {
		return nil
	}
	reason := w.FirstMsg
	if n := len(w.Problems) - 1; n > 0 {
		reason += fmt.Sprintf(" (and %d more)", n)
	}
	bucket := w.FirstPath
	if bucket == "" {
		bucket = "(file)"
	}
	return &CorruptError{Bucket: bucket, Reason: reason}
}

// CheckRun is Check limited to one run: its pages (VerifyRun), then every
// value's CRC and decoding and every invariant of the run, including that
// each record equals what the event log last wrote for it. It does not
// look at the meta pages, bbolt's free-page accounting or other runs. A
// reader that prints a run only when CheckRun returns nothing never prints
// partial or damaged data. ErrNotFound when the run does not exist.
func (tx *Tx) CheckRun(id string) ([]Violation, error) {
	c := &checker{tx: tx}
	if err := tx.VerifyRun(id); err != nil {
		if ce, ok := err.(*CorruptError); ok {
			c.add(Violation{Bucket: ce.Bucket, Kind: "structure", Detail: ce.Reason})
		} else {
			c.fromErr("runs/"+id, err)
		}
		return c.vs, nil
	}
	var missing error
	c.guard("runs/"+id, func() {
		if _, err := tx.handle(id); err != nil {
			missing = err
			return
		}
		c.run(id)
	})
	if missing != nil && len(c.vs) == 0 {
		return nil, missing
	}
	return c.vs, nil
}

// Verify is CheckRun of this run as one error: nil, or a *CorruptError
// naming the first violation and how many more there are. A writer that
// copies a run out of the store (an export) calls it first, so that it
// never writes a partial copy of a damaged run. The run's handle exists,
// so the pages leading to it were sound; on a file nobody has checked,
// call Tx.VerifyRun before Tx.Run.
func (r *RunTx) Verify() error {
	if r.chk != nil {
		return r.whole()
	}
	vs, err := r.tx.CheckRun(r.id)
	if err != nil || len(vs) == 0 {
		return err
	}
	return violationsError(vs)
}
