package store

import (
	"fmt"
	"math"
	"strings"

	"github.com/patrdb/patrdb/store/internal/pagewalk"
)

// Guards for readers of a file that has not been checked. bbolt trusts its
// pages: a branch page that points at itself or at its parent sends a
// cursor into an endless loop and Bucket.Stats into unbounded recursion (a
// fatal stack overflow that recover cannot catch). A reader that cannot
// trust the file (a command-line tool, a server opening a file it did not
// write) reads in checked mode (CheckReads), or walks the pages it will
// read first (Check with CheckOptions.Parts), or checks the whole run
// (Check with CheckOptions.Run) to also know that every record it will
// read is intact and consistent.

// walkParts walks the pages parts name, of run id for those of a run,
// with bounds and without bbolt; nil or a *CorruptError naming the first
// damaged bucket and page (a page reached twice, outside the file, of the
// wrong type, ...). A run that does not exist walks as nil: the lookup
// that follows says so.
func (tx *Tx) walkParts(id string, parts CheckParts) error {
	const ofRun = CheckSummary | CheckLastEvent | CheckEvents | CheckAdvantages
	if parts >= CheckAdvantages<<1 {
		return invalidf("check: unknown parts %#x", uint8(parts))
	}
	if id == "" && parts&ofRun != 0 {
		return invalidf("check: the parts of a run need CheckOptions.Run")
	}
	if parts&CheckMetas != 0 {
		if err := tx.verifyMetas(); err != nil {
			return err
		}
	}
	prefix := string(bucketRuns) + "/" + id
	switch {
	case parts&CheckPages != 0 && id == "":
		return tx.verifyPages(nil)
	case parts&CheckPages != 0:
		return tx.verifyPages(func(p string) pagewalk.Reach {
			if p == "meta" || p == string(bucketRuns) || p == prefix || strings.HasPrefix(p, prefix+"/") {
				return pagewalk.Whole
			}
			return pagewalk.Skip
		})
	case parts&ofRun != 0:
		return tx.verifySummary(id, parts)
	case parts&CheckRunList != 0:
		return tx.verifyPages(func(p string) pagewalk.Reach {
			if p == "meta" || p == string(bucketRuns) {
				return pagewalk.Whole
			}
			return pagewalk.Skip // listing the runs opens none of them
		})
	}
	return nil
}

// summaryBuckets are the run's sub-buckets whose every page CheckSummary
// walks: the counters (a summary's figures, one record per step) and the
// small records shown beside them. The group index is not among them: a
// summary reads none of it.
var summaryBuckets = [...]string{bCounts, bRubrics, bCkpt, bScalars}

// verifySummary checks the pages CheckSummary names, plus those of the
// other parts of a run asked for. The summary's are checked path by path
// (internal/pagewalk Paths): the path to the run, the run bucket's own
// pages, each sub-bucket's header and the pages of summaryBuckets. A walk
// of the file's b-tree from its root would visit every page of the run to
// find them, and read all of a cold file.
func (tx *Tx) verifySummary(id string, parts CheckParts) error {
	p := tx.pagePaths()
	if err := p.Open(); err != nil {
		return err
	}
	counted := false
	if meta, ok := p.Sub(p.Root(), string(bucketMeta)); ok {
		p.All(meta)
	}
	if runs, ok := p.Sub(p.Root(), string(bucketRuns)); ok {
		if run, ok := p.Sub(runs, id); ok && p.All(run) {
			subs := map[string]pagewalk.Bucket{}
			for _, name := range append(append(subBuckets[:], laterBuckets[:]...), bScalars) {
				if b, ok := p.Sub(run, name); ok {
					subs[name] = b
				}
			}
			for _, name := range summaryBuckets {
				if b, ok := subs[name]; ok {
					p.All(b)
				}
			}
			_, hasCounts := subs[bCounts]
			_, hasIDs := subs[bGroupIDs]
			counted = hasCounts && hasIDs
		}
	}
	p.Close()
	if err := walkError(&p.Walker); err != nil {
		return err
	}
	prefix := string(bucketRuns) + "/" + id
	walk := map[string]bool{prefix + "/" + bEvents: parts&CheckEvents != 0, prefix + "/" + bAdv: parts&CheckAdvantages != 0}
	if parts&(CheckEvents|CheckAdvantages) != 0 {
		err := tx.verifyPages(func(p string) pagewalk.Reach {
			switch {
			case walk[p]:
				return pagewalk.Whole
			case p == string(bucketRuns) || p == prefix:
				return pagewalk.Whole // the way down to them
			}
			return pagewalk.Skip // checked above, or not read
		})
		if err != nil {
			return err
		}
	}
	runs, err := tx.runsBucket()
	if runs == nil {
		return err
	}
	if runs.Bucket([]byte(id)) != nil && !counted {
		// A run without counters is summarised from its records.
		if err := tx.walkParts(id, CheckPages); err != nil {
			return err
		}
	}
	if parts&CheckLastEvent == 0 {
		return nil
	}
	return tx.lastEventAgrees(id)
}

