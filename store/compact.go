package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// CompactOptions configure Compact. The zero value is usable.
type CompactOptions struct {
	// TxMaxBytes bounds the keys and values each write transaction of the
	// copy holds, so compacting a large file does not keep all of it in
	// dirty pages at once. Zero means 64 MiB.
	TxMaxBytes int64
	// FileMode is the new file's permission; zero means 0600.
	FileMode os.FileMode
	// OnProgress, when not nil, is called as the copy advances with the
	// bytes of keys and values copied so far and an estimate of the total
	// (the source file's size, which counts free and partly filled pages
	// too); the last call has done == total.
	OnProgress func(done, total int64)
	// Context, when not nil, stops the copy once done: it ends at its next
	// key with the context's error, and dst is removed.
	Context context.Context
}

// DefaultCompactTxMax is CompactOptions.TxMaxBytes' default.
const DefaultCompactTxMax = 64 << 20

// Compact writes a packed copy of src (every bucket, key and sequence, pages
// filled full, src's page size) into a new file at dst, then checks that the
// copy opens as a patrdb file holding the same runs. dst must not exist
// (ErrExists); src is only read. src's pages are verified first
// (Check with CheckOptions.Parts CheckPages), since copying follows every page without bounds checks;
// a damaged src is ErrCorrupt and dst is not created. On any error a
// partly written dst is removed.
func Compact(src *DB, dst string, opts *CompactOptions) (err error) {
	var o CompactOptions
	if opts != nil {
		o = *opts
	}
	if o.TxMaxBytes == 0 {
		o.TxMaxBytes = DefaultCompactTxMax
	}
	if o.FileMode == 0 {
		o.FileMode = 0o600
	}
	if o.TxMaxBytes < 0 {
		return invalidf("compact: TxMaxBytes %d is negative", o.TxMaxBytes)
	}
	if _, err := os.Lstat(dst); err == nil {
		return existsf("compact: %s exists", dst)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := src.View(func(tx *Tx) error { return tx.walkParts("", CheckPages) }); err != nil {
		return err
	}
	// O_EXCL: a file that appeared at dst since the check is never written.
	f, err := os.OpenFile(dst, os.O_RDWR|os.O_CREATE|os.O_EXCL, o.FileMode)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return existsf("compact: %s exists", dst)
		}
		return err
	}
	f.Close()
	defer func() {
		if err != nil {
			os.Remove(dst)
		}
	}()
	out, err := bolt.Open(dst, o.FileMode, &bolt.Options{
		Timeout: max(src.opts.Timeout, 0), PageSize: src.bolt.Info().PageSize, FreelistType: bolt.FreelistMapType,
	})
	if err != nil {
		return fmt.Errorf("compact: create %s: %w", dst, err)
	}
	var total int64
	if fi, err := os.Stat(src.path); err == nil {
		total = fi.Size()
	}
	ctx := o.Context
	if ctx == nil {
		ctx = context.Background()
	}
	err = copyBolt(ctx, out, src.bolt, o.TxMaxBytes, func(done int64) {
		if o.OnProgress != nil {
			o.OnProgress(min(done, total), total)
		}
	})
	// bbolt grows a file past its data (up to 16 MiB); the copy needs
	// only its pages, so it is cut to them and is never larger than they.
	var used int64
	if err == nil {
		err = out.View(func(tx *bolt.Tx) error { used = tx.Size(); return nil })
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Truncate(dst, used)
	}
	if err != nil {
		return fmt.Errorf("compact into %s: %w", dst, err)
	}
	if err := sameRuns(src, dst); err != nil {
		return err
	}
	if o.OnProgress != nil {
		o.OnProgress(total, total)
	}
	return nil
}

// copyBolt is bbolt's Compact with a progress report: it walks src's
// buckets in key order and writes them into dst with FillPercent 1,
// committing whenever a transaction would pass txMax bytes. It stops with
// ctx's error once ctx is done.
func copyBolt(ctx context.Context, dst, src *bolt.DB, txMax int64, progress func(done int64)) error {
	tx, err := dst.Begin(true)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	var size, done int64
	// bucket reopens the bucket at path in the current transaction (the
	// transaction changes at every intermediate commit).
	bucket := func(path [][]byte) *bolt.Bucket {
		b := tx.Bucket(path[0])
		for _, k := range path[1:] {
			b = b.Bucket(k)
		}
		return b
	}
	var walk func(path [][]byte, b *bolt.Bucket) error
	walk = func(path [][]byte, b *bolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			sz := int64(len(k) + len(v))
			if size+sz > txMax && size > 0 {
				if err := tx.Commit(); err != nil {
					return err
				}
				if tx, err = dst.Begin(true); err != nil {
					return err
				}
				size = 0
			}
			size += sz
			done += sz
			progress(done)
			parent := bucket(path)
			parent.FillPercent = 1.0
			if v != nil {
				return parent.Put(k, v)
			}
			child := b.Bucket(k)
			nb, err := parent.CreateBucket(k)
			if err != nil {
				return err
			}
			if err := nb.SetSequence(child.Sequence()); err != nil {
				return err
			}
			return walk(append(slices.Clip(path), k), child)
		})
	}
	err = src.View(func(stx *bolt.Tx) error {
		return stx.ForEach(func(name []byte, b *bolt.Bucket) error {
			nb, err := tx.CreateBucket(name)
			if err != nil {
				return err
			}
			if err := nb.SetSequence(b.Sequence()); err != nil {
				return err
			}
			return walk([][]byte{name}, b)
		})
	})
	if err != nil {
		return err
	}
	return tx.Commit()
}

// sameRuns opens the copy at path as a patrdb file and checks that it holds
// the runs src holds.
func sameRuns(src *DB, path string) error {
	var want []string
	if err := src.View(func(tx *Tx) (err error) { want, err = tx.RunIDs(); return err }); err != nil {
		return err
	}
	cp, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("compact: the copy does not open: %w", err)
	}
	defer cp.Close()
	var got []string
	if err := cp.View(func(tx *Tx) (err error) { got, err = tx.RunIDs(); return err }); err != nil {
		return err
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("%w: compact: the copy holds runs %v, the source %v", ErrCorrupt, got, want)
	}
	return nil
}
