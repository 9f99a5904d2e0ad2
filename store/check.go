package store

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/patrdb/patrdb/model"
	"runtime/debug"

	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/store/internal/pagewalk"
)

// Violation is one problem Check found.
type Violation struct {
	Bucket string `json:"bucket"`
	Key    []byte `json:"key,omitempty"`
	Kind   string `json:"kind"` // "structure", "corrupt", "invariant"
	Detail string `json:"detail"`
}

func (v Violation) String() string {
	if v.Key != nil {
		return fmt.Sprintf("%s: %s key %x: %s", v.Kind, v.Bucket, v.Key, v.Detail)
	}
	return fmt.Sprintf("%s: %s: %s", v.Kind, v.Bucket, v.Detail)
}

// maxViolations bounds the report on a badly damaged file.
const maxViolations = 1000

// Check checks what o says (nil: everything, see CheckOptions) and
// returns what it found: no violations and a nil error, or the
// violations and a *CorruptError naming the first and how many more there
// are (errors.Is(err, ErrCorrupt)); any other error stopped it reading at
// all. A damaged file yields violations, never a panic or a hang. Its
// memory stays bounded whatever the file's size: records are read one at
// a time, and what the check remembers across them is a bit per id.
//
// Checking the whole file, writers wait while it runs: bbolt's free-page
// accounting reads the live freelist, which must describe the snapshot
// being checked, and the meta pages must not be rewritten while they are
// compared. So do not call it inside an Update function; use Tx.Check
// there.
func (db *DB) Check(o *CheckOptions) (vs []Violation, err error) {
	if o == nil {
		o = &CheckOptions{}
	}
	whole := o.Run == "" && o.Parts == 0
	if whole {
		db.writeMu.Lock()
		defer db.writeMu.Unlock()
	}
	err = db.View(func(tx *Tx) error {
		if whole {
			vs = tx.runCheck(true, *o)
			return violationsError(vs)
		}
		vs, err = tx.Check(o)
		return err
	})
	return vs, err
}

// Check is DB.Check inside an existing transaction. In a read-only
// transaction of a writable DB, the free-page accounting and the
// meta-page comparison of a whole-file check need the snapshot to be the
// latest commit and no write in progress; otherwise they are skipped
// (DB.Check waits instead). In checked mode (CheckReads) the check of
// one run is the one its checked reads share: done once per transaction.
func (tx *Tx) Check(o *CheckOptions) ([]Violation, error) {
	if o == nil {
		o = &CheckOptions{}
	}
	if err := tx.check(false); err != nil {
		return nil, err
	}
	switch {
	case o.Parts != 0:
		return walkViolations(tx.walkParts(o.Run, o.Parts))
	case o.Run != "" && tx.checkReads && o.Progress == nil:
		// The check its checked reads share, once per transaction.
		r, err := tx.checkedHandle(o.Run)
		if err == nil {
			_, err = r.chk.Sound()
		}
		return walkViolations(err)
	case o.Run != "":
		vs, err := tx.checkRun(o.Run, *o)
		if err == nil {
			err = violationsError(vs)
		}
		return vs, err
	case tx.Writable() || tx.db.opts.ReadOnly:
	case !tx.db.writeMu.TryLock():
		vs := tx.runCheck(false, *o)
		return vs, violationsError(vs)
	default:
		defer tx.db.writeMu.Unlock()
		vs := tx.runCheck(tx.snapshot == tx.db.cache.latest(), *o)
		return vs, violationsError(vs)
	}
	vs := tx.runCheck(true, *o)
	return vs, violationsError(vs)
}

// walkViolations is a page walk's answer as Check's: a damaged page is a
// violation too, of kind structure; other errors stopped the walk.
func walkViolations(err error) ([]Violation, error) {
	var ce *CorruptError
	if errors.As(err, &ce) {
		return []Violation{{Bucket: ce.Bucket, Key: ce.Key, Kind: "structure", Detail: ce.Reason}}, err
	}
	return nil, err
}

