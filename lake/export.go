package lake

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay/export"

	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/store"
)

// ExportOptions configure Export. The zero value exports the run under its
// own id.
type ExportOptions struct {
	// As is the run's name in the lake; "" is its id in the file.
	As string
	// Replace replaces whatever the lake holds under the name, all of it,
	// instead of refusing another run's data (ErrConflict).
	Replace bool
	// Verify checks the whole run before it is read (store's Check with
	// CheckOptions.Run: its pages, then its records), for a file this process did not write: a damaged run
	// is refused whole rather than exported in part.
	Verify bool
	// OnProgress, when not nil, is called with the files published so far
	// and how many there are: first (0, n) once every file is written
	// into the staging folder, then after each.
	OnProgress func(done, total int64)
}

// ExportResult says what an export added.
type ExportResult struct {
	Run    string          `json:"run"`    // the run's name in the lake
	Source Source          `json:"source"` // the file's run
	Status model.RunStatus `json:"status"` // the run's status in the file
	Lake   string          `json:"lake"`
	Files  []File          `json:"files"` // added, in the order they were published
	// Rows per table over the files added.
	Rows  map[string]int64 `json:"rows"`
	Bytes int64            `json:"bytes"`
	// Steps are the steps that got files (not the empty step 0).
	Steps []uint64 `json:"steps"`
	// Through and Seq are how far the lake holds the run now: every step up
	// to Through whole, the log up to event Seq.
	Through uint64 `json:"through"`
	Seq     uint64 `json:"seq"`
	// HeldBack are the steps with records that the run has not
	// checkpointed yet: they join once it has.
	HeldBack []uint64 `json:"held_back,omitempty"`
	// Replaced says the lake's earlier run under the name was removed.
	Replaced bool `json:"replaced,omitempty"`
	// Whole says the run is in the lake whole (it is finished or failed):
	// what follows its last checkpoint too, rewritten if it goes on.
	Whole bool `json:"whole,omitempty"`
}

// Export adds what the lake lacks of run id of db: each step once the run
// has checkpointed it (all its groups are closed then), with the part of
// the event log up to that checkpoint; a finished or failed run whole.
// It reads one snapshot (DB.View; writers go on) and writes the files
// into a local staging folder, then publishes them one by one — each
// appears whole — and last the run's manifest, which counts only what is
// all there. An export that fails or is cancelled (ctx) leaves the lake
// as a reader would find it between two exports; the next one completes
// it, writing the same files under the same names.
//
// The lake holds one run under a name: a run from another file (another
// creation time, or a copy of this file that went on differently) is
// ErrConflict unless Replace, which removes the other first, all of it.
// Two exporters of one name at once: the second is ErrBusy. An export cut
// short after it began publishing returns, with its error, the result
// so far (the files published). A file that
// dropped steps the lake lacks is ErrDropped. A finished or failed run is
// exported whole; should it go on, the next export rewrites what followed
// its last checkpoint.
func (l *Lake) Export(ctx context.Context, db *store.DB, id string, opts ExportOptions) (*ExportResult, error) {
	name := opts.As
	if name == "" {
		name = id
	}
	if !store.ValidRunID(name) {
		return nil, fmt.Errorf("%w: run name %q: want 1-128 bytes of [A-Za-z0-9._-]", ErrOptions, name)
	}
	hold, err := l.obj.lock(ctx, name)
	if err != nil {
		return nil, err
	}
	defer hold.release()
	return l.export(ctx, db, id, name, opts, hold.lost())
}

