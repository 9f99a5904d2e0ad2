package batchdb_test

import (
	"path/filepath"
	"testing"

	"github.com/patrdb/patrdb/batch/batchdb"
	"github.com/patrdb/patrdb/batch/internal/batchtest"

	"github.com/patrdb/patrdb/batch"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// BenchmarkReadRows reads the rows batch of an LLM-shaped step into reused
// buffers; BenchmarkMemcpy copies as many bytes as its arrays hold, the
// anchor bench/batchbench compares it with (go run ./bench/batchbench
// reports the ratio, measured side by side).
func BenchmarkReadRows(b *testing.B) {
	db, _ := benchStore(b)
	var dst batch.Batch
	read := func() {
		err := db.ViewRun("llm", func(r *store.RunTx) error {
			return batchdb.ReadInto(&dst, r, 1, batch.Options{})
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	// One read before the clock starts, as Memcpy copies once: both time
	// writes into memory already faulted in, the trainer's steady state,
	// not the first batch's page faults.
	read()
	b.ResetTimer()
	for range b.N {
		read()
	}
	b.SetBytes(arrayBytes(&dst))
}

func BenchmarkMemcpy(b *testing.B) {
	_, rows := benchStore(b)
	n := arrayBytes(rows)
	src, dst := make([]byte, n), make([]byte, n)
	// Written, as bench/batchbench writes its own: a source never written
	// may be the kernel's one zero page, read from cache, and the copy
	// then takes half the time a copy of the batch's bytes takes.
	for i := range src {
		src[i] = byte(i)
	}
	copy(dst, src)
	b.SetBytes(n)
	b.ResetTimer()
	for range b.N {
		copy(dst, src)
	}
}

func arrayBytes(b *batch.Batch) int64 {
	var n int64
	for _, t := range b.Tensors() {
		n += int64(len(t.Data))
	}
	return n
}

func benchStore(b *testing.B) (*store.DB, *batch.Batch) {
	b.Helper()
	opts := storetest.Options()
	opts.NoSync = true
	db := storetest.OpenPath(b, filepath.Join(b.TempDir(), "b.db"), opts)
	batchtest.BuildLLM(b, db, "llm", batchtest.LLMSpec{Steps: 1, Groups: 33, Roots: 4, Depth: 3, MaxTurns: 5, Tokens: 500, Seed: 3})
	rows, err := batchdb.ReadDB(db, "llm", 1, batch.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return db, rows
}
