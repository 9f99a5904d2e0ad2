package store

import (
	"fmt"
	"regexp"
	"sort"
	"time"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store/internal/pagewalk"
	bolt "go.etcd.io/bbolt"
)

// Tx is a patrdb transaction, valid only inside the Update or View function
// that received it. Records it returns are copies and stay valid after it
// ends.
type Tx struct {
	db        *DB
	btx       *bolt.Tx
	snapshot  uint64 // the committed txid this transaction reads
	err       error  // first failed write: the transaction will not commit
	runs      map[string]*RunTx
	done      bool
	written   int64      // bytes of keys and values put through put: sizes the file's growth (growStep)
	keyBuf    [24]byte   // putKey's
	start     time.Time  // eventTime's reading of the wall clock
	startNano int64      // start in Unix nanoseconds (0: not read yet)
	turnVals  [][]byte   // AppendTurns' scratch: one call's turn values
	vals      valueArena // the values it puts (txvalues.go)
	// checkReads: the transaction reads a file nobody has checked
	// (CheckReads); checked are its run handles, which check what they
	// read, by id.
	checkReads bool
	checked    map[string]*RunTx
	// paths are the page walkers of its checks (pagePaths), whose
	// mappings of the file end with it.
	paths []*pagewalk.Paths
}

func newTx(db *DB, btx *bolt.Tx) *Tx {
	tx := &Tx{db: db, btx: btx, runs: map[string]*RunTx{}}
	tx.snapshot = uint64(btx.ID())
	if btx.Writable() {
		tx.snapshot-- // a write transaction reads the last committed state
	}
	return tx
}

// put is bbolt's Put, counting the bytes for growStep.
func (tx *Tx) put(b *bolt.Bucket, k, v []byte) error {
	tx.written += int64(len(k) + len(v))
	return b.Put(k, v)
}

// eventTime is the time of an event written now, in Unix nanoseconds.
// A step writes an event per API call, thousands, and reading the wall
// clock costs half again what reading the monotonic one does; so the
// wall clock is read once, at the transaction's first event, and later
// events add the monotonic time since (which also keeps a transaction's
// events in time order when the wall clock is stepped). A DB opened with
// Options.Clock reads that clock for every event.
func (tx *Tx) eventTime() int64 {
	if tx.db.opts.Clock != nil {
		return tx.db.opts.Clock().UnixNano()
	}
	if tx.startNano == 0 {
		tx.start = time.Now()
		tx.startNano = tx.start.UnixNano()
		return tx.startNano
	}
	return tx.startNano + int64(time.Since(tx.start))
}

// Writable reports whether the transaction may write.
func (tx *Tx) Writable() bool { return tx.btx.Writable() }

// Size is the file size as this transaction sees it.
func (tx *Tx) Size() int64 { return tx.btx.Size() }

// fail records the first write error; Update will not commit after it.
func (tx *Tx) fail(err error) error {
	if err != nil && tx.err == nil && tx.Writable() {
		tx.err = err
	}
	return err
}

func (tx *Tx) check(write bool) error {
	if tx.done {
		return ErrTxDone
	}
	if write && !tx.Writable() {
		return ErrReadOnly
	}
	return nil
}

// RunIDRule is the grammar of a run id, as every interface words it: the
// id is a path segment of the API's URLs and a folder name in the lake
// (run=<id>), where "." and ".." would name another place.
const RunIDRule = "1-128 bytes of [A-Za-z0-9._-], other than . and .."

var runIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)

// ValidRunID reports whether id may name a run (RunIDRule).
func ValidRunID(id string) bool { return id != "." && id != ".." && runIDPattern.MatchString(id) }

// damagedHeader is the error for a run whose bucket, or one of whose
// sub-buckets, bbolt could not open (it panicked with p): it opens each
// again to name the one whose header is damaged.
func (tx *Tx) damagedHeader(id string, p any) error {
	opens := func(open func()) (ok bool) {
		defer func() { ok = recover() == nil }()
		open()
		return
	}
	path := "runs/" + id
	var run *bolt.Bucket
	if opens(func() { run = tx.btx.Bucket(bucketRuns).Bucket([]byte(id)) }) && run != nil {
		for _, name := range append(subBuckets[:], laterBuckets[:]...) {
			if !opens(func() { run.Bucket([]byte(name)) }) {
				path += "/" + name
				break
			}
		}
	}
	return &CorruptError{Bucket: path, Reason: fmt.Sprintf("its bucket header is damaged (bbolt: %v)", p)}
}

