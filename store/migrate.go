package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"

	"github.com/patrdb/patrdb/model"
	bolt "go.etcd.io/bbolt"
)

// MigrateResult says what Migrate copied.
type MigrateResult struct {
	From  uint64 `json:"from_format"` // the source's format
	To    uint64 `json:"to_format"`
	Runs  int    `json:"runs"`
	Nodes int    `json:"nodes"`
	Turns int    `json:"turns"`
}

// migrateTxKeys bounds the keys one write transaction of a migration
// copies, so a large file is not held in dirty pages at once.
const migrateTxKeys = 20000

// Migrate copies the patrdb file at src into a new file at dst in the
// current format, then verifies the copy: it must check clean and read
// back every node, turn, group, advantage, rubric, checkpoint and event of
// the source. src is opened read-only and never changes; dst must not
// exist (ErrExists) and is removed again when the copy fails. opts are
// dst's options (nil: DefaultOptions; its page size applies); the source
// is opened read-only with the same Timeout.
//
// Turns are renumbered in the source's node|index order, so each node's
// own turns form one range; node and turn events are rewritten to carry
// the ranges and sequence numbers, with every other field, and every
// other record, as it was.
func Migrate(src, dst string, opts *Options) (res MigrateResult, err error) {
	return MigrateContext(context.Background(), src, dst, opts)
}

// MigrateContext is Migrate, stopped by ctx: once ctx is done the copy
// ends at its next transaction (each copies at most 20,000 keys) with
// ctx's error, and dst is removed.
func MigrateContext(ctx context.Context, src, dst string, opts *Options) (res MigrateResult, err error) {
	if opts == nil {
		opts = DefaultOptions()
	}
	if _, err := os.Lstat(dst); err == nil {
		return res, existsf("%s: migrate writes a new file and never overwrites one", dst)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return res, err
	}
	so := *opts
	so.ReadOnly = true
	from, err := Open(src, &so)
	if err != nil {
		return res, err
	}
	defer from.Close()
	res.From, res.To = from.format.Load(), FormatVersion
	if from.format.Load() == FormatVersion {
		return res, invalidf("%s is already format %d: nothing to migrate", src, FormatVersion)
	}
	do := *opts
	do.ReadOnly = false
	do.NoSync = true // one sync at the end; a failed copy is removed anyway
	to, err := Open(dst, &do)
	if err != nil {
		return res, err
	}
	defer func() {
		if cerr := to.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(dst)
		}
	}()
	var ids []string
	if err := from.View(func(tx *Tx) (err error) { ids, err = tx.RunIDs(); return err }); err != nil {
		return res, err
	}
	for _, id := range ids {
		if err := migrateRun(ctx, from, to, id, &res); err != nil {
			return res, fmt.Errorf("patrdb: migrating run %q: %w", id, err)
		}
	}
	res.Runs = len(ids)
	if err := to.bolt.Sync(); err != nil {
		return res, err
	}
	if err := verifyMigration(ctx, from, to, ids); err != nil {
		return res, fmt.Errorf("patrdb: the migrated copy differs from the source: %w", err)
	}
	return res, nil
}