// runCheck runs the checks; quiet says no commit has happened since the
// snapshot and none can start, so bbolt's page accounting and the meta
// pages describe it.
func (tx *Tx) runCheck(quiet bool, o CheckOptions) (vs []Violation) {
	c := &checker{tx: tx, opts: o}
	if tx.Writable() {
		if err := tx.flush(); err != nil {
			c.add(Violation{Bucket: "(file)", Kind: "structure", Detail: err.Error()})
			return c.vs
		}
	}
	if !c.pages(quiet) {
		return c.vs
	}
	if quiet {
		c.guard("(file)", func() {
			for e := range tx.btx.Check() {
				c.add(Violation{Bucket: "(file)", Kind: "structure", Detail: e.Error()})
			}
		})
	}
	c.guard("meta", c.meta)
	c.guard("runs", func() {
		ids, err := tx.RunIDs()
		if err != nil {
			c.add(Violation{Bucket: "runs", Kind: "structure", Detail: err.Error()})
			return
		}
		for _, id := range ids {
			c.guard("runs/"+id, func() { c.run(id) })
		}
	})
	return c.vs
}

// pages walks the snapshot's pages from the file with bounds (internal/pagewalk)
// before bbolt's check or a cursor trusts them, and reports whether the
// b-trees are sound; if not, the rest of the check would loop or crash on
// them and is skipped. A damaged meta page is reported too when quiet. A
// write transaction's pages are not on disk yet: it relies on bbolt alone.
func (c *checker) pages(quiet bool) bool {
	tx := c.tx
	if tx.Writable() {
		return true
	}
	if c.opts.Progress != nil {
		c.opts.Progress(CheckProgress{Phase: "pages"})
	}
	var metas []string
	pages := []string{"the page walk did not finish"}
	c.guard("(file)", func() {
		metas, pages = pagewalk.File(tx.db.file, tx.btx.DB().Info().PageSize, uint64(tx.btx.ID()),
			uint64(tx.btx.Cursor().Bucket().Root()), nil, quiet)
	})
	for _, p := range append(metas, pages...) {
		c.add(Violation{Bucket: "(file)", Kind: "structure", Detail: p})
	}
	return len(pages) == 0
}

type checker struct {
	tx   *Tx
	vs   []Violation
	opts CheckOptions
	// the progress being counted (checkprogress.go)
	runID, phase string
	done         int64
}

func (c *checker) add(v Violation) {
	if len(c.vs) < maxViolations {
		c.vs = append(c.vs, v)
	}
}

func (c *checker) fromErr(bucket string, err error) {
	var ce *CorruptError
	if errors.As(err, &ce) {
		c.add(Violation{Bucket: ce.Bucket, Key: ce.Key, Kind: "corrupt", Detail: ce.Reason})
		return
	}
	c.add(Violation{Bucket: bucket, Kind: "structure", Detail: err.Error()})
}

// guard turns a panic or memory fault inside bbolt (a damaged page) into a
// violation so a broken file is reported, not fatal.
func (c *checker) guard(bucket string, fn func()) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			c.add(Violation{Bucket: bucket, Kind: "structure", Detail: fmt.Sprintf("reading failed: %v", r)})
		}
	}()
	fn()
}

func (c *checker) meta() {
	if c.tx.db.fresh {
		return // no bucket at all: a new file
	}
	m := c.tx.btx.Bucket(bucketMeta)
	if m == nil {
		c.add(Violation{Bucket: "meta", Kind: "structure", Detail: "meta bucket missing"})
		return
	}
	if string(m.Get(metaMagic)) != string(magicString) {
		c.add(Violation{Bucket: "meta", Key: metaMagic, Kind: "corrupt", Detail: "bad magic"})
	}
	// The file's format as opened, or the current one once a write upgraded
	// it in place (a snapshot may predate or follow that write).
	if v := m.Get(metaFormat); len(v) != 8 || (keyU64(v, 0) != c.tx.db.format.Load() && keyU64(v, 0) != FormatVersion) {
		c.add(Violation{Bucket: "meta", Key: metaFormat, Kind: "corrupt", Detail: "format version unreadable or unexpected"})
	}
	if !bytes.HasPrefix(m.Get(metaWriter), []byte("patrdb ")) {
		c.add(Violation{Bucket: "meta", Key: metaWriter, Kind: "corrupt", Detail: "writer missing or unreadable"})
	}
	// Nothing else lives in meta: another key is a damaged one.
	_ = m.ForEach(func(k, _ []byte) error {
		if !bytes.Equal(k, metaMagic) && !bytes.Equal(k, metaFormat) && !bytes.Equal(k, metaWriter) {
			c.add(Violation{Bucket: "meta", Key: cloneBytes(k), Kind: "corrupt", Detail: "unexpected key"})
		}
		return nil
	})
}

