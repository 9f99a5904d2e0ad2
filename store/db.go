package store

import (
	"errors"
	"fmt"
	"github.com/patrdb/patrdb/model"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/patrdb/patrdb/store/internal/pagewalk"
)

// DB is an open patrdb file. It is safe for concurrent use: any number of
// View transactions run alongside at most one Update.
type DB struct {
	bolt *bolt.DB
	// file is the DB's own descriptor of the file bbolt opened, for the
	// page walks of checked reads and Check: they read what bbolt maps
	// even once another file has been renamed over the path.
	file   *os.File
	path   string
	opts   Options
	log    *slog.Logger
	cache  *nodeCache
	closed atomic.Bool

	writeMu sync.Mutex    // serialises Update so the cache commit protocol sees one writer
	spare   [][]byte      // value chunks ended write transactions handed on, under writeMu (txvalues.go)
	queues  [][]queuedPut // put queues ended write transactions handed on, under writeMu (txqueue.go)
	sizes   txSizes       // of the last write transaction's per-run maps, under writeMu (tx.go)
	carry   txCarry       // what the last commit through Update left the next, under writeMu (txcarry.go)

	// format is the file's format version: older ones are read with their
	// own turn keys and refuse writes (ErrNeedsMigration).
	format atomic.Uint64

	// fresh: opened read-only, the file has no bucket at all (a writer's
	// first open stopped before the meta bucket). It reads as a new,
	// empty patrdb file.
	fresh bool

	// standIn, when not "", is the empty bbolt file a reader maps in place
	// of a zero-byte one (emptyStandIn) that could not be removed while
	// open (Windows); Close removes it.
	standIn string

	// premapped: the file was opened with an initial mapping larger than
	// itself, so Update sets bbolt's growth step (growStep).
	premapped bool
}

// boltAllocSize is bbolt's default growth step (DB.AllocSize): a file
// whose mapping exceeds it grows by its data plus this much.
const boltAllocSize = 16 << 20

// minGrowStep is the least a premapped file grows by.
const minGrowStep = 32 << 10

// growStep is how far past its data bbolt grows the file at a commit
// (bolt.DB.AllocSize), given the data's size before the commit and about
// how many bytes the commit writes. Every growth costs the commit a
// second flush (bbolt truncates the file and fsyncs it, a journal commit
// on ext4, before it writes the pages), so the file should grow seldom;
// but with an initial mapping of 1 GiB bbolt would add 16 MiB to even the
// smallest file. So a file grows by about its data (doubling) and at
// least by four times the commit (the next three commits of the same size
// then fit: with twice, a run of 2.6 MB step commits grew its file at
// every other one of its first eight, twice as often as bbolt's own 16 MiB
// steps), never by less than 32 KiB nor by more than bbolt's 16 MiB. The
// tail it adds is a hole until written: it counts in the file's apparent
// size, not in its disk use.
func growStep(dataSize, txBytes int64, pageSize int) int {
	step := max(dataSize, 4*txBytes, minGrowStep)
	step = (step + int64(pageSize) - 1) / int64(pageSize) * int64(pageSize)
	return int(min(step, boltAllocSize))
}

// Open opens or creates the patrdb file at path. A nil opts means
// DefaultOptions(), and zero fields of opts their defaults (EnsureDefaults). A file written by a newer format is refused with
// ErrVersionMismatch and left untouched; a file that is not a patrdb file is
// refused with ErrNotPatrdb.
func Open(path string, opts *Options) (*DB, error) {
	if opts == nil {
		opts = DefaultOptions()
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := *opts.EnsureDefaults()
	boltPath, standIn := path, ""
	if o.ReadOnly {
		fi, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", model.ErrNotFound, path, err)
		}
		if fi.Size() == 0 {
			if standIn, err = emptyStandIn(o.PageSize); err != nil {
				return nil, err
			}
			boltPath = standIn
		}
	}
	db, err := open(path, boltPath, o)
	// The stand-in is removed at once: bbolt and DB.file hold it open,
	// and neither opens it by name again, so a reader killed while it
	// reads leaves nothing behind. Where an open file cannot be removed
	// (Windows), Close removes it.
	if standIn != "" && (os.Remove(standIn) == nil || db == nil) {
		standIn = ""
	}
	if db != nil {
		db.standIn = standIn
	}
	return db, err
}

// emptyStandIn creates the bbolt file a reader maps in place of a
// zero-byte one, and returns its path. A zero-byte file is what a writer
// killed between creating the file and writing bbolt's first pages leaves;
// the next writer takes it as new, so every reader reads it as new and
// empty too. bbolt cannot initialise a file through a read-only
// descriptor, and a reader must not write the file, so it reads four
// empty pages of its own: a file with no bucket, which reads as fresh.
func emptyStandIn(pageSize int) (string, error) {
	f, err := os.CreateTemp("", "patrdb-empty-*.db")
	if err != nil {
		return "", fmt.Errorf("patrdb: reading an empty file: %w", err)
	}
	name := f.Name()
	err = f.Close()
	if err == nil {
		var b *bolt.DB
		if b, err = bolt.Open(name, 0o600, &bolt.Options{PageSize: pageSize}); err == nil {
			err = b.Close()
		}
	}
	if err != nil {
		os.Remove(name)
		return "", fmt.Errorf("patrdb: reading an empty file: %w", err)
	}
	return name, nil
}