// migrateRun copies one run: its turns renumbered, nodes given their
// ranges, events rewritten to match, every other bucket as it is.
func migrateRun(ctx context.Context, from, to *DB, id string, res *MigrateResult) error {
	err := to.bolt.Update(func(btx *bolt.Tx) error {
		b, err := btx.Bucket(bucketRuns).CreateBucket([]byte(id))
		if err != nil {
			return err
		}
		for _, name := range subBuckets {
			if _, err := b.CreateBucket([]byte(name)); err != nil {
				return err
			}
		}
		return from.View(func(tx *Tx) error {
			r, err := tx.Run(id)
			if err != nil {
				return err
			}
			return b.Put(keyRun, cloneBytes(r.b.Get(keyRun)))
		})
	})
	if err != nil {
		return err
	}
	// Turns first: the first sequence number of each node's turns.
	first := map[uint64]uint64{}
	var seq uint64
	err = copyBucket(ctx, from, to, id, bTurns, func(k, v []byte) ([]byte, []byte, error) {
		if len(k) != 16 {
			return nil, nil, &CorruptError{Bucket: "runs/" + id + "/" + bTurns, Key: cloneBytes(k), Reason: "key is not node|index"}
		}
		node := keyU64(k, 0)
		seq++
		if _, ok := first[node]; !ok {
			first[node] = seq
		}
		res.Turns++
		return u64key2(seq, node), v, nil
	})
	if err != nil {
		return err
	}
	ranges := func(n *model.Node) {
		n.TurnRanges = nil
		if n.Turns > 0 {
			n.TurnRanges = model.TurnRanges{{Seq: first[n.ID], Count: n.Turns}}
		}
	}
	path := "runs/" + id + "/"
	err = copyBucket(ctx, from, to, id, bNodes, func(k, v []byte) ([]byte, []byte, error) {
		var n model.Node
		if err := decodeValue(path+bNodes, k, v, &n); err != nil {
			return nil, nil, err
		}
		res.Nodes++
		ranges(&n)
		return k, encodeNode(&n), nil
	})
	if err != nil {
		return err
	}
	turns := map[uint64]int{} // each node's turn count as the log replays
	err = copyBucket(ctx, from, to, id, bEvents, func(k, v []byte) ([]byte, []byte, error) {
		var e model.Event
		if err := decodeEvent(path+bEvents, k, v, &e, nil); err != nil {
			return nil, nil, err
		}
		switch recordOf(e.Kind) {
		case recNode:
			var n model.Node
			if err := DecodePayload(e, &n); err != nil {
				return nil, nil, err
			}
			ranges(&n)
			turns[n.ID] = n.Turns
			e.Payload = encodeNode(&n)[headerLen:]
		case recTurns:
			var p model.TurnsPayload
			if err := DecodePayload(e, &p); err != nil {
				return nil, nil, err
			}
			if prev := turns[e.Node]; p.Turns > prev {
				p.Seq = first[e.Node] + uint64(prev)
			}
			turns[e.Node] = p.Turns
			e.Payload = encodeTurnsPayload(&p)[headerLen:]
		default:
			return k, v, nil
		}
		return k, encodeEvent(&e), nil
	})
	if err != nil {
		return err
	}
	for _, name := range subBuckets {
		if name == bTurns || name == bNodes || name == bEvents {
			continue
		}
		if err := copyBucket(ctx, from, to, id, name, nil); err != nil {
			return err
		}
	}
	err = to.bolt.Update(func(btx *bolt.Tx) error {
		return btx.Bucket(bucketRuns).Bucket([]byte(id)).Bucket([]byte(bTurns)).SetSequence(seq)
	})
	if err != nil {
		return err
	}
	// The run's counters, group index and reply index, which older files
	// lack, from the records and the log just copied.
	return to.Update(func(tx *Tx) error {
		r, err := tx.Run(id)
		if err != nil {
			return err
		}
		if err := r.Recount(); err != nil {
			return err
		}
		_, err = r.replyIndex()
		return err
	})
}