// CreateRun creates a run with the given id and opaque JSON config.
func (tx *Tx) CreateRun(id string, config []byte, meta map[string]string) (*RunTx, error) {
	if err := tx.check(true); err != nil {
		return nil, err
	}
	if !ValidRunID(id) {
		return nil, tx.fail(invalidf("run id %q: want %s", id, RunIDRule))
	}
	runs, err := tx.runsBucket()
	if err != nil {
		return nil, tx.fail(err)
	}
	if runs.Bucket([]byte(id)) != nil {
		return nil, tx.fail(existsf("run %q", id))
	}
	b, err := runs.CreateBucket([]byte(id))
	if err != nil {
		return nil, tx.fail(err)
	}
	for _, name := range append(subBuckets[:], laterBuckets[:]...) {
		if _, err := b.CreateBucket([]byte(name)); err != nil {
			return nil, tx.fail(err)
		}
	}
	r := tx.bind(id, b)
	r.sequencesOK = true // all empty
	now := tx.db.opts.now().UnixNano()
	run := model.Run{ID: id, Config: cloneBytes(config), Status: model.RunRunning, CreatedAt: now, UpdatedAt: now, Meta: meta}
	if err := r.putRun(&run, model.EvRunCreate); err != nil {
		return nil, tx.fail(err)
	}
	return r, nil
}

// Run returns a handle on an existing run, or ErrNotFound.
func (tx *Tx) Run(id string) (*RunTx, error) {
	if err := tx.check(false); err != nil {
		return nil, err
	}
	if tx.checkReads {
		return tx.checkedHandle(id)
	}
	r, err := tx.handle(id)
	if err != nil || !tx.Writable() || r.sequencesOK {
		return r, err
	}
	if tx.takeCarry(r) { // the sequences as this handle's last commit wrote them (txcarry.go)
		r.sequencesOK = true
		return r, nil
	}
	// Before anything is written to the run (sequences.go).
	if err := r.checkSequences(); err != nil {
		return nil, tx.fail(err)
	}
	r.sequencesOK = true
	return r, nil
}

// handle is the transaction's handle on run id, bound on first use. Check
// takes it as it is; Run checks a writer's sequences first.
func (tx *Tx) handle(id string) (*RunTx, error) {
	if r, ok := tx.runs[id]; ok {
		return r, nil
	}
	return tx.open(id)
}

// open binds run id, opening its bucket and every sub-bucket. bbolt takes
// a bucket header it opens on trust: one that says root 0 with no inline
// page after it makes bbolt index past the value, a panic here, which
// becomes the run's ErrCorrupt instead of the caller's crash. (A reader
// of a file nobody checked walks the headers first: Check with
// CheckOptions.Parts, or a transaction in checked mode.)
func (tx *Tx) open(id string) (r *RunTx, err error) {
	defer func() {
		if p := recover(); p != nil {
			r, err = nil, tx.damagedHeader(id, p)
		}
	}()
	runs, err := tx.runsBucket()
	if err != nil {
		return nil, err
	}
	var b *bolt.Bucket
	if runs != nil {
		b = runs.Bucket([]byte(id))
	}
	if b == nil {
		return nil, notFoundf("run %q", id)
	}
	return tx.bind(id, b), nil
}

// runsBucket is the bucket of every run. A fresh file has none yet and
// holds no runs (nil, nil); any other file without one is damaged.
func (tx *Tx) runsBucket() (*bolt.Bucket, error) {
	if b := tx.btx.Bucket(bucketRuns); b != nil {
		return b, nil
	}
	if tx.db.fresh {
		return nil, nil
	}
	return nil, &CorruptError{Bucket: "runs", Reason: "the runs bucket is missing"}
}

// RunIDs lists the runs in key order.
func (tx *Tx) RunIDs() ([]string, error) {
	if err := tx.check(false); err != nil {
		return nil, err
	}
	if tx.checkReads {
		if err := tx.walkParts("", CheckMetas|CheckRunList); err != nil {
			return nil, err
		}
	}
	runs, err := tx.runsBucket()
	if runs == nil {
		return nil, err
	}
	var ids []string
	err = runs.ForEachBucket(func(k []byte) error {
		ids = append(ids, string(k))
		return nil
	})
	sort.Strings(ids)
	return ids, err
}

