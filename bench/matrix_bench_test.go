package main

import (
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/patrdb/patrdb/bench/workload"
	"github.com/patrdb/patrdb/store"
)

// BenchmarkMatrixCPU is the append matrix's tiny and ~1 KB cells without
// fsync: the CPU a commit costs patrdb through its public API and the two
// raw bbolt anchors (patrdb's bytes, and turns and nodes only; turns
// encoded inside), for benchstat and -cpuprofile. One
// iteration writes every transaction of the cell into a fresh store; only
// apply is timed, as in the runner. cpu-ns/turn is the process's CPU time
// over the same calls (garbage collection included): on a shared machine
// it moves less with the load than the wall time does.
//
//	go test ./bench -run '^$' -bench MatrixCPU/1kb/step/patrdb -cpuprofile cpu.out
func BenchmarkMatrixCPU(b *testing.B) {
	for _, sz := range matrixSizes(1, true) {
		if sz.flag == "10kb" {
			continue
		}
		gen, err := workload.NewGenerator(sz.cfg)
		if err != nil {
			b.Fatal(err)
		}
		var batches []workload.Batch
		for range 2 * matrixStep {
			batches = append(batches, gen.Next())
		}
		// Two step commits, so the second lands in a store that has seen one.
		steps := make([][]workload.Op, 2)
		for i, bt := range batches {
			for _, t := range bt.Txns {
				steps[i/matrixStep] = append(steps[i/matrixStep], t...)
			}
		}
		commits := map[string][][]workload.Op{"round": batches[0].Txns, "step": steps}
		for _, commit := range []string{"round", "step"} {
			txns := commits[commit]
			for _, name := range []string{cPatrdb, cSameInside, cBoltInside} {
				b.Run(sz.flag+"/"+commit+"/"+name, func(b *testing.B) {
					benchTxns(b, name, txns)
				})
			}
		}
	}
}

func benchTxns(b *testing.B, name string, txns [][]workload.Op) {
	var turns int
	for _, txn := range txns {
		for _, op := range txn {
			turns += len(op.Turns)
		}
	}
	dir := b.TempDir()
	b.ReportAllocs()
	var el, cpu time.Duration
	for b.Loop() {
		c, err := newContender(name)
		if err != nil {
			b.Fatal(err)
		}
		switch c := c.(type) {
		case *patrdbC:
			c.opts = store.DefaultOptions()
			c.opts.NoSync = true
		case *boltC:
			c.noSync = true
		case *sameC:
			c.noSync = true
		}
		if err := c.open(filepath.Join(dir, fileName(name))); err != nil {
			b.Fatal(err)
		}
		for _, txn := range txns {
			p, err := c.prepare(workload.Materialize(txn))
			if err != nil {
				b.Fatal(err)
			}
			runtime.GC() // as the runner does: no contender pays for another's garbage, or its own prepare's
			t0, c0 := time.Now(), processCPU()
			err = c.apply(p)
			el += time.Since(t0)
			cpu += processCPU() - c0
			if err != nil {
				b.Fatal(err)
			}
		}
		if err := c.close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(el.Nanoseconds())/float64(b.N*turns), "ns/turn")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*turns), "cpu-ns/turn")
}