// copyBucket copies a run's sub-bucket from one file to the other, a
// bounded number of keys per transaction, through edit (nil: as it is),
// and then its sequence.
func copyBucket(ctx context.Context, from, to *DB, run, name string, edit func(k, v []byte) ([]byte, []byte, error)) error {
	var after []byte
	for done := false; !done; {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := from.View(func(tx *Tx) error {
			r, err := tx.Run(run)
			if err != nil {
				return err
			}
			src, err := r.bucket(name)
			if err != nil {
				return err
			}
			return to.bolt.Update(func(btx *bolt.Tx) error {
				dst := btx.Bucket(bucketRuns).Bucket([]byte(run)).Bucket([]byte(name))
				if f, ok := fillPercent[name]; ok {
					dst.FillPercent = f
				}
				c := src.Cursor()
				k, v := c.First()
				if after != nil {
					if k, v = c.Seek(after); k != nil && bytes.Equal(k, after) {
						k, v = c.Next()
					}
				}
				for n := 0; ; k, v = c.Next() {
					if k == nil {
						done = true
						return dst.SetSequence(src.Sequence())
					}
					if n == migrateTxKeys {
						return nil
					}
					nk, nv := k, v
					if edit != nil {
						if nk, nv, err = edit(k, v); err != nil {
							return err
						}
					}
					if err := dst.Put(cloneBytes(nk), cloneBytes(nv)); err != nil {
						return err
					}
					after = cloneBytes(k)
					n++
				}
			})
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// verifyMigration reads every run back from both files through the API
// and wants the same records, then a clean Check of the copy.
func verifyMigration(ctx context.Context, from, to *DB, ids []string) error {
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := from.View(func(ftx *Tx) error {
			return to.View(func(ttx *Tx) error {
				fr, err := ftx.Run(id)
				if err != nil {
					return err
				}
				tr, err := ttx.Run(id)
				if err != nil {
					return err
				}
				return sameRun(fr, tr)
			})
		})
		if err != nil {
			return err
		}
	}
	vs, err := to.Check(nil)
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return err
	}
	if len(vs) > 0 {
		return fmt.Errorf("check of the copy: %v (and %d more)", vs[0], len(vs)-1)
	}
	return nil
}

// sameRun compares two handles on the same run record by record.
func sameRun(a, b *RunTx) error {
	ai, err := a.Info()
	if err != nil {
		return err
	}
	bi, err := b.Info()
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(ai, bi) {
		return fmt.Errorf("run record")
	}
	ag, err := a.Groups(0)
	if err != nil {
		return err
	}
	bg, err := b.Groups(0)
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(ag, bg) {
		return fmt.Errorf("groups")
	}
	nodes, err := a.bucket(bNodes)
	if err != nil {
		return err
	}
	err = nodes.ForEach(func(k, _ []byte) error {
		id := keyU64(k, 0)
		an, err := a.Node(id)
		if err != nil {
			return err
		}
		bn, err := b.Node(id)
		if err != nil {
			return err
		}
		an.TurnRanges, bn.TurnRanges = nil, nil
		if !reflect.DeepEqual(an, bn) {
			return fmt.Errorf("node %d", id)
		}
		at, err := a.Turns(id)
		if err != nil {
			return err
		}
		bt, err := b.Turns(id)
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(at, bt) {
			return fmt.Errorf("turns of node %d", id)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, name := range []string{bChildren, bFrontier, bAdv, bRubrics, bCkpt} {
		if err := sameBucket(a, b, name); err != nil {
			return err
		}
	}
	if a.LastSeq() != b.LastSeq() {
		return fmt.Errorf("events: last sequence %d, copy %d", a.LastSeq(), b.LastSeq())
	}
	return nil
}

// sameBucket wants byte-equal sub-buckets.
func sameBucket(a, b *RunTx, name string) error {
	ab, err := a.bucket(name)
	if err != nil {
		return err
	}
	bb, err := b.bucket(name)
	if err != nil {
		return err
	}
	ac, bc := ab.Cursor(), bb.Cursor()
	ak, av := ac.First()
	bk, bv := bc.First()
	for ; ak != nil || bk != nil; ak, av, bk, bv = next4(ac, bc) {
		if !bytes.Equal(ak, bk) || !bytes.Equal(av, bv) {
			return fmt.Errorf("%s key %x", name, ak)
		}
	}
	if ab.Sequence() != bb.Sequence() {
		return fmt.Errorf("%s sequence", name)
	}
	return nil
}

func next4(a, b *bolt.Cursor) ([]byte, []byte, []byte, []byte) {
	ak, av := a.Next()
	bk, bv := b.Next()
	return ak, av, bk, bv
}
