package main

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/internal/workload"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// sameC is the append targets' anchor read literally: raw bbolt Put of the
// same bytes patrdb stores. Its keys and values are every record a patrdb
// transaction leaves changed in the file — turns, node records, events,
// the frontier and child indexes, groups, counters, advantages, the
// group-id index — put into the same nested buckets, each bucket's keys in
// order (append order for every bucket patrdb appends to), with the same
// page size and the same commits; the frontier entries patrdb deletes are
// deleted. The bytes come from a shadow patrdb store that applies each
// transaction in prepare, before the clock starts, and a diff of its
// buckets against the previous transaction's. What the anchor
// leaves out is exactly patrdb's own work: validation, deciding what to
// write, and encoding everything but the turns.
//
// In floor mode the same keys and values go to the end of a plain file
// with one pwrite and one fdatasync per commit instead: the disk floor.
type sameC struct {
	// encodeInside leaves the turn values to be encoded inside the timed
	// transaction (store.EncodeTurn, byte for byte what patrdb stores), as
	// AppendTurns does; every other value is patrdb's bytes as found.
	encodeInside bool
	floor        bool
	pageSize     int  // 0: patrdb's default
	noSync       bool // for the CPU-only go test benchmarks; the runner keeps fsync on

	db   *bolt.DB
	f    *os.File // floor mode
	off  int64
	path string

	shadow  *store.DB
	snap    map[string][]byte // bucket names joined by "\x00", then "\x00\x00" and the key → value
	initial []sameOp          // the records CreateRun left, put when the file is created
}

// sameOp is one Put (or Delete) of the diff.
type sameOp struct {
	bucket [][]byte // nested bucket names from the root
	path   string   // those names joined, to tell buckets apart cheaply in apply
	key    []byte
	val    []byte
	turn   *model.Turn // encodeInside: the value is this turn's encoding
	del    bool
}

func (c *sameC) name() string {
	switch {
	case c.floor:
		return cFloor
	case c.encodeInside:
		return cSameInside
	}
	return cSameAhead
}

func (c *sameC) files() []string { return []string{c.path} }

func (c *sameC) boltDB() *bolt.DB { return c.db } // nil in floor mode

func (c *sameC) shadowPath() string { return c.path + ".shadow" }

func (c *sameC) open(path string) error {
	c.path = path
	if err := removeStore(path); err != nil {
		return err
	}
	if err := removeStore(c.shadowPath()); err != nil {
		return err
	}
	// The shadow fsyncs its commits, in prepare: left to the kernel's
	// writeback, its pages would reach the disk during the anchor's own
	// timed commit and slow it.
	opts := store.DefaultOptions()
	opts.NoSync = c.noSync
	opts.PageSize = cmp.Or(c.pageSize, opts.PageSize)
	shadow, err := store.Open(c.shadowPath(), opts)
	if err != nil {
		return err
	}
	c.shadow, c.snap = shadow, map[string][]byte{}
	if err := shadow.Update(func(tx *store.Tx) error {
		_, err := tx.CreateRun(benchRun, []byte(`{"workload":"bench"}`), nil)
		return err
	}); err != nil {
		return err
	}
	// The file starts as patrdb's does after CreateRun, untimed.
	if c.initial, err = c.diff(); err != nil {
		return err
	}
	if c.floor {
		c.f, err = os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
		c.off = 0
		if err != nil {
			return err
		}
		return c.apply(c.ready(c.initial))
	}
	return c.openBolt()
}

// openBolt creates the anchor's bbolt file afresh and puts the initial
// records into it.
func (c *sameC) openBolt() error {
	if err := removeStore(c.path); err != nil {
		return err
	}
	db, err := bolt.Open(c.path, 0o600, &bolt.Options{
		PageSize:        cmp.Or(c.pageSize, store.DefaultOptions().PageSize),
		InitialMmapSize: int(store.DefaultOptions().InitialMmapSize),
		FreelistType:    bolt.FreelistMapType,
		NoSync:          c.noSync,
	})
	if err != nil {
		return err
	}
	c.db = db
	return c.apply(c.initial)
}

// reopen closes the anchor's bbolt file and starts it again as open left
// it, keeping the shadow store: transactions prepared before then apply
// to it a second time, for benchmarks that prepare once and apply in a
// loop. Not in floor mode.
func (c *sameC) reopen() error {
	if c.db != nil {
		if err := c.db.Close(); err != nil {
			return err
		}
		c.db = nil
	}
	return c.openBolt()
}

func (c *sameC) prepare(txn []workload.Op) (any, error) {
	if err := workload.ApplyTxn(c.shadow, benchRun, txn); err != nil {
		return nil, fmt.Errorf("shadow store: %w", err)
	}
	ops, err := c.diff()
	if err != nil {
		return nil, err
	}
	if c.encodeInside {
		if err := matchTurns(ops, txn); err != nil {
			return nil, err
		}
	}
	return c.ready(ops), nil
}

// ready is ops as apply takes them: in floor mode, the bytes to write.
func (c *sameC) ready(ops []sameOp) any {
	if c.floor {
		return floorBytes(ops)
	}
	return ops
}

// turnsBucket is where patrdb keeps the bench run's turns.
var turnsBucket = []string{"runs", benchRun, "turns"}

