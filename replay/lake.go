package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/patrdb/patrdb/store"
)

// LakeTables are the Parquet lake's tables, each a folder of the lake
// root: <table>/run=<id>/step=<n>/part-<k>.parquet.
var LakeTables = []string{"runs", "groups", "checkpoints", "nodes", "turns", "advantages", "rubrics", "events"}

// exportLake writes the run into the lake at opts.Out, adding only the
// partitions (one table's files of one step) the lake does not hold yet.
// Everything is first written into a hidden folder inside the lake, then
// compared: a partition already present with the same rows is skipped, one
// present with other rows is a conflict, and any conflict refuses the
// whole export (unless Force) before the lake is touched. Each new
// partition then moves in with one rename, so a reader never sees half a
// partition, and an export cut short leaves whole partitions that the next
// export completes. Exports into one lake compare and move one at a time
// (lake_lock.go).
func exportLake(ctx context.Context, r *store.RunTx, opts ExportOptions) (_ *ExportResult, err error) {
	run, err := r.Info()
	if err != nil {
		return nil, err
	}
	root := filepath.Clean(opts.Out)
	created, err := prepareLake(root)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil && created {
			_ = os.Remove(root) // only if still empty: the folder this export made
		}
	}()
	lakeLock, err := lockLake(ctx, root)
	if err != nil {
		return nil, err
	}
	tmp, work, err := newWorkDir(root)
	lakeLock.unlock()
	if err != nil {
		return nil, err
	}
	defer func() {
		_ = os.RemoveAll(tmp)
		work.unlock()
	}()

	ex, err := newExporter(ctx, r, opts, tmp)
	if err != nil {
		return nil, err
	}
	lake := ex.sink.(*lakeSink)
	if err := ex.run(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	// From here to the end the lake is compared and changed: one export
	// at a time.
	if lakeLock, err = lockLake(ctx, root); err != nil {
		return nil, err
	}
	defer lakeLock.unlock()
	res := ExportResult{Run: r.ID(), Format: Parquet, Dir: root, Files: []ExportFile{}, Rows: map[string]int64{}}
	settled, all := settledThrough(run, lake.lastEventStep)
	parts := partitionsOf(ex.result.Files)
	var add []*partition
	var conflicts []string
	held := map[uint64]bool{}
	for _, p := range parts {
		if !all && p.step > settled {
			held[p.step] = true
			continue
		}
		same, err := p.sameAs(tmp, root)
		switch {
		case err != nil:
			return nil, err
		case same == partSame:
			res.Skipped = append(res.Skipped, p.dir)
		case same == partDiffers && !opts.Force:
			conflicts = append(conflicts, p.dir)
		default:
			add = append(add, p)
		}
	}
	if len(conflicts) > 0 {
		return nil, &LakeConflictError{Partitions: conflicts}
	}
	for _, p := range add {
		if err := p.moveIn(tmp, root); err != nil {
			return nil, err
		}
		for _, f := range p.files {
			res.Files = append(res.Files, f)
			res.Rows[f.Table] += f.Rows
			res.Bytes += f.Bytes
		}
	}
	for s := range held {
		res.HeldBack = append(res.HeldBack, s)
	}
	sort.Slice(res.HeldBack, func(i, j int) bool { return res.HeldBack[i] < res.HeldBack[j] })
	return &res, nil
}

// LakeConflictError is ErrLakeConflict with the partitions concerned.
type LakeConflictError struct {
	Partitions []string // <table>/run=<id>/step=<n>, relative to the lake root
}

func (e *LakeConflictError) Error() string {
	return fmt.Sprintf("%v: %s (export the run under another id or into another lake, or use force to replace them)",
		ErrLakeConflict, e.List())
}

// List names the first few partitions and how many more there are.
func (e *LakeConflictError) List() string {
	if len(e.Partitions) <= 3 {
		return strings.Join(e.Partitions, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(e.Partitions[:3], ", "), len(e.Partitions)-3)
}

func (e *LakeConflictError) Unwrap() error { return ErrLakeConflict }

// settledThrough is the last step whose partitions can no longer change:
// every step of a run that is not running; for a running run the steps its
// trainer checkpointed (all their groups closed) and moved past in the log
// (later events go to a later step's partition). A step still being written
// is held back, so it enters the lake once and whole.
func settledThrough(run store.Run, lastEventStep uint64) (step uint64, all bool) {
	if run.Status != store.RunRunning {
		return 0, true
	}
	if lastEventStep == 0 {
		return 0, false // nothing settled; step 0 is held back too
	}
	return min(run.LastStep, lastEventStep-1), false
}

// prepareLake makes the lake root if needed and refuses a file in its place
// or a folder holding an export of the older run=/step= layout, which
// readers would mix with the tables.
func prepareLake(root string) (created bool, err error) {
	fi, err := os.Stat(root)
	switch {
	case err == nil && !fi.IsDir():
		return false, fmt.Errorf("%w: %s is a file", ErrOutExists, root)
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(root, 0o755); err != nil {
			return false, fmt.Errorf("export: %w", err)
		}
		return true, nil
	case err != nil:
		return false, fmt.Errorf("export: %w", err)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return false, fmt.Errorf("export: %w", err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "run=") {
			return false, fmt.Errorf("%w: %s holds %s, a run=/step= export; write the lake into another folder", ErrLakeLayout, root, e.Name())
		}
	}
	return false, nil
}

// partition is one table's files of one step of the run.
type partition struct {
	table string
	step  uint64
	dir   string // relative to the lake root, with forward slashes
	files []ExportFile
}

func partitionsOf(files []ExportFile) []*partition {
	byDir := map[string]*partition{}
	var out []*partition
	for _, f := range files {
		dir := f.Path[:strings.LastIndexByte(f.Path, '/')]
		p := byDir[dir]
		if p == nil {
			p = &partition{table: f.Table, step: f.Step, dir: dir}
			byDir[dir] = p
			out = append(out, p)
		}
		p.files = append(p.files, f)
	}
	// Steps in order, and within a step the lake's table order, so an
	// interrupted export leaves a prefix of the run.
	order := map[string]int{}
	for i, t := range LakeTables {
		order[t] = i
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].step != out[j].step {
			return out[i].step < out[j].step
		}
		return order[out[i].table] < order[out[j].table]
	})
	return out
}

