package main

import (
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patrdb/patrdb/internal/workload"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// TestMain lets the test binary serve as the runner's child processes,
// which TestSmoke's peak-RSS figure and step cells re-execute.
func TestMain(m *testing.M) {
	if name := os.Getenv(childEnv); name != "" {
		os.Exit(childMain(name))
	}
	if spec := os.Getenv(stepEnv); spec != "" {
		os.Exit(stepChildMain(spec))
	}
	os.Exit(m.Run())
}

// TestSmoke runs the whole runner at smoke size, as CI does: every figure
// is produced from real runs, every contender stored the same work, and
// RESULTS.md is written with its notes kept.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every contender against a real disk")
	}
	dir := t.TempDir()
	cfg := smokeConfig(defaultConfig(moduleRoot()))
	cfg.Out, cfg.Results, cfg.Log = dir, filepath.Join(dir, "RESULTS.md"), io.Discard
	cfg.Command = "go test ./bench -run TestSmoke"
	res, err := run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.reps) != 1 {
		t.Fatalf("%d repetitions, want 1", len(res.reps))
	}
	rep := res.reps[0]
	for _, n := range contenderNames {
		a := rep.Append[n]
		if a.Turns != appendPasses*res.stats.Turns || a.Txns != appendPasses*res.txns || a.Seconds <= 0 || a.Disk <= 0 {
			t.Errorf("%s: %+v; want %d passes of %d turns in %d transactions, time and bytes on disk", n, a, appendPasses, res.stats.Turns, res.txns)
		}
		if rep.RSS[n] <= 0 {
			t.Errorf("%s: no peak RSS", n)
		}
	}
	if rep.RSS[cHarness] <= 0 {
		t.Errorf("harness: no peak RSS")
	}
	if len(res.pageSizes) != len(pageSizes) {
		t.Errorf("%d page sizes measured, want %d", len(res.pageSizes), len(pageSizes))
	}
	for _, p := range res.pageSizes {
		if p.Disk <= 0 || p.TurnUsed <= 0 || p.TurnUsed > p.TurnPages {
			t.Errorf("page size %d: %+v", p.PageSize, p)
		}
	}
	if !strings.Contains(res.verified, "Check is clean") {
		t.Errorf("cross-check summary: %q", res.verified)
	}
	if rep.Traj.Turns != workload.SWEConfig(0).Tree.MaxTurns {
		t.Errorf("trajectory figure used a %d-turn leaf, want the %d-turn cap", rep.Traj.Turns, workload.SWEConfig(0).Tree.MaxTurns)
	}
	for i, r := range rep.Resume {
		if r.Frontier == 0 || r.Frontier != res.resume[0].Frontier {
			t.Errorf("resume store %d: frontier %d, smallest store's %d; the sizes must share one frontier", i, r.Frontier, res.resume[0].Frontier)
		}
	}
	if rep.Replay.Events == 0 || uint64(rep.Replay.Events) != res.replay.Events {
		t.Errorf("replay scanned %d events, the store holds %d", rep.Replay.Events, res.replay.Events)
	}
	for _, ts := range res.steps {
		c := rep.Step[ts.size.flag]
		for _, n := range targetStepContenders {
			if a := c.res[n]; a.Turns != ts.batch.Stats.Turns || a.Txns != len(ts.batch.Txns) || a.Seconds <= 0 {
				t.Errorf("%s turns, %s: %+v; want %d turns in %d transactions", ts.size.name, n, a, ts.batch.Stats.Turns, len(ts.batch.Txns))
			}
		}
	}
	if len(res.steps) != len(targetStepSizes) {
		t.Errorf("%d step sizes measured, want %d", len(res.steps), len(targetStepSizes))
	}
	figs := res.figures()
	for _, want := range []string{"vs raw bbolt putting patrdb's bytes", "EncodeTurns", "~1 KB turns", "tiny turns", "batchdb.ReadInto", "client over HTTP", "vs SQLite", "JSONL full-trajectory dump",
		"raw turn payload", "bytes on disk per tree vs JSONL", "resume", "trajectory", "point read", "replay scan rate", "cursor walk", "peak RSS"} {
		found := false
		for _, f := range figs {
			found = found || strings.Contains(f.name, want)
		}
		if !found {
			t.Errorf("no figure %q", want)
		}
	}
	for _, f := range figs {
		for _, r := range f.ratios {
			if !(r > 0) || math.IsInf(r, 0) {
				t.Errorf("%s: ratio %v", f.name, r)
			}
		}
	}

	// RESULTS.md: rewritten above the notes marker, notes kept.
	if err := res.writeResults(cfg.Results); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(cfg.Results)
	if err != nil {
		t.Fatal(err)
	}
	notes := string(b) + "a note that must survive\n"
	if err := os.WriteFile(cfg.Results, []byte(notes), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := res.writeResults(cfg.Results); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(cfg.Results)
	doc := string(b)
	for _, want := range []string{"## Targets", "nproc", "go run", cfg.Command, "a note that must survive", "| turn append vs raw bbolt putting patrdb's bytes, turns encoded inside the transaction"} {
		if !strings.Contains(doc, want) {
			t.Errorf("RESULTS.md lacks %q", want)
		}
	}
	if strings.Count(doc, notesMarker) != 1 {
		t.Errorf("RESULTS.md has %d notes markers, want 1", strings.Count(doc, notesMarker))
	}
}

