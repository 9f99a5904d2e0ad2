package export

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// Format is an export format.
type Format string

const (
	// JSONL writes, per step, trajectories.jsonl (one line per leaf with its
	// whole path materialised, for tools that want flat rollouts) and
	// nodes.jsonl (one line per node with its parent and fork point).
	JSONL Format = "jsonl"
	// RL writes, per step, rl.jsonl and rl.parquet: one row per leaf of the
	// step's closed groups with its training sequence (package batch's rows
	// layout: input_ids, loss_mask, old_logprobs, advantages, positions),
	// status, reward and advantage (always floats), for offline RL tools.
	RL Format = "rl"
)

// ExportOptions configure Export.
type ExportOptions struct {
	// Out is the folder the run goes into, as Out/run=<id>/step=<n>/.
	// Required.
	Out string
	// Format is JSONL or RL. Required. (A Parquet lake is package lake's.)
	Format Format
	// Force allows a non-empty Out: only Out/run=<id> is replaced,
	// anything else in Out is left alone; without it a non-empty Out is
	// ErrOutExists.
	Force bool
	// OnProgress, when not nil, is called as work completes with the units
	// done so far and the total (groups + rubrics + events), on the
	// exporting goroutine; a caller draws a progress bar from it if it
	// wants one.
	OnProgress func(done, total int64)
}

// Validate reports an option out of range as ErrExportOptions.
func (o ExportOptions) Validate() error {
	if o.Out == "" {
		return fmt.Errorf("%w: Out is empty", ErrExportOptions)
	}
	switch o.Format {
	case JSONL, RL:
	default:
		return fmt.Errorf("%w: format %q, want %s or %s", ErrExportOptions, o.Format, JSONL, RL)
	}
	return nil
}

// ExportFile is one file an export wrote.
type ExportFile struct {
	Path  string `json:"path"` // relative to Out, with forward slashes
	Table string `json:"table"`
	Step  uint64 `json:"step"`
	Rows  int64  `json:"rows"`
	Bytes int64  `json:"bytes"`
}

// ExportResult describes a finished export.
type ExportResult struct {
	Run    string       `json:"run"`
	Format Format       `json:"format"`
	Dir    string       `json:"dir"`   // Out/run=<id>
	Files  []ExportFile `json:"files"` // the files written
	// Rows per table over all files.
	Rows  map[string]int64 `json:"rows"`
	Bytes int64            `json:"bytes"`
}

// Export writes the run under opts.Out, reading everything inside r's
// transaction (one consistent snapshot).
//
// JSONL and RL go into Hive-style folders run=<id>/step=<n>/, written into a
// temporary folder beside the target and renamed into place at the end: on
// any error, including ctx's cancellation, nothing is left behind and an
// existing export is untouched. (The Parquet lake, which follows a run as
// it grows, is package lake's.)
func Export(ctx context.Context, r *store.RunTx, opts ExportOptions) (*ExportResult, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if _, err := r.Info(); err != nil {
		return nil, err
	}
	// A damaged run is refused whole rather than exported in part: every
	// record must be intact and agree with the run's links and event log.
	if _, err := r.Tx().Check(&store.CheckOptions{Run: r.ID()}); err != nil {
		return nil, err
	}
	target := filepath.Clean(opts.Out)
	empty, err := emptyOrAbsent(target)
	if err != nil {
		return nil, err
	}
	if !empty && !opts.Force {
		return nil, fmt.Errorf("%w: %s (use force to replace run=%s inside it)", ErrOutExists, target, r.ID())
	}
	part := "run=" + r.ID()

	// Build the run's folder in a hidden temporary one on the same file
	// system (Hive readers skip names starting with "."), then rename.
	var tmp, runDir string
	if empty {
		tmp, err = os.MkdirTemp(filepath.Dir(target), "."+filepath.Base(target)+".tmp-")
		runDir = filepath.Join(tmp, part)
	} else {
		tmp, err = os.MkdirTemp(target, "."+part+".tmp-")
		runDir = tmp
	}
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	done := false
	defer func() {
		if !done {
			_ = os.RemoveAll(tmp)
		}
	}()
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp makes it private
		return nil, fmt.Errorf("export: %w", err)
	}

	ex, err := newExporter(ctx, r, opts, runDir)
	if err != nil {
		return nil, err
	}
	ex.prefix = part + "/"
	if err := ex.run(); err != nil {
		return nil, err
	}

	final := filepath.Join(target, part)
	if empty {
		// rename(2) would replace an empty folder, but os.Rename refuses
		// any existing folder; remove it (only if still empty) first.
		if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("export: %w", err)
		}
		if err := os.Rename(tmp, target); err != nil {
			return nil, fmt.Errorf("export: %w", err)
		}
	} else if err := swapDir(runDir, final); err != nil {
		return nil, err
	}
	done = true

	res := ex.result
	res.Run, res.Format, res.Dir = r.ID(), opts.Format, final
	for i := range res.Files {
		res.Bytes += res.Files[i].Bytes
	}
	return &res, nil
}

// emptyOrAbsent reports whether dir does not exist or is an empty folder.
// A file in its place is ErrOutExists.
func emptyOrAbsent(dir string) (bool, error) {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("export: %w", err)
	}
	if !fi.IsDir() {
		return false, fmt.Errorf("%w: %s is a file", ErrOutExists, dir)
	}
	f, err := os.Open(dir)
	if err != nil {
		return false, fmt.Errorf("export: %w", err)
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if err != nil && err != io.EOF {
		return false, fmt.Errorf("export: %w", err)
	}
	return len(names) == 0, nil
}

