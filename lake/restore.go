package lake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// RestoreOptions configure Restore.
type RestoreOptions struct {
	// As is the run's id in the file; "" is its name in the lake.
	As string
	// OnProgress, when not nil, is called with the files read so far and
	// how many there are.
	OnProgress func(done, total int64)
}

// RestoreResult says what Restore rebuilt.
type RestoreResult struct {
	Run      string `json:"run"`  // the run's id in the file
	From     string `json:"from"` // its name in the lake
	Lake     string `json:"lake"`
	LastStep uint64 `json:"last_step"` // the last checkpointed step: a trainer resumes after it
	Through  uint64 `json:"through"`   // the last step restored
	Events   int    `json:"events"`
	Turns    int    `json:"turns"`
	Files    int    `json:"files"`
}

// Restore rebuilds run name of the lake in db (store.DB.LoadRun): every
// record as the lake's event log left it up to its last exported event
// (the run, its groups, nodes, advantages, rubrics with their usage
// statistics, checkpoints and config), with the turns from the turns table,
// then checks it. A trainer resumes it from its last exported checkpoint:
// losing the file costs at most the steps not exported yet. db must not
// hold a run under the restored id (model.ErrExists); on any error nothing
// of the run is left in it.
func (l *Lake) Restore(ctx context.Context, db *store.DB, name string, opts RestoreOptions) (*RestoreResult, error) {
	m, err := l.Manifest(ctx, name)
	if err != nil {
		return nil, err
	}
	if m.Replacing {
		return nil, fmt.Errorf("%w: run %s in %s is being replaced: export it again first", ErrNoRun, name, l)
	}
	id := opts.As
	if id == "" {
		id = name
	}
	lastSeq, lastStep := m.Seq, m.Step
	if m.Tail != nil {
		lastSeq, lastStep = m.Tail.Seq, m.Tail.Step
	}
	events, err := l.partitions(ctx, "events", name, lastStep)
	if err != nil {
		return nil, err
	}
	turns, err := l.partitions(ctx, "turns", name, lastStep)
	if err != nil {
		return nil, err
	}
	res := &RestoreResult{Run: id, From: name, Lake: l.String(), Through: lastStep}
	total := int64(len(events) + len(turns))
	progress := func() {
		res.Files++
		if opts.OnProgress != nil {
			opts.OnProgress(int64(res.Files), total)
		}
	}
	ld, err := db.LoadRun(id)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			_ = ld.Abort()
		}
	}()
	for _, key := range events {
		err := readRows(ctx, l, key, func(row EventRow) error {
			if uint64(row.Seq) > lastSeq {
				return nil // a tail the run has since rewritten
			}
			res.Events++
			return ld.Event(model.Event{Seq: uint64(row.Seq), Time: row.CreatedAt, Kind: model.EventKind(row.Kind),
				Step: uint64(row.EventStep), Group: uint64(row.Group), Node: uint64(row.Node), Rubric: uint64(row.Rubric),
				Payload: row.Payload})
		})
		if err != nil {
			return nil, fmt.Errorf("restoring from %s: %w", key, err)
		}
		progress()
	}
	if uint64(res.Events) == 0 {
		return nil, fmt.Errorf("%w: %s holds no events of run %s", ErrNoRun, l, name)
	}
	for _, key := range turns {
		err := readRows(ctx, l, key, func(row TurnRow) error {
			res.Turns++
			return ld.Turn(uint64(row.Node), int(row.Index), model.Turn{Action: row.Action,
				ActionTokens: uint32s(row.ActionTokens), ActionLogprobs: nilIfEmpty(row.ActionLogprobs),
				Observation: row.Observation, ObservationTokens: uint32s(row.ObservationTokens),
				Reward: row.Reward, Done: row.Done, PolicyVersion: uint64(row.PolicyVersion)})
		})
		if err != nil {
			return nil, fmt.Errorf("restoring from %s: %w", key, err)
		}
		progress()
	}
	if err := ld.Finish(); err != nil {
		return nil, err
	}
	ok = true
	err = db.ViewRun(id, func(r *store.RunTx) error {
		info, err := r.Info()
		res.LastStep = info.LastStep
		return err
	})
	return res, err
}

// partitions lists the files of a table of run name up to step through,
// in step order, then part order.
func (l *Lake) partitions(ctx context.Context, table, name string, through uint64) ([]string, error) {
	keys, err := l.obj.list(ctx, table+"/run="+name+"/")
	if err != nil {
		return nil, err
	}
	type file struct {
		step uint64
		key  string
	}
	var files []file
	for _, k := range keys {
		rest := strings.TrimPrefix(k, table+"/run="+name+"/step=")
		s, part, found := strings.Cut(rest, "/")
		step, err := strconv.ParseUint(s, 10, 64)
		if !found || err != nil || !strings.HasSuffix(part, ".parquet") || strings.Contains(part, "/") {
			continue // not a file of the layout (another tool's marker)
		}
		if step <= through {
			files = append(files, file{step, k})
		}
	}
	sort.Slice(files, func(i, j int) bool {
		if files[i].step != files[j].step {
			return files[i].step < files[j].step
		}
		return files[i].key < files[j].key
	})
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.key
	}
	return out, nil
}

// readRows calls fn with every row of one Parquet file of the lake.
func readRows[T any](ctx context.Context, l *Lake, key string, fn func(T) error) error {
	o, err := l.obj.open(ctx, key)
	if err != nil {
		return err
	}
	defer o.Close()
	pf, err := parquet.OpenFile(o, o.size())
	if err != nil {
		return fmt.Errorf("%w: %v", store.ErrCorrupt, err)
	}
	r := parquet.NewGenericReader[T](pf)
	defer r.Close()
	buf := make([]T, 64)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		clear(buf)
		n, err := r.Read(buf)
		for _, row := range buf[:n] {
			if ferr := fn(row); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %v", store.ErrCorrupt, err)
		}
	}
}

func uint32s(xs []int32) []uint32 {
	if len(xs) == 0 {
		return nil
	}
	out := make([]uint32, len(xs))
	for i, x := range xs {
		out[i] = uint32(x)
	}
	return out
}

func nilIfEmpty(xs []float32) []float32 {
	if len(xs) == 0 {
		return nil
	}
	return xs
}
