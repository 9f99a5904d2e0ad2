package store

import (
	"bytes"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// FormatVersion is the on-disk format this build writes. Open migrates
// older formats in one transaction and refuses newer ones.
//
// Format 2 added fields at the end of three records — a turn's policy
// version, a node's error, a group's prompt token ids — so an older build
// refuses a format-2 file instead of calling its turns damaged. The decoders
// read both shapes, so format 1 needs no rewriting: Open reads it as it is
// and writes nothing, and the first write transaction stamps the file
// format 2 (the moment it may first hold a format-2 record).
const FormatVersion = 2

// Version is the patrdb release that wrote a file, recorded in meta.
const Version = "0.1.0"

var (
	bucketMeta = []byte("meta")
	bucketRuns = []byte("runs")

	metaMagic   = []byte("magic")
	metaFormat  = []byte("format")
	metaWriter  = []byte("writer")
	magicString = []byte("patrdb\x00")
)

// migrations[v] upgrades a file from format v to v+1 inside one
// transaction. Empty: every older format is readableAsIs.
var migrations = map[uint64]func(*bolt.Tx) error{}

// readableAsIs are older formats whose records this build's decoders read
// unchanged: no migration, the version is stamped by the next write.
var readableAsIs = map[uint64]bool{1: true}

// initFormat creates the meta bucket in a new file, checks it in an existing
// one, and migrates old formats. It writes nothing unless the file is new or
// needs a migration, so a refused file keeps its bytes.
func (db *DB) initFormat() error {
	var format uint64
	var fresh bool
	err := db.bolt.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			empty := true
			_ = tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
			if !empty {
				return fmt.Errorf("%w: %s has buckets but no patrdb meta bucket", ErrNotPatrdb, db.path)
			}
			fresh = true
			return nil
		}
		if !bytes.Equal(meta.Get(metaMagic), magicString) {
			return fmt.Errorf("%w: %s: bad magic in meta bucket", ErrNotPatrdb, db.path)
		}
		v := meta.Get(metaFormat)
		if len(v) != 8 {
			return &CorruptError{Bucket: "meta", Key: metaFormat, Reason: "format version is not 8 bytes"}
		}
		format = binary.BigEndian.Uint64(v)
		return nil
	})
	if err != nil {
		return err
	}
	switch {
	case fresh && db.opts.ReadOnly:
		return fmt.Errorf("%w: %s is empty", ErrNotPatrdb, db.path)
	case fresh:
		return db.bolt.Update(func(tx *bolt.Tx) error {
			meta, err := tx.CreateBucket(bucketMeta)
			if err != nil {
				return err
			}
			if _, err := tx.CreateBucket(bucketRuns); err != nil {
				return err
			}
			return writeMeta(meta, FormatVersion)
		})
	case format > FormatVersion:
		return fmt.Errorf("%w: %s has format %d, this build reads up to %d", ErrVersionMismatch, db.path, format, FormatVersion)
	case format == 0:
		return &CorruptError{Bucket: "meta", Key: metaFormat, Reason: "format version 0"}
	case format < FormatVersion && readableAsIs[format]:
		db.stampFormat = true
		return nil
	case format < FormatVersion:
		if db.opts.ReadOnly {
			return fmt.Errorf("%w: %s has format %d and needs a migration; open it writable once", ErrVersionMismatch, db.path, format)
		}
		return db.bolt.Update(func(tx *bolt.Tx) error {
			for v := format; v < FormatVersion; v++ {
				m, ok := migrations[v]
				if !ok {
					return fmt.Errorf("%w: no migration from format %d", ErrVersionMismatch, v)
				}
				if err := m(tx); err != nil {
					return fmt.Errorf("patrdb: migrating format %d: %w", v, err)
				}
				db.log.Info("patrdb: migrated", "from", v, "to", v+1)
			}
			return writeMeta(tx.Bucket(bucketMeta), FormatVersion)
		})
	}
	return nil
}

func writeMeta(meta *bolt.Bucket, format uint64) error {
	if err := meta.Put(metaMagic, magicString); err != nil {
		return err
	}
	if err := meta.Put(metaFormat, u64key(format)); err != nil {
		return err
	}
	return meta.Put(metaWriter, []byte("patrdb "+Version))
}