// Runs returns every run's record in id order.
func (tx *Tx) Runs() ([]model.Run, error) {
	ids, err := tx.RunIDs()
	if err != nil {
		return nil, err
	}
	out := make([]model.Run, 0, len(ids))
	for _, id := range ids {
		r, err := tx.Run(id)
		if err != nil {
			return nil, err
		}
		info, err := r.Info()
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// Sub-bucket names inside a run's bucket (drawn in doc.go).
const (
	bGroups   = "groups"
	bNodes    = "nodes"
	bTurns    = "turns"
	bChildren = "children"
	bFrontier = "frontier"
	bAdv      = "adv"
	bRubrics  = "rubrics"
	bCkpt     = "ckpt"
	bEvents   = "events"
)

var subBuckets = [...]string{bGroups, bNodes, bTurns, bChildren, bFrontier, bAdv, bRubrics, bCkpt, bEvents}

// laterBuckets are the sub-buckets a run written by an older build may
// lack; each is built from the run's records or log by the first write
// transaction that needs it (counts.go, reply.go), and a new run has them
// all from the start.
var laterBuckets = [...]string{bCounts, bGroupIDs, bReplies}

// subIndex is name's place in subBuckets, -1 when it is not one. Every API
// call looks up a sub-bucket or two, and a switch on the name costs a
// fraction of a map lookup.
func subIndex(name string) int {
	switch name {
	case bGroups:
		return 0
	case bNodes:
		return 1
	case bTurns:
		return 2
	case bChildren:
		return 3
	case bFrontier:
		return 4
	case bAdv:
		return 5
	case bRubrics:
		return 6
	case bCkpt:
		return 7
	case bEvents:
		return 8
	}
	return -1
}

// subBucket is the run's sub-bucket name as bound (nil when the file
// lacks it, or name is not a sub-bucket's).
func (r *RunTx) subBucket(name string) *bolt.Bucket {
	if i := subIndex(name); i >= 0 {
		return r.sub[i]
	}
	return nil
}

// fillPercent is each sub-bucket's bbolt FillPercent: how full a page is
// left when a commit splits it. Turns, events, groups, advantages and
// checkpoints grow at their end (format 3 numbers turns in append order),
// so they are packed full: a page behind the end is never written again.
// Node records are rewritten as their branch is scored and routed, which
// grows them; a full page would split on the next growth into a full page
// and a nearly empty one, so node pages keep a quarter free for it.
// Children keys (parent|child) land near the end, not at it. Measured
// after demo --map 8x8 --steps 30 (bench/RESULTS.md): nodes at 1.0 used
// 27% of their pages, at 0.75 77%, at 0.9 57%; children 27% at 1.0, 92%
// at 0.9.
var fillPercent = map[string]float64{
	bGroups: 1, bNodes: 0.75, bTurns: 1, bChildren: 0.9, bAdv: 1, bCkpt: 1, bEvents: 1,
}

// keyRun is the key of the run record inside the run's bucket.
var keyRun = []byte("run")

// RunTx is a transaction's handle on one run. Valid only for the life of
// the transaction.
type RunTx struct {
	tx    *Tx
	id    string
	b     *bolt.Bucket
	sub   [len(subBuckets)]*bolt.Bucket // by subIndex
	path  string
	paths map[string]string // bpath's
	// cacheTag is the run's tag in the node cache's keys (cache.go).
	cacheTag uint64
	// counts are the run's counters while a write transaction changes
	// them (counts.go).
	counts *runCounts
	// groups are the groups a write transaction read or changed
	// (txgroups.go).
	groups    map[groupKey]*txGroup
	lastGroup *txGroup // groupRef's last, one of groups
	// queues are the turns and events a write transaction has yet to put
	// (txqueue.go).
	queues []*queued
	// events is the events bucket's queue (putEvent's, found once).
	events *queued
	// dirty are the run's nodes a write transaction changed (putNode),
	// by id: looked up on every node read and change, so keyed by the id
	// alone rather than by run and id.
	dirty map[uint64]*dirtyNode
	// listed are the entries of dirty in the order they joined it
	// (writeDirty sorts them by id); flushTodo is writeDirty's scratch.
	listed, flushTodo []*dirtyNode
	// frontier are the nodes whose frontier key a write transaction may
	// have changed, put at flush (txqueue.go); frontierTodo is
	// putFrontier's scratch.
	frontier     []*dirtyNode
	frontierTodo []frontierPut
	// advFirst are the groups' first advantage records as the
	// transaction leaves them (counts.go).
	advFirst map[groupKey]advFirst
	// kids are the children of the nodes a write transaction looked up or
	// added, by parent (node.go).
	kids map[uint64][]uint64
	// firstNew is the first node id this write transaction gave out (0:
	// none yet): a node from there on has only the children in kids.
	firstNew uint64
	// fresh are the dirty-set entries of the nodes this transaction
	// added, by id - firstNew (dirtyEntry).
	fresh []*dirtyNode
	// sequencesOK: a write transaction found the run's id sequences in
	// step with its records (sequences.go).
	sequencesOK bool
	// droppedNodes are the nodes DropSteps deleted, for the node cache to
	// forget at the commit.
	droppedNodes []uint64
	// walkQueue is walkGroupNodes' queue, kept for the next walk.
	walkQueue []uint64
	// chk checks what the handle reads: set on the handles of a
	// transaction in checked mode (checkreads.go), nil on the others.
	chk *checkedRun
}

// checking reports whether the handle's reads must check what they read:
// in checked mode, until the whole run has checked clean (checkedRun.Sound).
// After that every read is the plain one, so a command that reads the
// whole run (stats, an export) pays for the whole-run check once, not
// again read by read.
func (r *RunTx) checking() bool {
	return r.chk != nil && !(r.chk.whole && r.chk.sound == nil)
}

func (tx *Tx) bind(id string, b *bolt.Bucket) *RunTx {
	r := &RunTx{tx: tx, id: id, b: b, path: "runs/" + id, cacheTag: tx.db.cache.tag(id)}
	for i, name := range subBuckets {
		sb := b.Bucket([]byte(name))
		if f, ok := fillPercent[name]; ok && sb != nil && tx.Writable() {
			sb.FillPercent = f
		}
		r.sub[i] = sb
	}
	if tx.Writable() {
		s := tx.db.sizes
		r.dirty = make(map[uint64]*dirtyNode, s.dirty)
		r.kids = make(map[uint64][]uint64, s.kids)
	}
	tx.runs[id] = r
	return r
}

// txSizes are how many entries a write transaction's per-run maps held.
// A trainer's transactions are alike — a round, or a step, at a time — so
// the next one makes its maps that size up front instead of growing them
// from empty, which took 3% of the API's CPU on ~1 KB steps.
type txSizes struct{ dirty, kids int }

// handOnSizes leaves the transaction's sizes for the next (Update calls it
// as the transaction ends, under writeMu).
func (tx *Tx) handOnSizes() {
	var s txSizes
	for _, r := range tx.runs {
		s.dirty = max(s.dirty, len(r.dirty))
		s.kids = max(s.kids, len(r.kids))
	}
	tx.db.sizes = s
}

// bucket returns a sub-bucket, or a CorruptError when the run's bucket lacks
// it (the file was damaged or hand-edited), with the records queued for it
// put (txqueue.go).
func (r *RunTx) bucket(name string) (*bolt.Bucket, error) {
	b := r.subBucket(name)
	if b == nil {
		return nil, r.missing(name)
	}
	if len(r.queues) > 0 {
		if err := r.putQueued(name); err != nil {
			return nil, err
		}
	}
	if name == bFrontier && len(r.frontier) > 0 {
		if err := r.putFrontier(); err != nil {
			return nil, r.tx.fail(err)
		}
	}
	return b, nil
}

func (r *RunTx) missing(name string) error {
	return &CorruptError{Bucket: r.path, Reason: "missing sub-bucket " + name}
}

// bpath is a sub-bucket's path, the label of its errors. Built once per
// transaction and bucket, not per record read.
func (r *RunTx) bpath(name string) string {
	if p, ok := r.paths[name]; ok {
		return p
	}
	if r.paths == nil {
		r.paths = make(map[string]string, 2)
	}
	p := r.path + "/" + name
	r.paths[name] = p
	return p
}

// ID is the run's id.
func (r *RunTx) ID() string { return r.id }