func (c *checker) run(id string) {
	r, err := c.tx.handle(id) // not Run: its sequence check would stop the check's own
	if err != nil {
		c.fromErr("runs/"+id, err)
		return
	}
	for _, name := range subBuckets {
		if r.subBucket(name) == nil {
			c.add(Violation{Bucket: r.path, Kind: "structure", Detail: "missing sub-bucket " + name})
			return
		}
	}
	clean := len(c.vs)
	info := c.runRecord(r)
	rc := newRunCheck(r, info.LastStep)
	rc.dropped = info.DroppedStep
	c.dropped(r, info)
	c.groups(rc)
	c.nodes(rc)
	c.turns(rc)
	c.children(rc)
	c.frontier(rc)
	c.advantages(rc)
	c.rubrics(r)
	c.checkpoints(r)
	c.scalars(r)
	c.events(r, info.DroppedSeq)
	c.replies(r, info.DroppedSeq)
	c.logMatches(r)
	c.ids(r, bGroups, 1)
	c.ids(r, bNodes, 0)
	c.ids(r, bRubrics, 0)
	c.counters(rc, len(c.vs) == clean)
}

// runRecord checks the run record and returns it (zero when it is
// damaged).
func (c *checker) runRecord(r *RunTx) model.Run {
	info, err := r.Info()
	if err != nil {
		c.fromErr(r.path, err)
	} else if info.ID != r.id {
		c.inv(r.path, keyRun, "run record says id %q", info.ID)
	}
	return info
}

func (c *checker) groups(rc *runCheck) {
	_ = rc.r.subBucket(bGroups).ForEach(func(k, v []byte) error {
		c.progress(rc.r, "groups", 1)
		c.group(rc, k, v)
		return nil
	})
}

func (c *checker) nodes(rc *runCheck) {
	_ = rc.r.subBucket(bNodes).ForEach(func(k, v []byte) error {
		c.progress(rc.r, "nodes", 1)
		c.node(rc, k, v)
		return nil
	})
}

// turns checks the turns bucket against the node records: every turn
// decodes and belongs to a node whose turns include it (its turn ranges;
// in a file of format 2 or older, keyed node|index, its turn count), and
// each node has exactly as many turns stored as its record says. Memory
// stays bounded: the turns are walked in key order with a few hundred
// recent nodes cached, then the nodes in key order, each counting its own
// turns by seeking to them.
func (c *checker) turns(rc *runCheck) {
	r := rc.r
	path := r.bpath(bTurns)
	legacy := r.legacyTurns()
	turns := r.subBucket(bTurns)
	recent := map[uint64]*model.Node{}
	owner := func(id uint64) *model.Node {
		if n, ok := recent[id]; ok {
			return n
		}
		n := rc.node(id) // nil when missing or damaged: reported by the nodes walk
		if len(recent) >= maxGroupCache {
			clear(recent)
		}
		recent[id] = n
		return n
	}
	var top uint64
	_ = turns.ForEach(func(k, v []byte) error {
		c.progress(r, "turns", 1)
		if at, ok := c.turn(path, k, v, legacy, owner); ok {
			top = max(top, at)
		}
		return nil
	})
	_ = r.subBucket(bNodes).ForEach(func(k, v []byte) error {
		var n model.Node
		if len(k) != 8 || decodeValue(r.bpath(bNodes), k, v, &n) != nil || n.ID != keyU64(k, 0) {
			return nil // reported by the nodes walk
		}
		c.nodeTurns(rc, k, &n, legacy)
		return nil
	})
	if !legacy && top > turns.Sequence() {
		c.inv(path, nil, "sequence %d is below turn %d: new turns would overwrite old ones", turns.Sequence(), top)
	}
}

// inRanges reports whether seq lies in one of rs (which ascend).
func inRanges(rs model.TurnRanges, seq uint64) bool {
	lo, hi := 0, len(rs)
	for lo < hi {
		m := (lo + hi) / 2
		switch {
		case seq < rs[m].Seq:
			hi = m
		case seq >= rs[m].Seq+uint64(rs[m].Count):
			lo = m + 1
		default:
			return true
		}
	}
	return false
}

func (c *checker) children(rc *runCheck) {
	_ = rc.r.subBucket(bChildren).ForEach(func(k, v []byte) error {
		c.progress(rc.r, "children", 1)
		c.childEntry(rc, k, v)
		return nil
	})
}

