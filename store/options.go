package store

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime"
	"strconv"
	"time"
)

// maxMmapSize is the most a mapping can span: bbolt's own limit on 64-bit
// platforms (256 TiB), what an int holds on 32-bit ones.
const maxMmapSize = min(1<<48-1, math.MaxInt)

// Options configure Open. A zero field means its default (EnsureDefaults),
// so &Options{ReadOnly: true} opens like DefaultOptions with ReadOnly set;
// the features a zero would otherwise switch off are switched off with a
// negative value (WaitForever, NoCache, MapOnDemand).
type Options struct {
	// Timeout is how long Open waits for another process to release the
	// file lock before failing with ErrTimeout. Zero means the default (1s);
	// a negative value (WaitForever) waits for as long as it takes.
	Timeout time.Duration

	// ReadOnly opens the file with a shared lock; write transactions fail
	// with ErrReadOnly and the file's bytes never change.
	ReadOnly bool

	// NoSync skips every fsync: at commit, and where bbolt would flush the
	// file after growing it. A committed transaction then survives a
	// process crash (the page cache keeps it) but not a power loss. Only for
	// tests and throwaway runs.
	NoSync bool

	// MaxSize caps the file size in bytes; a write transaction that would
	// grow the file past it fails with ErrFull and rolls back. Zero means
	// no cap.
	MaxSize int64

	// CacheNodes is the capacity of the LRU of decoded node records that
	// serves trajectory materialisation and point reads. Zero means the
	// default (16384); a negative value (NoCache) disables it.
	CacheNodes int

	// PageSize is the page size used when the file is created (zero: the
	// default, 4 KiB); ignored for an existing file. 4 KiB wastes least:
	// turns are appended at the end of their bucket, so pages fill
	// whatever the record size, and a turn larger than a page rounds up to
	// whole pages. Measured on ~10 KB turns (bench/RESULTS.md): 4 KiB
	// pages take 1.15x the turns' payload on disk, 8 KiB 1.28x, 16 KiB
	// 1.61x, 32 KiB 1.26x, 64 KiB 1.21x.
	PageSize int

	// InitialMmapSize is how much of the file bbolt maps when it opens it
	// for writing, in bytes. While the file fits in the mapping, a commit
	// that grows it does not remap; a remap inside a write transaction
	// first copies every key and value the transaction has written out of
	// the old mapping (measured: 40% of an append run's CPU with 46 MB
	// transactions), and waits for every reader to finish. Mapping costs
	// address space only: pages are read in as they are touched, and the
	// file still grows as data is written (except on Windows, where bbolt
	// sizes the file to the mapping, so the default there is 0). Beyond
	// the mapping bbolt remaps by doubling, then in 1 GiB steps. Zero means
	// the default; a negative value (MapOnDemand) maps the file as it
	// grows, as does a MaxSize below InitialMmapSize + 16 MiB (so that the
	// cap holds exactly). Ignored when ReadOnly.
	InitialMmapSize int64

	// Logger receives open, migration and check messages. Nil discards them.
	Logger *slog.Logger

	// Clock stamps events. Nil means time.Now. Tests pass a fixed clock to
	// make files byte-reproducible.
	Clock func() time.Time

	// FileMode is the permission of a newly created file (zero: 0600).
	FileMode os.FileMode
}

// The negative values that switch off what a zero field would default.
const (
	WaitForever time.Duration = -1 // Timeout: wait for the lock forever
	NoCache                   = -1 // CacheNodes: no node cache
	MapOnDemand int64         = -1 // InitialMmapSize: map the file as it grows
)

// EnsureDefaults returns a copy of o with every zero field that has a
// default set to it; nil gives DefaultOptions. Open applies it, so callers
// need not.
func (o *Options) EnsureDefaults() *Options {
	d := DefaultOptions()
	if o == nil {
		return d
	}
	c := *o
	if c.Timeout == 0 {
		c.Timeout = d.Timeout
	}
	if c.CacheNodes == 0 {
		c.CacheNodes = d.CacheNodes
	}
	if c.PageSize == 0 {
		c.PageSize = d.PageSize
	}
	if c.InitialMmapSize == 0 {
		c.InitialMmapSize = d.InitialMmapSize
	}
	if c.FileMode == 0 {
		c.FileMode = d.FileMode
	}
	return &c
}

// DefaultOptions returns the options used when Open is given nil.
func DefaultOptions() *Options {
	return &Options{
		Timeout:    time.Second,
		CacheNodes: 16384,
		PageSize:   4 * 1024,
		FileMode:   0o600,

		InitialMmapSize: defaultInitialMmapSize(),
	}
}

// defaultInitialMmapSize is 1 GiB where address space is plentiful and
// mapping does not allocate the file: 64-bit platforms other than Windows.
func defaultInitialMmapSize() int64 {
	if strconv.IntSize < 64 || runtime.GOOS == "windows" {
		return 0
	}
	return 1 << 30
}

// Validate reports the first option that makes no sense.
func (o *Options) Validate() error {
	switch {
	case o.MaxSize < 0:
		return invalidf("options: MaxSize %d is negative", o.MaxSize)
	case o.PageSize != 0 && (o.PageSize < 1024 || o.PageSize > 1<<20 || o.PageSize&(o.PageSize-1) != 0):
		return invalidf("options: PageSize %d must be a power of two between 1 KiB and 1 MiB", o.PageSize)
	case o.InitialMmapSize > maxMmapSize:
		return invalidf("options: InitialMmapSize %d exceeds the %d bytes this platform can map", o.InitialMmapSize, int64(maxMmapSize))
	}
	return nil
}

func (o *Options) logger() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func (o *Options) now() time.Time {
	if o.Clock != nil {
		return o.Clock()
	}
	return time.Now()
}

func (o *Options) String() string {
	return fmt.Sprintf("{Timeout:%v ReadOnly:%t NoSync:%t MaxSize:%d CacheNodes:%d PageSize:%d InitialMmapSize:%d}",
		o.Timeout, o.ReadOnly, o.NoSync, o.MaxSize, o.CacheNodes, o.PageSize, o.InitialMmapSize)
}