// export is Export under the lease of name.
func (l *Lake) export(ctx context.Context, db *store.DB, id, name string, opts ExportOptions, lost <-chan struct{}) (*ExportResult, error) {
	m, err := l.readManifest(ctx, name)
	if err != nil {
		return nil, err
	}
	stage, release, err := l.obj.stage()
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	defer release()

	p := plan{name: name, m: m, replace: opts.Replace}
	if err := db.View(func(tx *store.Tx) error { return p.write(ctx, tx, id, l, stage, opts) }); err != nil {
		return nil, err
	}
	if p.noop {
		p.next = *m
	}
	res := &ExportResult{Run: name, Source: p.src, Lake: l.String(), Files: []File{}, Rows: map[string]int64{},
		Through: p.next.Step, Seq: p.next.Seq, HeldBack: p.held, Replaced: p.replace, Status: p.status}
	if t := p.next.Tail; t != nil {
		res.Through, res.Seq, res.Whole = max(res.Through, p.lastStep), t.Seq, true
	}
	if p.noop {
		return res, nil
	}
	switch {
	case p.replace:
		if err := l.clear(ctx, name, p.src); err != nil {
			return nil, err
		}
	case m == nil:
		// The name is claimed before any file lands: files under a name
		// without a manifest are another writer's.
		if err := l.writeManifest(ctx, &Manifest{Run: name, Source: p.src, Status: p.status}); err != nil {
			return nil, fmt.Errorf("export: %w", err)
		}
	}
	done, total := int64(0), int64(len(p.files))
	if opts.OnProgress != nil {
		opts.OnProgress(0, total) // everything is staged; nothing is published yet
	}
	for _, f := range p.files {
		select {
		case <-lost:
			return res, &BusyError{Run: name}
		default:
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if err := l.obj.put(ctx, f.Key, f.local); err != nil {
			return res, fmt.Errorf("export: %w", err)
		}
		res.Files = append(res.Files, f)
		res.Rows[f.Table] += f.Rows
		res.Bytes += f.Bytes
		done++
		if opts.OnProgress != nil {
			opts.OnProgress(done, total)
		}
	}
	if err := l.writeManifest(ctx, &p.next); err != nil {
		return res, fmt.Errorf("export: %w", err)
	}
	steps := map[uint64]bool{}
	for _, f := range res.Files {
		if f.Step > 0 { // step 0 holds a run's empty partitions
			steps[f.Step] = true
		}
	}
	res.Steps = sortedSteps(steps)
	return res, nil
}

// clear removes everything the lake holds under name, the manifest first
// marked as replacing by src, so a replacement cut short is finished by
// the next export and never leaves the old run mixed with the new.
func (l *Lake) clear(ctx context.Context, name string, src Source) error {
	if err := l.writeManifest(ctx, &Manifest{Run: name, Source: src, Replacing: true}); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	for _, t := range Tables {
		keys, err := l.obj.list(ctx, t+"/run="+name+"/")
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		for _, k := range keys {
			if err := l.obj.remove(ctx, k); err != nil {
				return fmt.Errorf("export: removing %s: %w", k, err)
			}
		}
	}
	return nil
}

// plan is one export's decisions and output, made in one snapshot.
type plan struct {
	name     string
	m        *Manifest // the lake's, nil when none
	replace  bool
	src      Source
	status   model.RunStatus
	lastStep uint64   // the last step with records or a checkpoint
	next     Manifest // the manifest once the files are published
	files    []File
	held     []uint64
	noop     bool // nothing to publish, not even a manifest
}

// write decides what the lake lacks and writes it into stage.
func (p *plan) write(ctx context.Context, tx *store.Tx, id string, l *Lake, stage string, opts ExportOptions) error {
	if opts.Verify {
		if _, err := tx.Check(&store.CheckOptions{Run: id}); err != nil {
			return err
		}
	}
	r, err := tx.Run(id)
	if err != nil {
		return err
	}
	info, err := r.Info()
	if err != nil {
		return err
	}
	p.src, p.status = sourceOf(info), info.Status
	last := info.LastStep
	if g, err := r.LatestGroup(); err == nil {
		last = max(last, g.Step)
	} else if !errors.Is(err, model.ErrNotFound) {
		return err
	}
	p.lastStep = last
	if err := p.judge(ctx, r, info, l); err != nil || p.noop {
		return err
	}
	from := Manifest{}
	if p.m != nil && !p.replace {
		from = *p.m
	}
	if info.DroppedStep > from.Step || info.DroppedSeq > from.Seq {
		return fmt.Errorf("%w: run %q dropped steps up to %d (retention), and the lake holds it only up to step %d: export it into the lake it was exported to, or restore it from there first",
			ErrDropped, id, info.DroppedStep, from.Step)
	}
	// Settled are the checkpointed steps; a finished or failed run is
	// exported whole, what follows its last checkpoint as its tail.
	settled, whole := info.LastStep, info.Status != model.RunRunning
	p.next = Manifest{Run: p.name, Source: p.src, Step: max(from.Step, settled), Seq: from.Seq, SeqTime: from.SeqTime,
		Cursor: from.Cursor, Status: info.Status}

	s := newSink(stage, p.name)
	ok := false
	defer func() {
		if !ok {
			s.abort()
		}
	}()
	if from.Seq == 0 {
		// A run's first export gives every table a step=0 partition with
		// no rows, so a glob over a table never comes up empty (a run
		// without rubrics has no rubric rows).
		if err := s.empty(); err != nil {
			return err
		}
	}
	end := settled
	if whole {
		end = last
	}
	for step := from.Step + 1; step <= end; step++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := writeStep(r, s, step); err != nil {
			return err
		}
	}
	for step := max(end, from.Step) + 1; step <= last; step++ {
		err := r.ForEachGroup(step, func(model.Group) error { return errStop })
		if errors.Is(err, errStop) {
			p.held = append(p.held, step)
		} else if err != nil {
			return err
		}
	}
	tail, err := p.writeLog(ctx, r, s, settled, whole)
	if err != nil {
		return err
	}
	if whole {
		tail.Step = max(tail.Step, last, settled)
		p.next.Tail = &tail
	}
	if p.files, err = s.close(); err != nil {
		return err
	}
	// Step by step, each in the lake's table order: a cut-short publish
	// leaves whole steps first.
	order := map[string]int{}
	for i, t := range Tables {
		order[t] = i
	}
	sort.SliceStable(p.files, func(i, j int) bool {
		a, b := p.files[i], p.files[j]
		if a.Step != b.Step {
			return a.Step < b.Step
		}
		if order[a.Table] != order[b.Table] {
			return order[a.Table] < order[b.Table]
		}
		return a.Key < b.Key
	})
	ok = true
	return nil
}

