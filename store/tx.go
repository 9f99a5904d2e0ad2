package store

import (
	"regexp"
	"sort"

	bolt "go.etcd.io/bbolt"
)

// Tx is a patrdb transaction, valid only inside the Update or View function
// that received it. Records it returns are copies and stay valid after it
// ends.
type Tx struct {
	db       *DB
	btx      *bolt.Tx
	snapshot uint64                 // the committed txid this transaction reads
	err      error                  // first failed write: the transaction will not commit
	dirty    map[nodeKey]*dirtyNode // nodes changed in this write transaction
	runs     map[string]*RunTx
	done     bool
	written  int64      // bytes of keys and values put through put: sizes the file's growth (growStep)
	keyBuf   [24]byte   // putKey's
	vals     valueArena // the values it puts (txvalues.go)
}

func newTx(db *DB, btx *bolt.Tx) *Tx {
	tx := &Tx{db: db, btx: btx, runs: map[string]*RunTx{}}
	tx.snapshot = uint64(btx.ID())
	if btx.Writable() {
		tx.snapshot-- // a write transaction reads the last committed state
		tx.dirty = map[nodeKey]*dirtyNode{}
	}
	return tx
}

// put is bbolt's Put, counting the bytes for growStep.
func (tx *Tx) put(b *bolt.Bucket, k, v []byte) error {
	tx.written += int64(len(k) + len(v))
	return b.Put(k, v)
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

var runIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)

// ValidRunID reports whether id may name a run: 1–128 bytes of
// [A-Za-z0-9._-].
func ValidRunID(id string) bool { return runIDPattern.MatchString(id) }

// CreateRun creates a run with the given id and opaque JSON config.
func (tx *Tx) CreateRun(id string, config []byte, meta map[string]string) (*RunTx, error) {
	if err := tx.check(true); err != nil {
		return nil, err
	}
	if !ValidRunID(id) {
		return nil, tx.fail(invalidf("run id %q: want 1-128 bytes of [A-Za-z0-9._-]", id))
	}
	runs := tx.btx.Bucket(bucketRuns)
	if runs.Bucket([]byte(id)) != nil {
		return nil, tx.fail(existsf("run %q", id))
	}
	b, err := runs.CreateBucket([]byte(id))
	if err != nil {
		return nil, tx.fail(err)
	}
	for _, name := range append(subBuckets, bCounts, bGroupIDs) {
		if _, err := b.CreateBucket([]byte(name)); err != nil {
			return nil, tx.fail(err)
		}
	}
	r := tx.bind(id, b)
	now := tx.db.opts.now().UnixNano()
	run := Run{ID: id, Config: cloneBytes(config), Status: RunRunning, CreatedAt: now, UpdatedAt: now, Meta: meta}
	if err := r.putRun(&run, EvRunCreate); err != nil {
		return nil, tx.fail(err)
	}
	return r, nil
}

// Run returns a handle on an existing run, or ErrNotFound.
func (tx *Tx) Run(id string) (*RunTx, error) {
	if err := tx.check(false); err != nil {
		return nil, err
	}
	if r, ok := tx.runs[id]; ok {
		return r, nil
	}
	b := tx.btx.Bucket(bucketRuns).Bucket([]byte(id))
	if b == nil {
		return nil, notFoundf("run %q", id)
	}
	return tx.bind(id, b), nil
}

// RunIDs lists the runs in key order.
func (tx *Tx) RunIDs() ([]string, error) {
	if err := tx.check(false); err != nil {
		return nil, err
	}
	var ids []string
	err := tx.btx.Bucket(bucketRuns).ForEachBucket(func(k []byte) error {
		ids = append(ids, string(k))
		return nil
	})
	sort.Strings(ids)
	return ids, err
}

// Runs returns every run's record in id order.
func (tx *Tx) Runs() ([]Run, error) {
	ids, err := tx.RunIDs()
	if err != nil {
		return nil, err
	}
	out := make([]Run, 0, len(ids))
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

var subBuckets = []string{bGroups, bNodes, bTurns, bChildren, bFrontier, bAdv, bRubrics, bCkpt, bEvents}

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
	sub   map[string]*bolt.Bucket
	path  string
	paths map[string]string // bpath's
	// counts are the run's counters while a write transaction changes
	// them (counts.go).
	counts *runCounts
	// groups are the groups a write transaction read or changed
	// (txgroups.go).
	groups map[groupKey]*txGroup
	// queues are the turns and events a write transaction has yet to put
	// (txqueue.go).
	queues []*queued
}

func (tx *Tx) bind(id string, b *bolt.Bucket) *RunTx {
	r := &RunTx{tx: tx, id: id, b: b, sub: make(map[string]*bolt.Bucket, len(subBuckets)), path: "runs/" + id}
	for _, name := range subBuckets {
		sb := b.Bucket([]byte(name))
		if f, ok := fillPercent[name]; ok && sb != nil && tx.Writable() {
			sb.FillPercent = f
		}
		r.sub[name] = sb
	}
	tx.runs[id] = r
	return r
}

// bucket returns a sub-bucket, or a CorruptError when the run's bucket lacks
// it (the file was damaged or hand-edited), with the records queued for it
// put (txqueue.go).
func (r *RunTx) bucket(name string) (*bolt.Bucket, error) {
	b := r.sub[name]
	if b == nil {
		return nil, r.missing(name)
	}
	if len(r.queues) > 0 {
		if err := r.putQueued(name); err != nil {
			return nil, err
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
