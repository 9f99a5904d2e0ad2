package export

import (
	"fmt"

	"github.com/parquet-go/parquet-go"
)

// pqTable is one table's current file: one per step, <name>.parquet in
// the step's folder of the run.
type pqTable[T any] struct {
	name    string
	rgRows  int64 // rows per row group: bounds the writer's memory
	tf      *tableFile
	w       *parquet.GenericWriter[T]
	pending []T
}

func (t *pqTable[T]) at(dir string, step uint64, files *[]ExportFile) error {
	if t.tf != nil && t.tf.step == step {
		return nil
	}
	if err := t.close(files); err != nil {
		return err
	}
	tf, err := createTable(dir, step, t.name+".parquet")
	if err != nil {
		return err
	}
	t.tf = tf
	t.w = parquet.NewGenericWriter[T](tf.f, parquet.Compression(&parquet.Zstd), parquet.MaxRowsPerRowGroup(t.rgRows),
		parquet.CreatedBy("patrdb", "", ""))
	return nil
}

func (t *pqTable[T]) write(rows ...T) error {
	t.pending = append(t.pending, rows...)
	if len(t.pending) < 256 {
		return nil
	}
	return t.flushPending()
}

func (t *pqTable[T]) flushPending() error {
	if len(t.pending) == 0 {
		return nil
	}
	if _, err := t.w.Write(t.pending); err != nil {
		return fmt.Errorf("export %s: %w", t.name, err)
	}
	t.tf.rows += int64(len(t.pending))
	clear(t.pending)
	t.pending = t.pending[:0]
	return nil
}

func (t *pqTable[T]) close(files *[]ExportFile) error {
	if t.tf == nil {
		return nil
	}
	tf := t.tf
	err := t.flushPending()
	if err == nil {
		err = t.w.Close()
	}
	t.tf, t.w = nil, nil
	if err != nil {
		_ = tf.f.Close()
		return fmt.Errorf("export %s: %w", t.name, err)
	}
	ef, err := tf.finish(t.name)
	if err != nil {
		return err
	}
	*files = append(*files, ef)
	return nil
}

func (t *pqTable[T]) abort() {
	if t.tf != nil {
		_ = t.tf.f.Close()
		t.tf, t.w, t.pending = nil, nil, nil
	}
}
