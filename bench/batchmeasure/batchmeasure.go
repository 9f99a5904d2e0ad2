// Package batchmeasure times reading one step's training batch (package
// batch) in Go: the one measurement behind the batch rows of both `go run
// ./bench` (its Targets table) and `go run ./bench/batchbench` (its own
// section), so the two reports cannot drift apart.
package batchmeasure

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"slices"
	"time"

	"github.com/patrdb/patrdb/batch"
	"github.com/patrdb/patrdb/batch/batchdb"
	"github.com/patrdb/patrdb/client"
	"github.com/patrdb/patrdb/internal/cputime"
	"github.com/patrdb/patrdb/internal/workload"
	"github.com/patrdb/patrdb/server"
	"github.com/patrdb/patrdb/store"
)

// Run is the run id of the step's store.
const Run = "bench"

// Config is the shape of the step: swe-like trees of LLM turns.
type Config struct {
	Trees, MaxTurns, K              int
	ActionTokens, ObservationTokens int
	Seed                            uint64
}

// Default is the step both reports measure.
func Default() Config {
	return Config{Trees: 32, MaxTurns: 26, K: 4, ActionTokens: 150, ObservationTokens: 350, Seed: 1}
}

// Smoke is a step small enough for a test.
func Smoke() Config {
	return Config{Trees: 2, MaxTurns: 6, K: 2, ActionTokens: 20, ObservationTokens: 30, Seed: 1}
}

// Step is one step of the workload written into a fresh store, with its
// rows batch read once.
type Step struct {
	DB    *store.DB
	Stats workload.Stats
	Rows  *batch.Batch
	Built time.Duration // writing the store (NoSync)
}

// Build writes one step of c's workload into a new store at path and
// checks that the by-hand path reads the same tokens as the batch.
func Build(c Config, path string) (*Step, error) {
	wc := workload.SWEConfig(c.Seed)
	wc.Trees, wc.Tree.K, wc.Tree.MaxTurns = c.Trees, c.K, c.MaxTurns
	wc.ActionTokens, wc.ObservationTokens = c.ActionTokens, c.ObservationTokens
	wc.DoneHazard = 0.03
	gen, err := workload.NewGenerator(wc)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	opts := store.DefaultOptions()
	opts.NoSync = true
	db, err := store.Open(path, opts)
	if err != nil {
		return nil, err
	}
	b := gen.Next()
	err = db.Update(func(tx *store.Tx) error { _, err := tx.CreateRun(Run, nil, nil); return err })
	for _, txn := range b.Txns {
		if err != nil {
			break
		}
		err = workload.ApplyTxn(db, Run, txn)
	}
	s := &Step{DB: db, Stats: b.Stats, Built: time.Since(t0)}
	if err == nil {
		s.Rows, err = batchdb.ReadDB(db, Run, 1, batch.Options{})
	}
	if err == nil {
		err = checkByHand(db, s.Rows)
	}
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the store.
func (s *Step) Close() error { return s.DB.Close() }

// ArrayBytes is the bytes of b's arrays: what the memcpy anchor copies.
func ArrayBytes(b *batch.Batch) int64 {
	var n int64
	for _, t := range b.Tensors() {
		n += int64(len(t.Data))
	}
	return n
}

// Serve starts server.Handler on a loopback port.
func Serve(db *store.DB) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: server.Handler(db, server.Options{})}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close() }, nil
}

// Side is one of the timed ways of getting the rows batch.
type Side int

const (
	ReadInto     Side = iota // batchdb.ReadInto, buffers reused across runs
	Read                     // batchdb.ReadInto fresh buffers: what batchdb.Read does
	ByHand                   // RunTx.Trajectory per leaf, arrays appended
	Memcpy                   // copy() of as many bytes as the batch's arrays hold
	HTTP                     // client.ReadBatch through server.Handler on loopback: the step's source, built by batch.Assemble
	HTTPFile                 // client.Batch + batch.Decode: the safetensors file on loopback, as the Python client reads it
	HTTPChecking             // client.ReadBatch from a server that has not checked the run whole: it checks what each request reads
	nSides
)

// Times is, per side, one figure per repetition: the fastest of its runs
// (the one least disturbed by other processes, the same rule for every
// side), in wall seconds and in process CPU seconds.
type Times struct {
	Wall, CPU [nSides][]float64
	HaveCPU   bool // CPU is measured on this platform
}

// Measure times every side reps times; in a repetition each side runs
// iters times, the sides taking turns run by run in a rotating order.
func (s *Step) Measure(reps, iters int) (Times, error) {
	var out Times
	n := ArrayBytes(s.Rows)
	src, dst := make([]byte, n), make([]byte, n)
	for i := range src {
		src[i] = byte(i)
	}
	copy(dst, src)
	var reused batch.Batch
	read := func(dst *batch.Batch) error {
		return s.DB.ViewRun(Run, func(r *store.RunTx) error {
			return batchdb.ReadInto(dst, r, 1, batch.Options{})
		})
	}
	if err := read(&reused); err != nil {
		return out, err
	}
	url, stop, err := Serve(s.DB)
	if err != nil {
		return out, err
	}
	defer stop()
	cl := client.New(url)
	// A second server of the same file that only ever serves batches
	// never checks the run whole, so it checks each request's pages.
	checkingURL, stopChecking, err := Serve(s.DB)
	if err != nil {
		return out, err
	}
	defer stopChecking()
	checking := client.New(checkingURL)
	overHTTP := func() error {
		_, err := cl.ReadBatch(context.Background(), Run, 1, batch.Options{})
		return err
	}
	fileOverHTTP := func() error {
		data, err := cl.Batch(context.Background(), Run, 1, batch.Options{})
		if err != nil {
			return err
		}
		_, err = batch.Decode(data)
		return err
	}
	// A trainer's server has checked the run whole by the time it asks
	// for a batch (the step was opened and its rollouts leased through
	// it), and trusts it from then on, as the in-process reads trust the
	// file their process wrote: one request that checks it first.
	if _, err := cl.Frontier(context.Background(), Run, 1); err != nil {
		return out, err
	}
	overChecking := func() error {
		_, err := checking.ReadBatch(context.Background(), Run, 1, batch.Options{})
		return err
	}
	for _, warm := range []func() error{overHTTP, fileOverHTTP, overChecking} {
		if err := warm(); err != nil {
			return out, err
		}
	}
	sides := [nSides]func() error{
		ReadInto:     func() error { return read(&reused) },
		Read:         func() error { return read(new(batch.Batch)) },
		ByHand:       func() error { _, err := byHand(s.DB); return err },
		Memcpy:       func() error { copy(dst, src); return nil },
		HTTP:         overHTTP,
		HTTPFile:     fileOverHTTP,
		HTTPChecking: overChecking,
	}
	_, out.HaveCPU = cputime.Process()
	for rep := range reps {
		var times, cpus [nSides][]float64
		for it := range iters {
			for k := range sides {
				side := (k + it + rep) % len(sides) // rotate the order
				runtime.GC()
				c0, _ := cputime.Process()
				t0 := time.Now()
				if err := sides[side](); err != nil {
					return out, fmt.Errorf("batchmeasure: side %d: %w", side, err)
				}
				times[side] = append(times[side], time.Since(t0).Seconds())
				c1, _ := cputime.Process()
				cpus[side] = append(cpus[side], c1-c0)
			}
		}
		for side := range sides {
			out.Wall[side] = append(out.Wall[side], slices.Min(times[side]))
			out.CPU[side] = append(out.CPU[side], slices.Min(cpus[side]))
		}
	}
	return out, nil
}