// judge compares the lake's manifest with the file's run: another run
// under the name is a conflict (unless replacing), and a run exported
// whole and unchanged since is nothing to do.
func (p *plan) judge(ctx context.Context, r *store.RunTx, info model.Run, l *Lake) error {
	m := p.m
	if m == nil {
		if p.replace {
			return nil
		}
		// Data under the name without a manifest: another writer's.
		for _, t := range []string{"runs", "events", "nodes"} {
			keys, err := l.obj.list(ctx, t+"/run="+p.name+"/")
			if err != nil {
				return fmt.Errorf("export: %w", err)
			}
			if len(keys) > 0 {
				return &RunConflictError{Run: p.name, Want: p.src}
			}
		}
		return nil
	}
	if m.Replacing && m.Source == p.src {
		p.replace = true // a replacement cut short: finish it
		return nil
	}
	if p.replace {
		return nil
	}
	if m.Source != p.src {
		return &RunConflictError{Run: p.name, Have: m.Source, Want: p.src}
	}
	last := r.LastSeq()
	if last < m.Seq {
		return fmt.Errorf("%w: the lake holds run %s up to event %d, this file only up to event %d (an older copy?): export it under another name, or replace it",
			ErrConflict, p.name, m.Seq, last)
	}
	if m.Seq > 0 && m.Seq > info.DroppedSeq {
		var at model.Event
		err := r.Events(m.Seq, func(e model.Event) error { at = e; return errStop })
		if err != nil && !errors.Is(err, errStop) {
			return err
		}
		if at.Seq != m.Seq || at.Time != m.SeqTime {
			return fmt.Errorf("%w: the lake's run %s went on from event %d otherwise than this file (another copy of it?): export it under another name, or replace it",
				ErrConflict, p.name, m.Seq)
		}
	}
	p.noop = m.Tail != nil && m.Tail.Seq == last && m.Status == info.Status
	return nil
}

var errStop = errors.New("stop")

// writeStep writes the records of one step: its groups with their nodes,
// turns and advantages, and the checkpoint that completed it.
func writeStep(r *store.RunTx, s *sink, step uint64) error {
	err := r.ForEachGroup(step, func(g model.Group) error {
		rec, err := export.ReadGroup(r, g)
		if err != nil {
			return err
		}
		return s.group(step, g, rec.Nodes, rec.Turns, rec.Advantages)
	})
	if err != nil {
		return err
	}
	c, err := r.Checkpoint(step)
	switch {
	case errors.Is(err, model.ErrNotFound):
		return nil
	case err != nil:
		return err
	case c.Step == step:
		return s.checkpoint(c)
	}
	return nil
}

// writeLog writes the events after the manifest's: the settled steps'
// part of the log, which moves the manifest's cursor, and when whole the
// rest, returned as the tail.
func (p *plan) writeLog(ctx context.Context, r *store.RunTx, s *sink, settled uint64, whole bool) (tail Tail, err error) {
	next := &p.next
	c := next.Cursor
	var n int
	err = r.Events(next.Seq+1, func(e model.Event) error {
		de, err := replay.Decode(e) // a store kind that does not decode is corruption
		if err != nil {
			return err
		}
		run, _ := de.Record.(*model.Run)
		step := c.advance(e, run)
		if step > settled && !whole {
			return errStop // the open step's events, and all after them
		}
		if err := s.event(step, e, de); err != nil {
			return err
		}
		if step <= settled {
			next.Cursor, next.Seq, next.SeqTime = c, e.Seq, e.Time
		}
		tail = Tail{Step: max(tail.Step, step), Seq: e.Seq, SeqTime: e.Time}
		if n++; n%1024 == 0 {
			return ctx.Err()
		}
		return nil
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	if tail.Seq == 0 {
		tail = Tail{Step: next.Step, Seq: next.Seq, SeqTime: next.SeqTime}
	}
	return tail, err
}

func sortedSteps(set map[uint64]bool) []uint64 {
	out := make([]uint64, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
