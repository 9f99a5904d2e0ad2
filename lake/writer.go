package lake

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/parquet-go/parquet-go"
)

// Tables are the lake's tables, each a folder of the lake:
// <table>/run=<name>/step=<n>/part-<k>.parquet.
var Tables = []string{"runs", "groups", "checkpoints", "nodes", "turns", "advantages", "rubrics", "events", "scalars"}

// File is one file an export added to the lake.
type File struct {
	Key   string `json:"path"` // relative to the lake's root, with forward slashes
	Table string `json:"table"`
	Step  uint64 `json:"step"`
	Rows  int64  `json:"rows"`
	Bytes int64  `json:"bytes"`
	local string // the staged file, until published
}

// partitionDir is where a table's files of one step of run name go.
func partitionDir(table, name string, step uint64) string {
	return table + "/run=" + name + "/step=" + strconv.FormatUint(step, 10)
}

// table writes one table's files into the staging folder, a partition
// (one step) at a time, a new part once partRows rows are in one; steps
// come in order.
type table[T any] struct {
	name     string
	run      string
	stage    string
	rgRows   int64 // rows per row group: bounds the writer's memory
	partRows int64 // 0: one part per partition
	files    *[]File

	step    uint64
	part    int
	open    bool
	f       *os.File
	file    File
	w       *parquet.GenericWriter[T]
	pending []T
}

func newTable[T any](name, run, stage string, rgRows, partRows int64, files *[]File) table[T] {
	return table[T]{name: name, run: run, stage: stage, rgRows: rgRows, partRows: partRows, files: files}
}

// at makes step the partition the next rows go to.
func (t *table[T]) at(step uint64) error {
	if t.open && t.step == step {
		if t.partRows == 0 || t.file.Rows+int64(len(t.pending)) < t.partRows {
			return nil
		}
		t.part++ // the step goes on in another part
	} else {
		t.part = 0
	}
	if err := t.close(); err != nil {
		return err
	}
	key := fmt.Sprintf("%s/part-%05d.parquet", partitionDir(t.name, t.run, step), t.part)
	local := filepath.Join(t.stage, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(local, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	t.f, t.open, t.step = f, true, step
	t.file = File{Key: key, Table: t.name, Step: step, local: local}
	t.w = parquet.NewGenericWriter[T](f, parquet.Compression(&parquet.Zstd), parquet.MaxRowsPerRowGroup(t.rgRows),
		parquet.CreatedBy(writer, "", ""))
	return nil
}

func (t *table[T]) write(rows ...T) error {
	t.pending = append(t.pending, rows...)
	if len(t.pending) < 256 {
		return nil
	}
	return t.flush()
}

func (t *table[T]) flush() error {
	if len(t.pending) == 0 {
		return nil
	}
	if _, err := t.w.Write(t.pending); err != nil {
		return fmt.Errorf("writing %s: %w", t.name, err)
	}
	t.file.Rows += int64(len(t.pending))
	clear(t.pending)
	t.pending = t.pending[:0]
	return nil
}

// close finishes the open file: flushed, synced, closed, listed.
func (t *table[T]) close() error {
	if !t.open {
		return nil
	}
	t.open = false
	err := t.flush()
	if err == nil {
		err = t.w.Close()
	}
	if err == nil {
		err = t.f.Sync()
	}
	if fi, serr := t.f.Stat(); serr == nil {
		t.file.Bytes = fi.Size()
	} else if err == nil {
		err = serr
	}
	if cerr := t.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", t.file.Key, err)
	}
	*t.files = append(*t.files, t.file)
	return nil
}

func (t *table[T]) abort() {
	if t.open {
		_ = t.f.Close()
		t.open, t.pending = false, nil
	}
}