// open opens the patrdb file at path, whose bbolt file is boltPath (path
// itself but for an empty file's stand-in), with o's defaults ensured.
func open(path, boltPath string, o Options) (*DB, error) {
	bopts := &bolt.Options{
		Timeout:  max(o.Timeout, 0), // bbolt's 0 waits forever
		ReadOnly: o.ReadOnly,
		NoSync:   o.NoSync,
		// bbolt fsyncs the file each time it grows it, even under NoSync;
		// NoSync means no fsync at all (Options.NoSync).
		NoGrowSync:   o.NoSync,
		PageSize:     o.PageSize,
		MaxSize:      int(o.MaxSize),
		FreelistType: bolt.FreelistMapType,
	}
	// A reader never grows the file, so it never remaps. Under a MaxSize
	// that the mapping plus one growth step could pass, bbolt's check of
	// the cap and its growth of the file disagree (it checks as if the
	// mapping followed the file), so such a file is mapped on demand.
	if !o.ReadOnly && o.InitialMmapSize > 0 && (o.MaxSize == 0 || o.MaxSize >= o.InitialMmapSize+boltAllocSize) {
		bopts.InitialMmapSize = int(o.InitialMmapSize)
	}
	if problems := pagewalk.PreOpen(boltPath, !o.ReadOnly); len(problems) > 0 {
		return nil, &CorruptError{Bucket: "(file)", Reason: strings.Join(problems, "; ")}
	}
	before, _ := os.Stat(boltPath) // nil for a file bbolt will create
	bdb, err := openBolt(boltPath, o.FileMode, bopts)
	if err != nil {
		return nil, mapOpenError(path, err)
	}
	file, err := sameFile(boltPath, before)
	if err != nil {
		_ = bdb.Close()
		return nil, err
	}
	db := &DB{bolt: bdb, file: file, path: path, opts: o, log: o.logger(), premapped: bopts.InitialMmapSize > 0}
	if db.premapped {
		// For the commit that does not go through Update (a new file's
		// meta bucket); Update sets it from then on.
		bdb.AllocSize = growStep(0, 0, bdb.Info().PageSize)
		if fi, err := os.Stat(path); err == nil {
			bdb.AllocSize = growStep(fi.Size(), 0, bdb.Info().PageSize)
		}
	}
	db.cache = newNodeCache(o.CacheNodes)
	err = guardOpen(func() error {
		// The pages Open reads next (root bucket, meta bucket) are walked
		// with bounds first, and the runs bucket's header, which every
		// reader opens; the runs are Check's business.
		onlyMeta := func(p string) pagewalk.Reach {
			switch p {
			case string(bucketMeta):
				return pagewalk.Whole
			case string(bucketRuns):
				return pagewalk.Header
			}
			return pagewalk.Skip
		}
		if _, problems := pagewalk.File(file, bdb.Info().PageSize, 0, 0, onlyMeta, false); len(problems) > 0 {
			return &CorruptError{Bucket: "(file)", Reason: strings.Join(problems, "; ")}
		}
		if err := db.initFormat(); err != nil {
			return err
		}
		return bdb.View(func(tx *bolt.Tx) error {
			db.cache.setCommitted(uint64(tx.ID()))
			return nil
		})
	})
	if err != nil {
		_ = bdb.Close()
		_ = file.Close()
		return nil, err
	}
	db.log.Debug("patrdb: opened", "path", path, "options", o.String())
	return db, nil
}

// sameFile opens path for the DB's page walks (DB.file) and makes sure it
// is the file bbolt just opened: the one that was at path before (before,
// nil when bbolt created it). bbolt keeps its descriptor to itself, so a
// file renamed over path in between would go unnoticed otherwise.
func sameFile(path string, before os.FileInfo) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("patrdb: open %s: %w", path, err)
	}
	fi, err := f.Stat()
	if err == nil && before != nil && !os.SameFile(fi, before) {
		err = fmt.Errorf("patrdb: open %s: the file was replaced while it was being opened; open it again", path)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// openBolt turns a panic or memory fault inside bbolt (a damaged meta or
// freelist page) into ErrCorrupt instead of crashing the caller.
func openBolt(path string, mode os.FileMode, bopts *bolt.Options) (bdb *bolt.DB, err error) {
	err = guardOpen(func() error {
		bdb, err = bolt.Open(path, mode, bopts)
		return err
	})
	return bdb, err
}

// guardOpen runs fn with memory faults turned into panics (bbolt reads the
// file through an mmap) and turns a panic into ErrCorrupt.
func guardOpen(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = &CorruptError{Bucket: "(file)", Reason: fmt.Sprintf("bbolt could not read the file: %v", r)}
		}
	}()
	return fn()
}