// lastEventAgrees walks, with bounds, the pages a cursor follows to run
// id's last event, and compares that event with the events bucket's
// sequence, which a summary reports as the run's event count: a damaged
// sequence (0, with thousands of events on file) is damage, not a figure.
// nil when the run does not exist (its lookup says so).
func (tx *Tx) lastEventAgrees(id string) error {
	p := tx.pagePaths()
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

// pagePaths is a walker of the paths to the pages reads follow in tx's
// snapshot, reading the file bbolt maps (a zero-byte file's stand-in
// included) through the DB's own descriptor of it (DB.file).
func (tx *Tx) pagePaths() *pagewalk.Paths {
	p := pagewalk.NewPaths(tx.db.file, tx.btx.DB().Info().PageSize, uint64(tx.btx.Cursor().Bucket().Root()))
	tx.paths = append(tx.paths, p)
	return p
}

// releasePaths ends the mappings of the transaction's page walkers, when
// it ends: what they checked was of its snapshot.
func (tx *Tx) releasePaths() {
	for _, p := range tx.paths {
		p.Release()
	}
	tx.paths = nil
}

// verifyMetas is the walk of CheckMetas.
func (tx *Tx) verifyMetas() error {
	if err := tx.check(false); err != nil || !tx.db.opts.ReadOnly {
		return err
	}
	for _, m := range pagewalk.ReadMetas(tx.db.file, tx.btx.DB().Info().PageSize) {
		if m.Err != "" {
			return &CorruptError{Bucket: "(file)", Reason: m.Fallback()}
		}
	}
	return nil
}

func (tx *Tx) verifyPages(scope pagewalk.Scope) error {
	if err := tx.check(false); err != nil {
		return err
	}
	// A write transaction's pages are in memory until it commits; the walk
	// covers the committed snapshot it started from, which is what bbolt
	// reads for every page it has not touched. The freelist is not walked
	// (no txid matches): readers do not follow it, and a commit running
	// alongside may replace it.
	_, w := pagewalk.Walk(tx.db.file, tx.btx.DB().Info().PageSize, math.MaxUint64,
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

// checkRun is Check of run id: its pages, then every value's CRC and
// decoding and every invariant of the run, including that each record
// equals what the event log last wrote for it. ErrNotFound when the run
// does not exist.
func (tx *Tx) checkRun(id string, o CheckOptions) ([]Violation, error) {
	c := &checker{tx: tx, opts: o}
	if err := tx.walkParts(id, CheckPages); err != nil {
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

// Tx is the transaction r belongs to, for what is asked of the file
// rather than of the run (Check with CheckOptions.Run: r.ID(), say).
func (r *RunTx) Tx() *Tx { return r.tx }
