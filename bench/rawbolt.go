package main

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"hash/crc32"
	"slices"

	"github.com/vmihailenco/msgpack/v5"
	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/internal/workload"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// boltC is the engine's ceiling: bbolt Put of the bytes patrdb stores for
// the same work, encoded before the clock starts, into one bucket. The turn
// values are byte-identical to patrdb's (store.EncodeTurn) under the same
// node|index keys; each node touched by a transaction is written once with
// its record framed the way patrdb frames it. Same page size, same
// FillPercent (1.0, as patrdb's append-only buckets), same freelist type,
// same initial mapping (so neither remaps mid-run), fsync on, same
// transaction boundaries. What it leaves out is exactly
// patrdb's bookkeeping: validation, the event log, the frontier and child
// indexes, group records and rewriting a node once per mutation.
type boltC struct {
	db    *bolt.DB
	path  string
	nodes map[uint64]*model.Node // mirror of the node records, kept by prepare
	seq   uint64                 // appendOrder: the last turn number handed out

	noSync   bool // for the CPU-only go test benchmarks; the runner keeps fsync on
	pageSize int  // 0: patrdb's default

	// appendOrder keys turns by a sequence number in the order they are
	// appended (the layout that suits bbolt best: every Put lands at the
	// end of the b-tree), in a bucket of their own beside the nodes'.
	appendOrder bool
	// encodeInside leaves the turn and node values to be encoded inside
	// the timed transaction, as patrdb's AppendTurns does.
	encodeInside bool
}

var (
	rawBucket      = []byte("data")
	rawTurnsBucket = []byte("turns")
)

// kv is one Put: v, or when v is nil (encodeInside) the encoding of t or
// n; turn says it goes to the turns bucket (appendOrder).
type kv struct {
	k, v []byte
	t    *model.Turn
	n    *model.Node
	turn bool
}

// value is the bytes to Put.
func (e *kv) value() ([]byte, error) {
	switch {
	case e.v != nil:
		return e.v, nil
	case e.t != nil:
		return store.EncodeTurn(e.t)
	}
	return frame(e.n)
}

func (b *boltC) name() string {
	if b.appendOrder {
		return cBoltInside
	}
	return cBolt
}
func (b *boltC) files() []string { return []string{b.path} }

func (b *boltC) open(path string) error {
	if err := removeStore(path); err != nil {
		return err
	}
	def := store.DefaultOptions()
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		PageSize:        cmp.Or(b.pageSize, def.PageSize),
		InitialMmapSize: int(def.InitialMmapSize),
		FreelistType:    bolt.FreelistMapType,
		NoSync:          b.noSync,
	})
	if err != nil {
		return err
	}
	b.db, b.path, b.nodes, b.seq = db, path, map[uint64]*model.Node{}, 0
	return db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucket(rawTurnsBucket); err != nil {
			return err
		}
		_, err := tx.CreateBucket(rawBucket)
		return err
	})
}

func (b *boltC) prepare(txn []workload.Op) (any, error) {
	var out []kv
	touched := map[uint64]bool{}
	for i := range txn {
		op := &txn[i]
		n := b.nodes[op.Node]
		switch op.Kind {
		case workload.OpAddNode:
			n = &model.Node{ID: op.Node, Step: op.Step, Group: op.Group, Parent: op.Parent, Fork: op.Fork,
				Ordinal: op.Ordinal, Status: model.NodeActive}
			if p := b.nodes[op.Parent]; p != nil {
				n.Base, n.Depth = p.Base+op.Fork, p.Depth+1
			}
			b.nodes[op.Node] = n
		case workload.OpTurns:
			for j := range op.Turns {
				k := u64pair(op.Node, uint64(op.From+j))
				if b.appendOrder {
					b.seq++
					k = u64pair(b.seq, 0)[:8]
				}
				e := kv{k: k, t: &op.Turns[j], turn: b.appendOrder}
				if !b.encodeInside {
					v, err := e.value()
					if err != nil {
						return nil, err
					}
					e.v, e.t = v, nil
				}
				out = append(out, e)
			}
			n.Turns = max(n.Turns, op.From+len(op.Turns))
		case workload.OpStatus:
			n.Status = op.Status
		case workload.OpReward:
			n.Reward, n.HasReward = op.Value, true
		case workload.OpScore:
			n.Scores = append(n.Scores, op.Score)
		case workload.OpRoute:
			n.Decisions = append(n.Decisions, op.Decision)
			switch op.Decision.Action {
			case model.ActionExpand:
				n.Status = model.NodeExpanded
			case model.ActionPrune:
				n.Status = model.NodePruned
			}
		default:
			continue
		}
		touched[op.Node] = true
	}
	ids := make([]uint64, 0, len(touched))
	for id := range touched {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if b.encodeInside {
			n := *b.nodes[id]
			out = append(out, kv{k: u64pair(id, 0)[:8], n: &n})
		} else {
			v, err := frame(b.nodes[id])
			if err != nil {
				return nil, err
			}
			out = append(out, kv{k: u64pair(id, 0)[:8], v: v})
		}
		if b.nodes[id].Status != model.NodeActive && b.nodes[id].Status != model.NodeExpanded {
			delete(b.nodes, id) // a leaf is never written again
		}
	}
	return out, nil
}

func (b *boltC) apply(prepared any) error {
	kvs := prepared.([]kv)
	return b.db.Update(func(tx *bolt.Tx) error {
		bk, turns := tx.Bucket(rawBucket), tx.Bucket(rawTurnsBucket)
		bk.FillPercent, turns.FillPercent = 1.0, 1.0
		for _, e := range kvs {
			v, err := e.value()
			if err != nil {
				return err
			}
			dst := bk
			if e.turn {
				dst = turns
			}
			if err := dst.Put(e.k, v); err != nil {
				return err
			}
		}
		return nil
	})
}

func (b *boltC) close() error {
	if b.db == nil {
		return nil
	}
	err := b.db.Close()
	b.db = nil
	return err
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// frame encodes v the way patrdb frames a value: format byte, CRC32C of the
// payload, msgpack payload with compact integers.
func frame(v any) ([]byte, error) {
	var buf bytes.Buffer
	buf.Write([]byte{1, 0, 0, 0, 0})
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	out := buf.Bytes()
	binary.BigEndian.PutUint32(out[1:5], crc32.Checksum(out[5:], castagnoli))
	return out, nil
}

func u64pair(a, b uint64) []byte {
	k := make([]byte, 16)
	binary.BigEndian.PutUint64(k, a)
	binary.BigEndian.PutUint64(k[8:], b)
	return k
}