func mapOpenError(path string, err error) error {
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return fmt.Errorf("%w: %s is locked by another process", ErrTimeout, path)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrVersionMismatch):
		return fmt.Errorf("%w: %s: %v", ErrNotPatrdb, path, err)
	case errors.Is(err, berrors.ErrChecksum):
		return &CorruptError{Bucket: "(meta pages)", Reason: fmt.Sprintf("%s: %v", path, err)}
	case errors.Is(err, ErrCorrupt):
		return err
	case strings.HasPrefix(err.Error(), "file size too small"):
		// bbolt's untyped error for a file shorter than two of its pages
		// (a text file, a truncated download): no bbolt file, so no patrdb file.
		return fmt.Errorf("%w: %s: %v", ErrNotPatrdb, path, err)
	}
	return fmt.Errorf("patrdb: open %s: %w", path, err)
}

// Path returns the file's path.
func (db *DB) Path() string { return db.path }

// Options returns a copy of the options the DB was opened with.
func (db *DB) Options() Options { return db.opts }

// PageSize is the page size the file was created with.
func (db *DB) PageSize() int { return db.bolt.Info().PageSize }

// Close releases the file. Transactions must have ended.
func (db *DB) Close() error {
	if db.closed.Swap(true) {
		return nil
	}
	err := db.bolt.Close()
	if ferr := db.file.Close(); err == nil {
		err = ferr
	}
	if db.standIn != "" {
		os.Remove(db.standIn)
	}
	return err
}

// Update runs fn in a read-write transaction and commits it when fn returns
// nil. If fn returns an error, or any write method inside it failed, the
// transaction rolls back and that error is returned. When Update returns nil
// the data is on disk (unless NoSync).
func (db *DB) Update(fn func(*Tx) error) (err error) {
	if db.closed.Load() {
		return ErrClosed
	}
	if db.opts.ReadOnly {
		return ErrReadOnly
	}
	if f := db.format.Load(); f < FormatVersion && !upgradableFormats[f] {
		return fmt.Errorf("%w: %s has format %d; this build writes only format %d files", ErrNeedsMigration, db.path, f, FormatVersion)
	}
	db.writeMu.Lock()
	defer db.writeMu.Unlock()
	btx, err := db.bolt.Begin(true)
	if err != nil {
		return mapTxError(err)
	}
	upgrade := db.format.Load() != FormatVersion
	if upgrade {
		if err := writeMeta(btx.Bucket(bucketMeta), FormatVersion); err != nil {
			_ = btx.Rollback()
			return err
		}
	}
	tx := newTx(db, btx)
	tx.vals.spare = &db.spare
	committed, carried := false, false
	defer func() {
		tx.done = true
		tx.releasePaths()
		if !committed {
			_ = btx.Rollback()
		}
		if !carried {
			db.dropCarry()
		}
		tx.vals.handOn() // after Commit or Rollback, still under writeMu
		tx.handOnQueues()
		tx.handOnSizes()
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if tx.err != nil {
		return tx.err
	}
	if err := tx.flush(); err != nil {
		return err
	}
	// The id must be read before Commit: a closed bbolt Tx reports -1, which
	// would leave the cache's committed txid matching no reader, ever.
	txid := uint64(btx.ID())
	if db.premapped {
		// Read by bbolt only inside this Commit, under its writer lock.
		db.bolt.AllocSize = growStep(btx.Size(), tx.written, db.bolt.Info().PageSize)
	}
	db.cache.beginCommit(tx.runs)
	err = btx.Commit()
	committed = true
	db.cache.endCommit(txid, err == nil)
	if err != nil {
		return mapTxError(err)
	}
	tx.carryOn(txid)
	carried = true
	if upgrade {
		db.format.Store(FormatVersion)
	}
	return nil
}

// View runs fn in a read-only transaction over a consistent snapshot.
func (db *DB) View(fn func(*Tx) error) error {
	if db.closed.Load() {
		return ErrClosed
	}
	btx, err := db.bolt.Begin(false)
	if err != nil {
		return mapTxError(err)
	}
	tx := newTx(db, btx)
	defer func() {
		tx.done = true
		tx.releasePaths()
		_ = btx.Rollback()
	}()
	return fn(tx)
}

// ViewRun runs fn in a read-only transaction on run id (View, then
// Tx.Run): ErrNotFound when the file holds no such run.
func (db *DB) ViewRun(id string, fn func(*RunTx) error) error {
	return db.View(func(tx *Tx) error { return inRun(tx, id, fn) })
}

// UpdateRun runs fn in a read-write transaction on run id (Update, then
// Tx.Run) and commits it when fn returns nil.
func (db *DB) UpdateRun(id string, fn func(*RunTx) error) error {
	return db.Update(func(tx *Tx) error { return inRun(tx, id, fn) })
}

func inRun(tx *Tx, id string, fn func(*RunTx) error) error {
	r, err := tx.Run(id)
	if err != nil {
		return err
	}
	return fn(r)
}

func mapTxError(err error) error {
	switch {
	case errors.Is(err, berrors.ErrMaxSizeReached):
		return fmt.Errorf("%w: %v", ErrFull, err)
	case errors.Is(err, berrors.ErrDatabaseReadOnly):
		return ErrReadOnly
	case errors.Is(err, berrors.ErrDatabaseNotOpen):
		return ErrClosed
	}
	return err
}
