package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/internal/workload"
)

// A contender stores the workload's transactions its own way. prepare runs
// outside the timed region (the raw bbolt anchor pre-encodes there); apply
// is one durable transaction and is timed.
type contender interface {
	name() string
	// open creates a fresh store at path (removing whatever was there).
	open(path string) error
	prepare(txn []workload.Op) (any, error)
	apply(prepared any) error
	// close releases the store; closing a closed contender does nothing.
	close() error
	// files lists the files the store occupies, for bytes on disk.
	files() []string
}

// boltBacked is a contender that commits through bbolt: its commits'
// spill and page writes (bbolt's TxStats) are told apart from the rest
// of its time.
type boltBacked interface {
	boltDB() *bolt.DB // nil when it has none open
}

// boltCommitTime is the time db's commits have spent in spill and in
// writing pages (fsyncs included) since it was opened.
func boltCommitTime(db *bolt.DB) time.Duration {
	s := db.Stats().TxStats
	return s.GetSpillTime() + s.GetWriteTime()
}

// Contender names, in the order the tables list them.
const (
	cPatrdb    = "patrdb"
	cPatrdbEnc = "patrdb, turns encoded ahead"
	cBolt      = "raw bbolt"
	cSQLite    = "SQLite"
	cJSONL     = "JSONL"

	// The append matrix's anchors (matrix.go): raw bbolt and the disk floor
	// storing patrdb's bytes (samebytes.go), and raw bbolt storing only the
	// turns and node records (rawbolt.go).
	cSameInside = "raw bbolt, patrdb's bytes, turns encoded inside"
	cSameAhead  = "raw bbolt, patrdb's bytes, encoded ahead"
	cFloor      = "disk floor, patrdb's bytes"
	cBoltInside = "raw bbolt, turns and nodes only, encoded inside"
)

var contenderNames = []string{cPatrdb, cPatrdbEnc, cBolt, cSQLite, cJSONL}

// appendContenders are those of the runner's append runs: contenderNames
// and the anchor the append targets are set against, raw bbolt putting
// patrdb's own bytes (samebytes.go). Peak RSS is measured for
// contenderNames only.
var appendContenders = append(slices.Clone(contenderNames), cSameInside, cSameAhead)

func newContender(name string) (contender, error) {
	switch name {
	case cPatrdb:
		return &patrdbC{}, nil
	case cPatrdbEnc:
		return &patrdbC{encodeAhead: true}, nil
	case cBolt:
		return &boltC{}, nil
	case cSQLite:
		return &sqliteC{}, nil
	case cJSONL:
		return &jsonlC{}, nil
	case cBoltInside:
		return &boltC{appendOrder: true, encodeInside: true}, nil
	case cSameInside:
		return &sameC{encodeInside: true}, nil
	case cSameAhead:
		return &sameC{}, nil
	case cFloor:
		return &sameC{floor: true}, nil
	}
	return nil, fmt.Errorf("bench: unknown contender %q", name)
}

// fileName is the store's file name inside a work directory.
func fileName(name string) string {
	switch name {
	case cPatrdb:
		return "patrdb.db"
	case cPatrdbEnc:
		return "patrdb-enc.db"
	case cBolt:
		return "rawbolt.db"
	case cSQLite:
		return "sqlite.db"
	case cJSONL:
		return "dump.jsonl"
	case cBoltInside:
		return "rawbolt-inside.db"
	case cSameInside:
		return "rawbolt-same-inside.db"
	case cSameAhead:
		return "rawbolt-same-ahead.db"
	case cFloor:
		return "floor.bin"
	}
	return "unknown"
}

// appendResult is one contender's run of the append workload.
type appendResult struct {
	Seconds   float64 `json:"seconds"` // time inside apply, summed over transactions
	Commit    float64 `json:"commit"`  // of which bbolt's commit: spill and page writes (bbolt-backed contenders)
	Slowest   float64 `json:"slowest"` // the longest single transaction, seconds
	Txns      int     `json:"txns"`
	Turns     int     `json:"turns"`
	TurnBytes int64   `json:"turn_bytes"`
	Trees     int     `json:"trees"`
	Disk      int64   `json:"disk"`     // bytes its files occupy on disk after close (allocated blocks)
	Apparent  int64   `json:"apparent"` // their apparent size (bbolt's file has a sparse, never-written tail)
}

// add pools two runs of the same contender: their times, work and
// bytes on disk summed, so every rate and every figure per tree or per
// byte stays as it was; Slowest is the slower of the two.
func (r appendResult) add(o appendResult) appendResult {
	return appendResult{
		Seconds: r.Seconds + o.Seconds, Commit: r.Commit + o.Commit, Slowest: max(r.Slowest, o.Slowest),
		Txns: r.Txns + o.Txns, Turns: r.Turns + o.Turns, TurnBytes: r.TurnBytes + o.TurnBytes, Trees: r.Trees + o.Trees,
		Disk: r.Disk + o.Disk, Apparent: r.Apparent + o.Apparent,
	}
}

