package main

import (
	"errors"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/patrdb/patrdb/internal/workload"
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
		batches, steps := twoSteps(b, sz)
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

// twoSteps is a size's first two step commits (and their batches), so
// that the second lands in a store that has seen one.
func twoSteps(b testing.TB, sz matrixSize) ([]workload.Batch, [][]workload.Op) {
	gen, err := workload.NewGenerator(sz.cfg)
	if err != nil {
		b.Fatal(err)
	}
	var batches []workload.Batch
	for range 2 * matrixStep {
		batches = append(batches, gen.Next())
	}
	steps := make([][]workload.Op, 2)
	for i, bt := range batches {
		for _, t := range bt.Txns {
			steps[i/matrixStep] = append(steps[i/matrixStep], t...)
		}
	}
	return batches, steps
}

// errRollBack ends BenchmarkMatrixAPI's transactions without a commit.
var errRollBack = errors.New("roll back")

// BenchmarkMatrixAPI is patrdb's own work in a step commit of the tiny
// and ~1 KB cells, turns encoded ahead: every public API call of the
// second step, in a store holding the first, with neither the flush of
// the queued puts nor the commit (the transaction rolls back). That is
// what patrdb does that raw bbolt, putting the same bytes, does not —
// validation, node bookkeeping, counters, event encoding — and what
// decides the append targets once bbolt's commit is paid on both sides.
// It moves less with the machine's load than the matrix does, and under
// valgrind (GOGC=off GOMAXPROCS=1 valgrind --tool=cachegrind) its
// instruction count does not move at all.
//
//	go test ./bench -run '^$' -bench MatrixAPI/1kb -count 10
func BenchmarkMatrixAPI(b *testing.B) {
	for _, sz := range matrixSizes(1, true) {
		if sz.flag == "10kb" {
			continue
		}
		b.Run(sz.flag, func(b *testing.B) {
			_, steps := twoSteps(b, sz)
			p := &patrdbC{encodeAhead: true, opts: store.DefaultOptions()}
			p.opts.NoSync = true
			if err := p.open(filepath.Join(b.TempDir(), fileName(cPatrdbEnc))); err != nil {
				b.Fatal(err)
			}
			defer p.close()
			first, err := p.prepare(workload.Materialize(steps[0]))
			if err == nil {
				err = p.apply(first)
			}
			if err != nil {
				b.Fatal(err)
			}
			second, err := p.prepare(workload.Materialize(steps[1]))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := p.applyIn(second, func() error { return errRollBack }); err != errRollBack {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMatrixCommits is what the matrix times in a step commit of
// the tiny and ~1 KB cells, whole — patrdb's API calls, its flush and
// bbolt's commit, fsync off — for patrdb and for raw bbolt putting the same
// bytes, turns encoded inside the transaction and ahead of it. Every
// transaction is prepared before the loop (raw bbolt's shadow store runs
// once), so an iteration is two step commits into a fresh store and the
// opening of that store (0.3M instructions for patrdb, next to some 20M a
// ~1 KB step). Under cachegrind its instruction counts do not move with
// the machine's load, so the difference between patrdb and raw bbolt is
// exact where the matrix's ratio is noisy:
//
//	go test -c -o /tmp/bench.test ./bench
//	GODEBUG=asyncpreemptoff=1 GOGC=off GOMAXPROCS=1 valgrind --tool=cachegrind --cache-sim=no \
//	    /tmp/bench.test -test.run '^$' -test.bench 'MatrixCommits/1kb/patrdb$' -test.benchtime 13x
//
// (the same with -test.benchtime 3x, subtracted and divided by ten, is one
// iteration; without asyncpreemptoff, valgrind now and then dies on the
// runtime's preemption signals and writes no counts).
func BenchmarkMatrixCommits(b *testing.B) {
	for _, sz := range matrixSizes(1, true) {
		if sz.flag == "10kb" {
			continue
		}
		_, steps := twoSteps(b, sz)
		for _, name := range []string{cPatrdb, cSameInside, cPatrdbEnc, cSameAhead} {
			b.Run(sz.flag+"/"+name, func(b *testing.B) {
				benchCommits(b, name, steps)
			})
		}
	}
}

func benchCommits(b *testing.B, name string, txns [][]workload.Op) {
	c, err := newContender(name)
	if err != nil {
		b.Fatal(err)
	}
	// start opens the store afresh, as prepare found it.
	var start func() error
	path := filepath.Join(b.TempDir(), fileName(name))
	switch c := c.(type) {
	case *patrdbC:
		c.opts = store.DefaultOptions()
		c.opts.NoSync = true
		start = func() error {
			if err := c.close(); err != nil {
				return err
			}
			return c.open(path)
		}
	case *sameC:
		c.noSync = true
		start = c.reopen
	default:
		b.Fatalf("%s: not a matrix contender", name)
	}
	if err := c.open(path); err != nil {
		b.Fatal(err)
	}
	defer c.close()
	prepared := make([]any, len(txns))
	for i, txn := range txns {
		if prepared[i], err = c.prepare(workload.Materialize(txn)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := start(); err != nil {
			b.Fatal(err)
		}
		for _, p := range prepared {
			if err := c.apply(p); err != nil {
				b.Fatal(err)
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