// matchTurns hands each new turn value of ops its turn, to be encoded
// inside the transaction: patrdb numbers turns in the order they are
// appended, so the transaction's turns, in order, are the diff's new turn
// keys, in order. A value that is not that turn's encoding is an error.
func matchTurns(ops []sameOp, txn []workload.Op) error {
	var turns []*model.Turn
	for i := range txn {
		for j := range txn[i].Turns {
			turns = append(turns, &txn[i].Turns[j])
		}
	}
	n := 0
	for i := range ops {
		op := &ops[i]
		if op.del || !slices.EqualFunc(op.bucket, turnsBucket, func(a []byte, b string) bool { return string(a) == b }) {
			continue
		}
		if n == len(turns) {
			return fmt.Errorf("the shadow store wrote more turns than the transaction holds")
		}
		v, err := store.EncodeTurn(turns[n])
		if err != nil {
			return err
		}
		if !bytes.Equal(v, op.val) {
			return fmt.Errorf("turn value %d of the transaction is not the shadow store's", n)
		}
		op.val, op.turn = nil, turns[n]
		n++
	}
	if n != len(turns) {
		return fmt.Errorf("the shadow store wrote %d turns of the transaction's %d", n, len(turns))
	}
	return nil
}

// diff walks the shadow store and returns what changed since the last
// call, bucket by bucket in key order, deletions last.
func (c *sameC) diff() ([]sameOp, error) {
	var ops []sameOp
	next := make(map[string][]byte, len(c.snap))
	err := storetest.Bolt(c.shadow).View(func(tx *bolt.Tx) error {
		var walk func(path [][]byte, b *bolt.Bucket) error
		walk = func(path [][]byte, b *bolt.Bucket) error {
			joined := string(bytes.Join(path, []byte{0}))
			prefix := joined + "\x00\x00"
			return b.ForEach(func(k, v []byte) error {
				if v == nil {
					return walk(append(slices.Clip(path), bytes.Clone(k)), b.Bucket(k))
				}
				mk := prefix + string(k)
				old, ok := c.snap[mk]
				if ok && bytes.Equal(old, v) {
					next[mk] = old
					return nil
				}
				v = bytes.Clone(v)
				next[mk] = v
				ops = append(ops, sameOp{bucket: path, path: joined, key: bytes.Clone(k), val: v})
				return nil
			})
		}
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return walk([][]byte{bytes.Clone(name)}, b)
		})
	})
	if err != nil {
		return nil, err
	}
	var gone []string
	for mk := range c.snap {
		if _, ok := next[mk]; !ok {
			gone = append(gone, mk)
		}
	}
	slices.Sort(gone)
	for _, mk := range gone {
		path, key, _ := strings.Cut(mk, "\x00\x00")
		ops = append(ops, sameOp{bucket: bytes.Split([]byte(path), []byte{0}), path: path, key: []byte(key), del: true})
	}
	c.snap = next
	return ops, nil
}

// floorBytes is what the disk floor writes for ops: their keys and values
// back to back, laid out before the clock starts.
func floorBytes(ops []sameOp) []byte {
	var buf []byte
	for i := range ops {
		buf = append(append(buf, ops[i].key...), ops[i].val...)
	}
	return buf
}

func (c *sameC) apply(prepared any) error {
	if c.floor {
		buf := prepared.([]byte)
		if _, err := c.f.WriteAt(buf, c.off); err != nil {
			return err
		}
		c.off += int64(len(buf))
		return datasync(c.f)
	}
	ops := prepared.([]sameOp)
	return c.db.Update(func(tx *bolt.Tx) error {
		var (
			last string // the bucket path of b
			b    *bolt.Bucket
		)
		for i := range ops {
			op := &ops[i]
			if b == nil || op.path != last {
				var err error
				if b, err = sameBucket(tx, op.bucket); err != nil {
					return err
				}
				last = op.path
			}
			if op.del {
				if err := b.Delete(op.key); err != nil {
					return err
				}
				continue
			}
			v := op.val
			if op.turn != nil {
				var err error
				if v, err = store.EncodeTurn(op.turn); err != nil {
					return err
				}
			}
			if err := b.Put(op.key, v); err != nil {
				return err
			}
		}
		return nil
	})
}

// sameBucket opens (creating as needed) the nested bucket at path, its
// pages packed full: every bucket of the anchor is written in key order.
func sameBucket(tx *bolt.Tx, path [][]byte) (*bolt.Bucket, error) {
	b, err := tx.CreateBucketIfNotExists(path[0])
	for _, name := range path[1:] {
		if err != nil {
			break
		}
		b, err = b.CreateBucketIfNotExists(name)
	}
	if err != nil {
		return nil, err
	}
	b.FillPercent = 1.0
	return b, nil
}

func (c *sameC) close() error {
	var errs []error
	if c.shadow != nil {
		errs = append(errs, c.shadow.Close(), removeStore(c.shadowPath()))
		c.shadow = nil
	}
	if c.db != nil {
		errs = append(errs, c.db.Close())
		c.db = nil
	}
	if c.f != nil {
		errs = append(errs, c.f.Close())
		c.f = nil
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