func (r appendResult) turnsPerSec() float64 { return float64(r.Turns) / r.Seconds }
func (r appendResult) mbPerSec() float64    { return float64(r.TurnBytes) / 1e6 / r.Seconds }
func (r appendResult) diskPerTree() float64 { return float64(r.Disk) / float64(r.Trees) }

// runAppend pushes every batch through c alone; see runAppendAll.
func runAppend(c contender, path string, batches []workload.Batch) (appendResult, error) {
	res, err := runAppendAll([]contender{c}, []string{path}, batches, 0, collectEachTxn)
	if err != nil {
		return appendResult{}, err
	}
	return res[0], nil
}

// runAppendAll pushes every batch through every contender, one transaction
// per interval of a batch, interleaved: transaction i goes through each
// contender in turn (the order rotating from one transaction to the next,
// starting at rotation) before transaction i+1, so a burst of load from
// elsewhere on the machine falls on all of them alike. Each transaction's
// turns are copied into fresh memory first (a trainer's turns arrive that
// way) and, with collectEachTxn, the heap is collected, so every
// contender starts each transaction from the same state; only apply is
// timed. With collectRep the heap is collected once, before the first
// transaction, and the collector is off until the last: no collection
// lands in a timed transaction either, and none empties the caches
// between two (-collect rep, a diagnostic).
func runAppendAll(cs []contender, paths []string, batches []workload.Batch, rotation int, collect collectMode) (res []appendResult, err error) {
	if collect == collectRep {
		runtime.GC()
		defer debug.SetGCPercent(debug.SetGCPercent(-1))
	}
	res = make([]appendResult, len(cs))
	elapsed := make([]time.Duration, len(cs))
	opened := 0
	defer func() { // on an error; close is a no-op on a closed contender
		for _, c := range cs[:opened] {
			_ = c.close()
		}
	}()
	for i, c := range cs {
		if err := c.open(paths[i]); err != nil {
			return nil, fmt.Errorf("%s: open: %w", c.name(), err)
		}
		opened++
	}
	order := make([]int, len(cs))
	for i := range order {
		order[i] = i
	}
	step := rotation
	for _, b := range batches {
		for ti, txn := range b.Txns {
			for _, k := range rotateInts(order, step) {
				c := cs[k]
				p, err := c.prepare(workload.Materialize(txn))
				if err != nil {
					return nil, fmt.Errorf("%s: prepare batch %d txn %d: %w", c.name(), b.Index, ti, err)
				}
				if collect == collectEachTxn {
					runtime.GC()
				}
				var db *bolt.DB
				if bb, ok := c.(boltBacked); ok {
					db = bb.boltDB()
				}
				var c0 time.Duration
				if db != nil {
					c0 = boltCommitTime(db)
				}
				t0 := time.Now()
				err = c.apply(p)
				el := time.Since(t0)
				elapsed[k] += el
				if db != nil {
					res[k].Commit += (boltCommitTime(db) - c0).Seconds()
				}
				res[k].Slowest = max(res[k].Slowest, el.Seconds())
				if err != nil {
					return nil, fmt.Errorf("%s: batch %d txn %d: %w", c.name(), b.Index, ti, err)
				}
				res[k].Txns++
			}
			step++
		}
	}
	for _, c := range cs {
		if err := c.close(); err != nil {
			return nil, fmt.Errorf("%s: close: %w", c.name(), err)
		}
	}
	for k, c := range cs {
		for _, b := range batches {
			res[k].Trees += b.Stats.Trees
			res[k].Turns += b.Stats.Turns
			res[k].TurnBytes += b.Stats.TurnBytes
		}
		res[k].Seconds = elapsed[k].Seconds()
		for _, f := range c.files() {
			if st, err := os.Stat(f); err == nil {
				res[k].Disk += allocatedBytes(st)
				res[k].Apparent += st.Size()
			}
		}
	}
	return res, nil
}

func rotateInts(xs []int, by int) []int {
	k := by % len(xs)
	return append(append([]int(nil), xs[k:]...), xs[:k]...)
}

// removeStore deletes path and the side files a contender may leave.
func removeStore(path string) error {
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// collectMode is when runAppendAll collects the heap (-collect).
type collectMode string

const (
	collectEachTxn collectMode = "txn" // before every contender's every transaction
	collectRep     collectMode = "rep" // once, the collector off while the contenders run
)