type partState int

const (
	partNew partState = iota
	partSame
	partDiffers
)

// sameAs compares the partition written under tmp with the lake's: absent,
// the same files with the same rows, or different.
func (p *partition) sameAs(tmp, root string) (partState, error) {
	have := filepath.Join(root, filepath.FromSlash(p.dir))
	entries, err := os.ReadDir(have)
	if errors.Is(err, fs.ErrNotExist) {
		return partNew, nil
	}
	if err != nil {
		return 0, fmt.Errorf("export: %w", err)
	}
	parts := 0
	for _, e := range entries { // what readers read; other tools' markers (_SUCCESS, .crc) are not content
		if strings.HasPrefix(e.Name(), "part-") && strings.HasSuffix(e.Name(), ".parquet") {
			parts++
		}
	}
	if parts != len(p.files) {
		return partDiffers, nil
	}
	for _, f := range p.files {
		eq, err := sameFile(filepath.Join(tmp, filepath.FromSlash(f.Path)), filepath.Join(root, filepath.FromSlash(f.Path)))
		if err != nil || !eq {
			return partDiffers, err
		}
	}
	return partSame, nil
}

// sameFile reports whether two Parquet files hold the same rows: the same
// bytes, or, when another version of the writer encoded them otherwise,
// the same schema and row values. A missing or unreadable b is not the same.
func sameFile(a, b string) (bool, error) {
	same, err := sameBytes(a, b)
	if same || err != nil {
		return same, err
	}
	return sameRows(a, b)
}

// sameBytes reports whether two files hold the same bytes.
func sameBytes(a, b string) (bool, error) {
	fb, err := os.Open(b)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("export: %w", err)
	}
	defer fb.Close()
	fa, err := os.Open(a)
	if err != nil {
		return false, fmt.Errorf("export: %w", err)
	}
	defer fa.Close()
	sa, _ := fa.Stat()
	sb, _ := fb.Stat()
	if sa == nil || sb == nil || sa.Size() != sb.Size() {
		return false, nil
	}
	if sa.Size() == 0 {
		return true, nil
	}
	ba, bb := make([]byte, 1<<16), make([]byte, 1<<16)
	for {
		na, ea := io.ReadFull(fa, ba)
		nb, eb := io.ReadFull(fb, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false, nil
		}
		if ea == io.EOF || ea == io.ErrUnexpectedEOF {
			return eb == ea, nil
		}
		if ea != nil {
			return false, fmt.Errorf("export: %w", ea)
		}
		if eb != nil {
			return false, fmt.Errorf("export: %w", eb)
		}
	}
}

// sameRows compares two Parquet files row by row.
func sameRows(a, b string) (bool, error) {
	fa, err := openParquet(a)
	if err != nil {
		return false, fmt.Errorf("export: %w", err)
	}
	defer fa.close()
	fb, err := openParquet(b)
	if err != nil {
		return false, nil // a lake file that does not read is not the same
	}
	defer fb.close()
	if !parquet.EqualNodes(fa.Schema(), fb.Schema()) || fa.NumRows() != fb.NumRows() {
		return false, nil
	}
	ra, rb := parquet.NewReader(fa.File), parquet.NewReader(fb.File)
	defer ra.Close()
	defer rb.Close()
	bufA, bufB := make([]parquet.Row, 64), make([]parquet.Row, 64)
	for {
		na, ea := ra.ReadRows(bufA)
		nb, eb := rb.ReadRows(bufB[:na])
		if na != nb {
			return false, nil
		}
		for i := range na {
			if !bufA[i].Equal(bufB[i]) {
				return false, nil
			}
		}
		if ea == io.EOF && (eb == io.EOF || eb == nil) {
			return true, nil
		}
		if ea != nil {
			return false, fmt.Errorf("export: %w", ea)
		}
		if eb != nil && eb != io.EOF {
			return false, nil
		}
	}
}

type openedParquet struct {
	*parquet.File
	f *os.File
}

func (o openedParquet) close() { _ = o.f.Close() }

func openParquet(path string) (openedParquet, error) {
	f, err := os.Open(path)
	if err != nil {
		return openedParquet{}, err
	}
	fi, err := f.Stat()
	if err == nil {
		var pf *parquet.File
		if pf, err = parquet.OpenFile(f, fi.Size()); err == nil {
			return openedParquet{File: pf, f: f}, nil
		}
	}
	_ = f.Close()
	return openedParquet{}, err
}

// moveIn renames the partition's folder into the lake, replacing (only
// under Force, which is the one way to get here with it present) the
// lake's.
func (p *partition) moveIn(tmp, root string) error {
	dst := filepath.Join(root, filepath.FromSlash(p.dir))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return swapDir(filepath.Join(tmp, filepath.FromSlash(p.dir)), dst)
}
