package store

import (
	"bytes"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// FormatVersion is the on-disk format this build writes.
//
// Format 2 appended fields to three records — a turn's policy version, a
// node's error, a group's prompt token ids. Format 3 changed where turns
// live: they are keyed by a per-run sequence in the order they were
// appended (seq|node), and a node lists its own turns as ranges of that
// sequence, so every hot bucket grows at its end (doc.go). Older formats
// open and read as they are; writing to one is ErrNeedsMigration, and
// Migrate copies it into a new file of this format. Format 4 appended the
// run's current policy version and how far its old steps were dropped
// (DropSteps) to the run record, and the runs' reply indexes (reply.go),
// which a run lacking one builds from its log when a write first needs it;
// a format-3 file reads as it is, and its first write transaction upgrades
// it in place (the meta format number, in that same transaction): opening
// a file never writes. Format 5 added a run's scalars bucket (the
// trainer's figures of each step, scalars.go) and its event kind; a
// format-3 or 4 file upgrades the same way, since none of its records
// changed. An older build refuses a format-5 file rather than drop,
// restore or check a run without the records it does not know.
const FormatVersion = 5

// readableFormats are the older formats this build reads (not writes).
var readableFormats = map[uint64]bool{1: true, 2: true, 3: true, 4: true}

// upgradableFormats are the older formats whose records this build writes
// as they are: a write transaction only moves their meta format number on.
var upgradableFormats = map[uint64]bool{3: true, 4: true}

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

// initFormat creates the meta bucket in a new file and checks it in an
// existing one. It writes nothing unless the file is new, so a refused or
// older file keeps its bytes.
func (db *DB) initFormat() error {
	var format uint64 = FormatVersion
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
	db.format.Store(format)
	switch {
	case fresh && db.opts.ReadOnly:
		// A bbolt file with no bucket at all: a writer's first open was
		// cut short between bbolt's pages and patrdb's meta bucket (a
		// 16 KiB file). A writer takes it as new; so does a reader: it
		// holds no runs.
		db.fresh = true
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
	case format < FormatVersion && !readableFormats[format]:
		return fmt.Errorf("%w: %s has format %d, which this build no longer reads", ErrVersionMismatch, db.path, format)
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