func TestVerdict(t *testing.T) {
	ge, le := target{">=", 0.8}, target{"<=", 2}
	for _, c := range []struct {
		t    target
		xs   []float64
		want string
	}{
		{ge, []float64{0.9, 0.85, 1.2}, "**met**"},
		{ge, []float64{0.8}, "**met**"},
		{ge, []float64{0.5, 0.79}, "**not met**"},
		{ge, []float64{0.7, 0.9}, "inconclusive"},
		{le, []float64{1.1, 2}, "**met**"},
		{le, []float64{2.1, 3}, "**not met**"},
		{le, []float64{1.9, 2.1}, "inconclusive"},
		{target{}, []float64{1}, "—"},
	} {
		if got := c.t.verdict(c.xs); got != c.want {
			t.Errorf("%v.verdict(%v) = %s, want %s", c.t, c.xs, got, c.want)
		}
	}
}

func TestParseConfig(t *testing.T) {
	c, err := parseConfig([]string{"-smoke", "-reps", "2"}, "/r", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Smoke || c.Reps != 2 || c.Trees != 4 || c.Results != "" || c.Profile {
		t.Errorf("smoke with -reps 2: %+v", c)
	}
	c, err = parseConfig([]string{"-resume", "100_000,10000"}, "/r", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Reps != 5 || c.ResumeSizes[0] != 10000 || c.ResumeSizes[1] != 100000 || c.Results != "/r/bench/RESULTS.md" {
		t.Errorf("full: %+v", c)
	}
	if c.Command != "go run ./bench -resume 100_000,10000" {
		t.Errorf("command %q", c.Command)
	}
	if len(c.MatrixSizes) != 3 || len(c.MatrixCommits) != 2 || c.Collect != collectEachTxn {
		t.Errorf("matrix sizes %q, commits %q, collect %q: want all, and a collection before every transaction", c.MatrixSizes, c.MatrixCommits, c.Collect)
	}
	c, err = parseConfig([]string{"-step-targets", "-collect", "rep"}, "/r", io.Discard)
	if err != nil || c.Collect != collectRep {
		t.Errorf("-step-targets -collect rep: %q, %v", c.Collect, err)
	}
	c, err = parseConfig([]string{"-matrix", "-matrix-sizes", "1kb", "-matrix-commits", "step"}, "/r", io.Discard)
	if err != nil || !slices.Equal(c.MatrixSizes, []string{"1kb"}) || !slices.Equal(c.MatrixCommits, []string{"step"}) {
		t.Errorf("one matrix cell: %q %q, %v", c.MatrixSizes, c.MatrixCommits, err)
	}
	for _, bad := range [][]string{{"-reps", "0"}, {"-resume", "10"}, {"-resume", "x,10"}, {"extra"},
		{"-matrix-sizes", "1kb,2kb"}, {"-matrix-commits", "steps"}, {"-collect", "rep"}, {"-matrix", "-collect", "never"}} {
		if _, err := parseConfig(bad, "/r", io.Discard); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// The benchmarks below are the hot paths, for benchstat across commits:
//
//	go test ./bench -run '^$' -bench . -count 10 > new.txt

var benchFixture = sync.OnceValues(func() ([]workload.Batch, error) { return sweBatches(1, 8, 1) })

func fixture(b *testing.B) []workload.Batch {
	batches, err := benchFixture()
	if err != nil {
		b.Fatal(err)
	}
	return batches
}

func sweTurn(b *testing.B) model.Turn {
	for _, op := range fixture(b)[0].Txns[0] {
		if op.Kind == workload.OpTurns {
			return workload.MaterializeTurn(op.Turns[0])
		}
	}
	b.Fatal("no turns in the fixture")
	return model.Turn{}
}

func BenchmarkEncodeTurn(b *testing.B) {
	t := sweTurn(b)
	b.SetBytes(int64(workload.TurnBytes(&t)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := store.EncodeTurn(&t); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeTurn(b *testing.B) {
	t := sweTurn(b)
	raw, err := store.EncodeTurn(&t)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := store.DecodeTurn(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendInterval times the second interval of a batch of 8
// swe-like trees (turns, scores, routing, expansions) into a store that
// holds the first, through patrdb and through raw bbolt. NoSync isolates
// the CPU cost; the runner measures with fsync.
func BenchmarkAppendInterval(b *testing.B) {
	batch := fixture(b)[0]
	for _, name := range []string{cPatrdb, cBolt} {
		b.Run(name, func(b *testing.B) {
			var turns int
			for _, op := range batch.Txns[1] {
				turns += len(op.Turns)
			}
			b.ReportAllocs()
			dir := b.TempDir()
			var el time.Duration
			for i := 0; i < b.N; i++ {
				var c contender
				if name == cPatrdb {
					o := store.DefaultOptions()
					o.NoSync = true
					c = &patrdbC{opts: o}
				} else {
					c = &boltC{noSync: true}
				}
				path := filepath.Join(dir, fileName(name))
				if err := c.open(path); err != nil {
					b.Fatal(err)
				}
				for k := 0; k < 2; k++ {
					p, err := c.prepare(workload.Materialize(batch.Txns[k]))
					if err != nil {
						b.Fatal(err)
					}
					t0 := time.Now()
					err = c.apply(p)
					if k == 1 {
						el += time.Since(t0)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				if err := c.close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(el.Nanoseconds())/float64(b.N), "ns/interval")
			b.ReportMetric(float64(turns*b.N)/el.Seconds(), "turns/s")
		})
	}
}

// trajFixture is a NoSync store holding one batch of 8 swe-like trees.
func trajFixture(b *testing.B) *store.DB {
	o := storetest.Options()
	db := storetest.OpenPath(b, filepath.Join(b.TempDir(), "patr.db"), o)
	if err := db.Update(func(tx *store.Tx) error {
		_, err := tx.CreateRun(benchRun, []byte(`{}`), nil)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	for _, txn := range fixture(b)[0].Txns {
		if err := workload.ApplyTxn(db, benchRun, txn); err != nil {
			b.Fatal(err)
		}
	}
	return db
}

func BenchmarkTrajectory(b *testing.B) {
	db := trajFixture(b)
	leaf, turns, size, err := findLeaf(db)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	err = db.ViewRun(benchRun, func(r *store.RunTx) error {
		for b.Loop() {
			p, err := r.Trajectory(leaf)
			if err != nil {
				return err
			}
			if len(p) != turns {
				b.Fatalf("%d turns, want %d", len(p), turns)
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

func BenchmarkReplayScan(b *testing.B) {
	db := trajFixture(b)
	b.ReportAllocs()
	var events int
	err := db.ViewRun(benchRun, func(r *store.RunTx) error {
		for b.Loop() {
			events = 0
			if err := r.Events(0, func(model.Event) error { events++; return nil }); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(events), "events/op")
	b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