// swapDir moves src to dst, replacing an existing dst: the old one is moved
// aside first and removed only once src is in place, so an interruption
// leaves either the old or the new export under dst (plus a hidden
// leftover), never a mix.
func swapDir(src, dst string) error {
	old := ""
	if _, err := os.Lstat(dst); err == nil {
		aside, err := os.MkdirTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".old-")
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		if err := os.Remove(aside); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		if err := os.Rename(dst, aside); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		old = aside
	}
	if err := os.Rename(src, dst); err != nil {
		if old != "" {
			_ = os.Rename(old, dst)
		}
		return fmt.Errorf("export: %w", err)
	}
	if old != "" {
		_ = os.RemoveAll(old)
	}
	return nil
}

// GroupRecords are one group's records as an export writes them.
type GroupRecords struct {
	Nodes []model.Node
	// Turns are each node's own turns, read once: a table of turns takes
	// them as they are, and the leaves' paths share them.
	Turns      map[uint64][]model.Turn
	Advantages []model.Advantage
}

// ReadGroup reads group g's nodes, their own turns and its advantages.
func ReadGroup(r *store.RunTx, g model.Group) (GroupRecords, error) {
	var rec GroupRecords
	nodes, err := r.GroupNodes(g)
	if err != nil {
		return rec, err
	}
	rec.Nodes, rec.Turns = nodes, make(map[uint64][]model.Turn, len(nodes))
	for _, n := range nodes {
		if rec.Turns[n.ID], err = r.Turns(n.ID); err != nil {
			return rec, err
		}
	}
	rec.Advantages, err = r.Advantages(g.Step, g.ID)
	return rec, err
}

// exporter walks the run once and feeds a format's table writers.
type exporter struct {
	ctx    context.Context
	r      *store.RunTx
	opts   ExportOptions
	dir    string
	prefix string // put before each file's path, relative to dir, to make it relative to Out
	sink   sink
	done   int64
	total  int64
	result ExportResult
}

// sink is one format's writer. Steps arrive in order for each table;
// begin opens a table's file for a step, and the sink closes the previous
// one of that table.
type sink interface {
	group(step uint64, g model.Group, nodes []model.Node, turns map[uint64][]model.Turn, advs []model.Advantage) error
	close() ([]ExportFile, error) // flush and close every open file
	abort()                       // close files after an error
}

func newExporter(ctx context.Context, r *store.RunTx, opts ExportOptions, dir string) (*exporter, error) {
	ex := &exporter{ctx: ctx, r: r, opts: opts, dir: dir, result: ExportResult{Rows: map[string]int64{}}}
	groups := 0
	if err := r.ForEachGroup(0, func(model.Group) error { groups++; return nil }); err != nil {
		return nil, err
	}
	switch opts.Format {
	case JSONL:
		ex.sink = newJSONLSink(dir, r.ID())
	case RL:
		ex.sink = newRLSink(dir, r)
	}
	ex.total = int64(groups)
	return ex, nil
}

func (ex *exporter) progress(n int64) {
	ex.done += n
	if ex.opts.OnProgress != nil {
		ex.opts.OnProgress(ex.done, ex.total)
	}
}

func (ex *exporter) run() (err error) {
	defer func() {
		if err != nil {
			ex.sink.abort()
		}
	}()
	r := ex.r
	err = r.ForEachGroup(0, func(g model.Group) error {
		if err := ex.ctx.Err(); err != nil {
			return err
		}
		rec, err := ReadGroup(r, g)
		if err != nil {
			return err
		}
		if err := ex.sink.group(g.Step, g, rec.Nodes, rec.Turns, rec.Advantages); err != nil {
			return err
		}
		ex.progress(1)
		return nil
	})
	if err != nil {
		return err
	}
	return ex.finish()
}

func (ex *exporter) finish() error {
	if err := ex.ctx.Err(); err != nil {
		return err
	}
	files, err := ex.sink.close()
	if err != nil {
		return err
	}
	for i := range files {
		files[i].Path = ex.prefix + files[i].Path
		ex.result.Rows[files[i].Table] += files[i].Rows
	}
	ex.result.Files = files
	return nil
}

// tableFile is the file of one table for one step, written through a
// buffer; rel is its path relative to the run's folder.
type tableFile struct {
	f    *os.File
	rel  string
	step uint64
	rows int64
}

func createTable(dir string, step uint64, name string) (*tableFile, error) {
	sub := "step=" + strconv.FormatUint(step, 10)
	if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	rel := sub + "/" + name
	f, err := os.OpenFile(filepath.Join(dir, sub, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	return &tableFile{f: f, rel: rel, step: step}, nil
}

// finish syncs and closes the file and describes it.
func (t *tableFile) finish(table string) (ExportFile, error) {
	ef := ExportFile{Path: t.rel, Table: table, Step: t.step, Rows: t.rows}
	err := t.f.Sync()
	if fi, serr := t.f.Stat(); serr == nil {
		ef.Bytes = fi.Size()
	} else if err == nil {
		err = serr
	}
	if cerr := t.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return ef, fmt.Errorf("export: %w", err)
	}
	return ef, nil
}