func (c *checker) frontier(rc *runCheck) {
	_ = rc.r.subBucket(bFrontier).ForEach(func(k, v []byte) error {
		c.frontierEntry(rc, k, v)
		return nil
	})
}

func (c *checker) advantages(rc *runCheck) {
	_ = rc.r.subBucket(bAdv).ForEach(func(k, v []byte) error {
		c.progress(rc.r, "advantages", 1)
		c.advantage(rc, k, v)
		return nil
	})
}

func (c *checker) rubrics(r *RunTx) {
	path := r.bpath(bRubrics)
	pools := map[uint64]model.RubricPool{}
	merged := map[uint64]uint64{}
	_ = r.subBucket(bRubrics).ForEach(func(k, v []byte) error {
		var rb model.Rubric
		if err := decodeValue(path, k, v, &rb); err != nil {
			c.fromErr(path, err)
			return nil
		}
		if len(k) != 8 || rb.ID != keyU64(k, 0) {
			c.inv(path, cloneBytes(k), "record does not match its key")
		}
		if !rb.Pool.Valid() {
			c.inv(path, cloneBytes(k), "unknown pool %q", rb.Pool)
		}
		pools[rb.ID] = rb.Pool
		if rb.Pool == model.PoolMerged {
			merged[rb.ID] = rb.MergedInto
		}
		return nil
	})
	for id, into := range merged {
		if p, ok := pools[into]; !ok || (p != model.PoolPublic && p != model.PoolRetired) {
			c.inv(path, u64key(id), "merged into %d, which is not a public or retired rubric", into)
		}
	}
}

func (c *checker) checkpoints(r *RunTx) {
	path := r.bpath(bCkpt)
	_ = r.subBucket(bCkpt).ForEach(func(k, v []byte) error {
		var ck model.Checkpoint
		if err := decodeValue(path, k, v, &ck); err != nil {
			c.fromErr(path, err)
		} else if len(k) != 8 || ck.Step != keyU64(k, 0) {
			c.inv(path, cloneBytes(k), "record does not match its key")
		}
		return nil
	})
}

func (c *checker) events(r *RunTx, droppedSeq uint64) {
	path := r.bpath(bEvents)
	want := uint64(1)
	b := r.subBucket(bEvents)
	var payloads payloadChunks
	_ = b.ForEach(func(k, v []byte) error {
		c.progress(r, "events", 1)
		var e model.Event
		if err := decodeEvent(path, k, v, &e, &payloads); err != nil {
			c.fromErr(path, err)
		} else if len(k) != 8 || e.Seq != keyU64(k, 0) {
			c.inv(path, cloneBytes(k), "record does not match its key")
		} else if e.Kind == model.EvReply {
			c.replyLogged(r, &e)
		}
		if len(k) == 8 {
			// DropSteps deletes events up to droppedSeq, leaving gaps there.
			if got := keyU64(k, 0); got != want && got > droppedSeq+1 {
				c.inv(path, cloneBytes(k), "sequence jumps from %d to %d", want-1, got)
			}
			want = keyU64(k, 0) + 1
		}
		return nil
	})
	if want-1 != b.Sequence() {
		c.inv(path, nil, "last event is %d but the sequence is at %d", want-1, b.Sequence())
	}
}

// hasKey reports whether b holds key (index buckets store empty values,
// which Get does not tell from a missing key).
func hasKey(b *bolt.Bucket, key []byte) bool {
	k, _ := b.Cursor().Seek(key)
	return bytes.Equal(k, key)
}

// ids checks that a bucket's sequence covers every id in its keys (the
// idAt-th u64 of the key): a sequence below an existing id would hand that
// id to a new record, which would overwrite the old one.
func (c *checker) ids(r *RunTx, name string, idAt int) {
	b := r.subBucket(name)
	var top uint64
	if idAt == 0 {
		if k, _ := b.Cursor().Last(); len(k) == 8 {
			top = keyU64(k, 0)
		}
	} else {
		_ = b.ForEach(func(k, _ []byte) error {
			if len(k) == (idAt+1)*8 {
				top = max(top, keyU64(k, idAt))
			}
			return nil
		})
	}
	if top > b.Sequence() {
		c.inv(r.bpath(name), nil, "sequence %d is below id %d: new records would overwrite old ones", b.Sequence(), top)
	}
}

func (c *checker) inv(bucket string, key []byte, format string, args ...any) {
	c.add(Violation{Bucket: bucket, Key: key, Kind: "invariant", Detail: fmt.Sprintf(format, args...)})
}
