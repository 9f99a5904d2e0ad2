package main

import (
	"bufio"
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/bench/batchmeasure"
	"github.com/patrdb/patrdb/internal/workload"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// results is everything one invocation measured.
type results struct {
	cfg     config
	started time.Time
	elapsed time.Duration
	stats   workload.Stats // of the swe-like batches of one append run
	txns    int
	// lakeStats and lakeTxns describe the frozenlake append run, reported
	// without a target: tiny turns, where per-record costs dominate.
	lakeStats workload.Stats
	lakeTxns  int
	// steps are the matrix's sizes measured in the main run, step
	// commits (targetStepSizes), with their step-commit batch.
	steps []targetStep
	// batchStep describes the store of the batch figures.
	batchStep batchStepInfo
	resume    []resumeInfo // one per cfg.ResumeSizes
	replay    resumeInfo
	reps      []repResult
	verified  string
	// layout is where the append run's patrdb file spends its bytes
	// (repetition 1): per bucket, then the file's high-water mark and free
	// pages.
	layout    []model.BucketSize
	highWater int64
	// pageSizes is the patrdb append run's file at each page size a new
	// file may be created with (bytes only, measured once: they do not vary).
	pageSizes []pageSizeResult
	freeBytes int64
	profiles  []profileOut
}

// repResult is one repetition of every figure.
type repResult struct {
	Append map[string]appendResult
	Lake   map[string]appendResult // the frozenlake append run
	Traj   trajResult
	Point  pointResult
	Resume []resumeResult // parallel to cfg.ResumeSizes
	Replay replayResult
	RSS    map[string]int64 // peak RSS in bytes, by contender (and cHarness)
	// SummaryCold is each of coldCommands (by its label) run cold on the
	// smallest and the largest resume store.
	SummaryCold map[string]coldCLI
	// Step is the append targets' runs at the matrix's smaller turn sizes
	// with step commits, by size flag (targetStepSizes).
	Step map[string]matrixCell
	// Batch is the Go figures of reading a step's training batch.
	Batch batchmeasure.Times
}

func sweBatches(seed uint64, trees, n int) ([]workload.Batch, error) {
	return batchesOf(workload.SWEConfig(seed), trees, n)
}

func lakeBatches(seed uint64, trees, n int) ([]workload.Batch, error) {
	return batchesOf(workload.FrozenLakeConfig(seed), trees, n)
}

func batchesOf(cfg workload.Config, trees, n int) ([]workload.Batch, error) {
	cfg.Trees = trees
	gen, err := workload.NewGenerator(cfg)
	if err != nil {
		return nil, err
	}
	out := make([]workload.Batch, n)
	for i := range out {
		out[i] = gen.Next()
	}
	return out, nil
}

// rotate returns names starting at position rep, so that no child of the
// peak-RSS figure always runs first or last.
func rotate(names []string, rep int) []string {
	k := rep % len(names)
	return append(append([]string(nil), names[k:]...), names[:k]...)
}

func run(cfg config) (*results, error) {
	res := &results{cfg: cfg, started: time.Now()}
	log := cfg.Log
	work := filepath.Join(cfg.Out, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	batches, err := sweBatches(cfg.Seed, cfg.Trees, cfg.Batches)
	if err != nil {
		return nil, err
	}
	for _, b := range batches {
		res.stats.Add(b.Stats)
		res.txns += len(b.Txns)
	}
	lake, err := lakeBatches(cfg.Seed, cfg.Trees, cfg.Batches)
	if err != nil {
		return nil, err
	}
	for _, b := range lake {
		res.lakeStats.Add(b.Stats)
		res.lakeTxns += len(b.Txns)
	}
	lakeWork := filepath.Join(cfg.Out, "work-lake")
	if err := os.MkdirAll(lakeWork, 0o755); err != nil {
		return nil, err
	}
	for _, n := range cfg.ResumeSizes {
		info, err := resumeStore(cfg.Out, n, cfg.Seed, cfg.Trees, log)
		if err != nil {
			return nil, fmt.Errorf("resume store %d: %w", n, err)
		}
		res.resume = append(res.resume, info)
	}
	if res.replay, err = resumeStore(cfg.Out, cfg.ReplayNodes, cfg.Seed, cfg.Trees, log); err != nil {
		return nil, fmt.Errorf("replay store: %w", err)
	}
	exe, err := os.Executable()
	if err != nil && cfg.RSS {
		return nil, fmt.Errorf("peak RSS needs the runner's executable: %w", err)
	}
	if res.steps, err = targetSteps(cfg); err != nil {
		return nil, err
	}
	bstep, err := buildBatchStep(cfg)
	if err != nil {
		return nil, fmt.Errorf("batch step: %w", err)
	}
	defer bstep.Close()
	res.batchStep = batchStepInfo{Stats: bstep.Stats, Rows: bstep.Rows.Len(), Tokens: len(bstep.Rows.InputIDs), Bytes: batchmeasure.ArrayBytes(bstep.Rows)}
	var patrdbExe string // for the cold summaries; "" skips them
	if canDropCache && !cfg.Smoke {
		patrdbExe = filepath.Join(cfg.Out, "patrdb")
		if err := buildPatrdb(cfg.Root, patrdbExe, log); err != nil {
			return nil, err
		}
	}
	for rep := range cfg.Reps {
		t0 := time.Now()
		runtime.GC()
		rr := repResult{Append: map[string]appendResult{}, Lake: map[string]appendResult{}}
		for _, wl := range []struct {
			dir     string
			batches []workload.Batch
			passes  int
			out     map[string]appendResult
		}{{lakeWork, lake, 1, rr.Lake}, {work, batches, appendPasses, rr.Append}} {
			txns := 0
			for _, b := range wl.batches {
				txns += len(b.Txns)
			}
			for pass := range wl.passes {
				// The previous pass's files go first, and the file system
				// is flushed, so no contender's fsyncs wait on another's
				// deletes (this file system discards freed blocks).
				for _, name := range appendContenders {
					if err := removeStore(filepath.Join(wl.dir, fileName(name))); err != nil {
						return nil, err
					}
				}
				settle(wl.dir)
				cs := make([]contender, len(appendContenders))
				paths := make([]string, len(appendContenders))
				for i, name := range appendContenders {
					if cs[i], err = newContender(name); err != nil {
						return nil, err
					}
					paths[i] = filepath.Join(wl.dir, fileName(name))
				}
				runtime.GC()
				// A pass goes on with the rotation where the last left it.
				rs, err := runAppendAll(cs, paths, wl.batches, rep+pass*txns, collectEachTxn)
				if err != nil {
					return nil, err
				}
				for i, name := range appendContenders {
					wl.out[name] = wl.out[name].add(rs[i])
				}
			}
		}
		if rep == 0 {
			if res.verified, err = verify(work, batches, res); err != nil {
				return nil, fmt.Errorf("cross-check of the stores: %w", err)
			}
			if res.pageSizes, err = measurePageSizes(filepath.Join(cfg.Out, "work-pages"), batches); err != nil {
				return nil, fmt.Errorf("page sizes: %w", err)
			}
		}
		patrdbPath := filepath.Join(work, fileName(cPatrdb))
		if rr.Traj, err = measureTrajectory(patrdbPath, cfg.Budget, cfg.ColdIters); err != nil {
			return nil, fmt.Errorf("trajectory: %w", err)
		}
		if rr.Point, err = measurePointReads(patrdbPath, cfg.Budget); err != nil {
			return nil, fmt.Errorf("point reads: %w", err)
		}
		paths := make([]string, len(res.resume))
		for i, info := range res.resume {
			paths[i] = info.Path
		}
		if rr.Resume, err = measureResumeAll(paths, cfg.ResumeIters, cfg.ColdIters); err != nil {
			return nil, fmt.Errorf("resume: %w", err)
		}
		for i, info := range res.resume {
			if rr.Resume[i].Frontier != info.Frontier {
				return nil, fmt.Errorf("resume %d: loaded %d frontier nodes, the store has %d", info.Target, rr.Resume[i].Frontier, info.Frontier)
			}
		}
		if patrdbExe != "" {
			rr.SummaryCold = map[string]coldCLI{}
			for _, cc := range coldCommands(cfg.Out) {
				c, err := timeCLICold(patrdbExe, res.resume[0].Path, res.resume[len(res.resume)-1].Path, 1, cc.args...)
				if err != nil {
					return nil, err
				}
				rr.SummaryCold[cc.label] = c
			}
		}
		rr.Step = map[string]matrixCell{}
		for _, ts := range res.steps {
			t1 := time.Now()
			c, err := ts.measure(cfg, rep)
			if err != nil {
				return nil, err
			}
			rr.Step[ts.size.flag] = c
			fmt.Fprintf(log, "  append, %s turns, step commits, in %.1f s: %s\n", ts.size.name, time.Since(t1).Seconds(), c.targetLog())
		}
		t1 := time.Now()
		if rr.Batch, err = bstep.Measure(1, cfg.BatchIters); err != nil {
			return nil, fmt.Errorf("batch: %w", err)
		}
		fmt.Fprintf(log, "  batch figures in %.1f s\n", time.Since(t1).Seconds())
		if rr.Replay, err = measureReplay(res.replay.Path); err != nil {
			return nil, fmt.Errorf("replay: %w", err)
		}
		if cfg.RSS {
			rr.RSS = map[string]int64{}
			spec := childSpec{Trees: cfg.Trees, Batches: cfg.Batches, Seed: cfg.Seed, Dir: filepath.Join(cfg.Out, "work-rss")}
			for _, name := range rotate(append(slices.Clone(contenderNames), cHarness), rep) {
				rss, err := measureRSS(exe, name, spec)
				if err != nil {
					return nil, fmt.Errorf("peak RSS of %s: %w", name, err)
				}
				rr.RSS[name] = rss
			}
		}
		res.reps = append(res.reps, rr)
		// Each append target's ratio in this repetition, so that the log
		// shows which repetition crossed a bar.
		inside, ahead := rr.Append[cPatrdb].turnsPerSec(), rr.Append[cPatrdbEnc].turnsPerSec()
		sameIn, sameAhead := rr.Append[cSameInside].turnsPerSec(), rr.Append[cSameAhead].turnsPerSec()
		fmt.Fprintf(log, "rep %d/%d done in %.1f s: patrdb %.0f turns/s (encoded ahead %.0f), raw bbolt putting patrdb's bytes %.0f (ahead %.0f): %.2f× (ahead %.2f×); raw bbolt %.0f, SQLite %.0f, JSONL %.0f\n",
			rep+1, cfg.Reps, time.Since(t0).Seconds(), inside, ahead, sameIn, sameAhead, inside/sameIn, ahead/sameAhead,
			rr.Append[cBolt].turnsPerSec(), rr.Append[cSQLite].turnsPerSec(), rr.Append[cJSONL].turnsPerSec())
	}
	if cfg.Profile {
		res.profiles = profileAll(cfg, batches, work, res.replay.Path)
	}
	res.elapsed = time.Since(res.started)
	return res, nil
}

// appendPasses is how many times a repetition runs the LLM-sized append
// workload, each time into fresh files, its figures pooled. One pass is
// four commits of 70–130 ms, and one slow fsync among them decided a
// repetition's ratio: the same transaction took patrdb 86–127 ms and raw
// bbolt 77–119 from one repetition to the next.
const appendPasses = 2

// targetStepSizes are the matrix's turn sizes whose step commits the main
// run measures for the append targets (the LLM size is its own append
// run) with the least ratio each must reach, and targetStepContenders
// the two sides of those targets.
var (
	targetStepSizes = []struct {
		flag  string
		min   float64
		scale int // times the matrix's batches a repetition writes, in commits of the matrix's size
	}{{matrixSizeFlags[1], 0.85, 3}, {matrixSizeFlags[0], 0.8, 6}}
	targetStepContenders = []string{cPatrdb, cSameInside}
)

// targetStep is one of targetStepSizes with its step-commit batch.
type targetStep struct {
	size  matrixSize
	min   float64
	batch workload.Batch
}

// targetLog is a step target's cell for the log: both sides and the
// repetition's ratio.
func (c matrixCell) targetLog() string {
	p, raw := c.res[cPatrdb].turnsPerSec(), c.res[cSameInside].turnsPerSec()
	return fmt.Sprintf("patrdb %.0f turns/s, raw bbolt putting patrdb's bytes %.0f: %.2f×", p, raw, p/raw)
}

// targetSteps are the step targets with their batches: of the sizes
// named (matrixSize.flag), or of every size when none is.
func targetSteps(cfg config, only ...string) ([]targetStep, error) {
	var out []targetStep
	for _, t := range targetStepSizes {
		for _, sz := range matrixSizes(cfg.Seed, cfg.Smoke) {
			if sz.flag != t.flag || len(only) > 0 && !slices.Contains(only, sz.flag) {
				continue
			}
			if !cfg.Smoke {
				// A matrix repetition's few commits take some 0.1 s
				// here: one slow fsync would decide the ratio.
				sz.batches *= t.scale
			}
			_, step, err := matrixBatches(sz)
			if err != nil {
				return nil, err
			}
			out = append(out, targetStep{sz, t.min, step})
		}
	}
	return out, nil
}

// batchStepInfo describes the step whose training batch the batch figures
// read.
type batchStepInfo struct {
	Stats        workload.Stats
	Rows, Tokens int
	Bytes        int64 // of the rows batch's arrays
}

// buildBatchStep writes the batch figures' step into a fresh store under
// cfg.Out.
func buildBatchStep(cfg config) (*batchmeasure.Step, error) {
	dir := filepath.Join(cfg.Out, "work-batch")
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	c := batchmeasure.Default()
	if cfg.Smoke {
		c = batchmeasure.Smoke()
	}
	return batchmeasure.Build(c, filepath.Join(dir, "step.db"))
}

// verify checks, once, that every contender stored the same work (and
// records the patrdb file's layout in res): patrdb's
// full Check is clean and its counts match the workload; raw bbolt holds the
// same turn and node keys; SQLite the same turns, byte for byte of content;
// the JSONL dump one line per leaf, and its longest leaf's trajectory equals
// patrdb's field for field.
func verify(work string, batches []workload.Batch, res *results) (string, error) {
	var want workload.Stats
	for _, b := range batches {
		want.Add(b.Stats)
	}
	// patrdb
	o := store.DefaultOptions()
	o.ReadOnly = true
	db, err := store.Open(filepath.Join(work, fileName(cPatrdb)), o)
	if err != nil {
		return "", err
	}
	defer db.Close()
	if _, err := db.Check(nil); err != nil {
		return "", fmt.Errorf("check: %w", err)
	}
	leaf, pathTurns, _, err := findLeaf(db)
	if err != nil {
		return "", err
	}
	var traj []model.Turn
	err = db.View(func(tx *store.Tx) error {
		r, err := tx.Run(benchRun)
		if err != nil {
			return err
		}
		run := storetest.BoltTx(tx).Bucket([]byte("runs")).Bucket([]byte(benchRun))
		if n := run.Bucket([]byte("turns")).Stats().KeyN; n != want.Turns {
			return fmt.Errorf("patrdb holds %d turns, the workload wrote %d", n, want.Turns)
		}
		if n := int(run.Bucket([]byte("nodes")).Sequence()); n != want.Nodes {
			return fmt.Errorf("patrdb holds %d nodes, the workload added %d", n, want.Nodes)
		}
		advs, err := r.Advantages(0, 0)
		if err != nil {
			return err
		}
		if len(advs) != want.Leaves {
			return fmt.Errorf("patrdb holds %d advantages, the workload has %d leaves", len(advs), want.Leaves)
		}
		if res.layout, err = r.BucketSizes(); err != nil {
			return err
		}
		res.highWater = tx.Size()
		res.freeBytes = int64(storetest.Bolt(db).Stats().FreePageN) * int64(storetest.Bolt(db).Info().PageSize)
		p, err := r.Trajectory(leaf)
		for _, t := range p {
			traj = append(traj, t.Turn)
		}
		return err
	})
	if err != nil {
		return "", err
	}
	// patrdb with turns encoded ahead: a clean Check, and the same turn and
	// node values as patrdb's, byte for byte.
	if err := sameTurnsAndNodes(db, filepath.Join(work, fileName(cPatrdbEnc))); err != nil {
		return "", fmt.Errorf("%s: %w", cPatrdbEnc, err)
	}
	// raw bbolt
	bdb, err := bolt.Open(filepath.Join(work, fileName(cBolt)), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		return "", err
	}
	var turnKeys, nodeKeys int
	err = bdb.View(func(tx *bolt.Tx) error {
		return tx.Bucket(rawBucket).ForEach(func(k, _ []byte) error {
			switch len(k) {
			case 16:
				turnKeys++
			case 8:
				nodeKeys++
			}
			return nil
		})
	})
	_ = bdb.Close()
	if err != nil {
		return "", err
	}
	if turnKeys != want.Turns || nodeKeys != want.Nodes {
		return "", fmt.Errorf("raw bbolt holds %d turns and %d nodes, want %d and %d", turnKeys, nodeKeys, want.Turns, want.Nodes)
	}
	// SQLite
	sdb, err := sql.Open("sqlite", "file:"+filepath.Join(work, fileName(cSQLite))+"?mode=ro")
	if err != nil {
		return "", err
	}
	var sTurns, sNodes, sAdv int
	var sBytes int64
	err = sdb.QueryRow(`SELECT count(*), sum(length(CAST(action AS BLOB)) + length(CAST(observation AS BLOB)) +
		length(action_tokens) + length(action_logprobs) + length(observation_tokens) + 9) FROM turns`).Scan(&sTurns, &sBytes)
	if err == nil {
		err = sdb.QueryRow(`SELECT (SELECT count(*) FROM nodes), (SELECT count(*) FROM advantages)`).Scan(&sNodes, &sAdv)
	}
	_ = sdb.Close()
	if err != nil {
		return "", err
	}
	if sTurns != want.Turns || sBytes != want.TurnBytes || sNodes != want.Nodes || sAdv != want.Leaves {
		return "", fmt.Errorf("SQLite holds %d turns (%d bytes), %d nodes, %d advantages; want %d (%d), %d, %d",
			sTurns, sBytes, sNodes, sAdv, want.Turns, want.TurnBytes, want.Nodes, want.Leaves)
	}
	// JSONL
	f, err := os.Open(filepath.Join(work, fileName(cJSONL)))
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	lines := 0
	needle := []byte(`,"leaf":` + strconv.FormatUint(leaf, 10) + `,`)
	var line jsonlLeaf
	found := false
	for sc.Scan() {
		lines++
		if bytes.Contains(sc.Bytes(), needle) {
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				return "", err
			}
			found = true
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	if lines != want.Leaves {
		return "", fmt.Errorf("JSONL has %d lines, the workload has %d leaves", lines, want.Leaves)
	}
	if !found || !reflect.DeepEqual(line.Turns, traj) {
		return "", fmt.Errorf("JSONL trajectory of leaf %d differs from patrdb's (found %t, %d vs %d turns)", leaf, found, len(line.Turns), len(traj))
	}
	return fmt.Sprintf("patrdb's full Check is clean, and so is the file written with turns encoded ahead, whose turn and node values equal patrdb's byte for byte; "+
		"every store holds the workload's %d turns and %d nodes "+
		"(SQLite: %d content bytes, equal to the workload's); the JSONL dump has one line per leaf (%d) and its "+
		"trajectory of leaf %d (%d turns) equals patrdb's RunTx.Trajectory field for field.",
		want.Turns, want.Nodes, sBytes, want.Leaves, leaf, pathTurns), nil
}

// pageSizeResult is one append run's patrdb file at one page size.
type pageSizeResult struct {
	PageSize  int
	Disk      int64 // blocks the file occupies after close
	Trees     int
	TurnPages int64 // bytes of pages the turns bucket holds
	TurnUsed  int64 // bytes of them in use
}

// pageSizes are the page sizes measurePageSizes tries: bbolt's range of
// sensible ones around patrdb's default of 16 KiB.
var pageSizes = []int{4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10}

// measurePageSizes runs the append workload through patrdb once per page
// size (NoSync: only the bytes are kept) and records where the file goes.
func measurePageSizes(dir string, batches []workload.Batch) ([]pageSizeResult, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var out []pageSizeResult
	for _, ps := range pageSizes {
		o := store.DefaultOptions()
		o.PageSize, o.NoSync = ps, true
		path := filepath.Join(dir, fmt.Sprintf("patrdb-%d.db", ps))
		r, err := runAppend(&patrdbC{opts: o}, path, batches)
		if err != nil {
			return nil, err
		}
		res := pageSizeResult{PageSize: ps, Disk: r.Disk, Trees: r.Trees}
		o.ReadOnly = true
		db, err := store.Open(path, o)
		if err != nil {
			return nil, err
		}
		err = db.ViewRun(benchRun, func(run *store.RunTx) error {
			sizes, err := run.BucketSizes()
			for _, s := range sizes {
				if s.Name == "turns" {
					res.TurnPages, res.TurnUsed = s.Bytes, s.Used
				}
			}
			return err
		})
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = removeStore(path)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, res)
	}
	return out, nil
}

// sameTurnsAndNodes checks the patrdb file at path (Check clean) and that
// its run's turns and nodes buckets hold exactly ref's keys and values.
func sameTurnsAndNodes(ref *store.DB, path string) error {
	o := store.DefaultOptions()
	o.ReadOnly = true
	db, err := store.Open(path, o)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Check(nil); err != nil {
		return fmt.Errorf("check: %w", err)
	}
	return storetest.Bolt(ref).View(func(rtx *bolt.Tx) error {
		return storetest.Bolt(db).View(func(tx *bolt.Tx) error {
			for _, name := range []string{"turns", "nodes"} {
				a := rtx.Bucket([]byte("runs")).Bucket([]byte(benchRun)).Bucket([]byte(name))
				b := tx.Bucket([]byte("runs")).Bucket([]byte(benchRun)).Bucket([]byte(name))
				if a == nil || b == nil {
					return fmt.Errorf("no %s bucket", name)
				}
				ca, cb := a.Cursor(), b.Cursor()
				ka, va := ca.First()
				kb, vb := cb.First()
				for ; ka != nil || kb != nil; ka, va, kb, vb = nextPair(ca, cb) {
					if !bytes.Equal(ka, kb) || !bytes.Equal(va, vb) {
						return fmt.Errorf("%s: key %x differs from patrdb's (key %x)", name, kb, ka)
					}
				}
			}
			return nil
		})
	})
}

func nextPair(a, b *bolt.Cursor) (ka, va, kb, vb []byte) {
	ka, va = a.Next()
	kb, vb = b.Next()
	return ka, va, kb, vb
}

// Peak RSS: the runner re-executes itself with childEnv naming a
// contender; the child runs one append run and reports its VmHWM (the
// high-water mark of its own address space) before exiting.
const (
	childEnv = "PATRDB_BENCH_CHILD"
	specEnv  = "PATRDB_BENCH_SPEC"
	// cHarness runs the workload (generation and copying of every
	// transaction) without storing it: the floor under every contender.
	cHarness = "harness only"
)

type childSpec struct {
	Trees   int    `json:"trees"`
	Batches int    `json:"batches"`
	Seed    uint64 `json:"seed"`
	Dir     string `json:"dir"`
}

type childOut struct {
	VmHWM  int64        `json:"vmhwm"`
	Result appendResult `json:"result"`
}

// nullC stores nothing.
type nullC struct{}

func (nullC) name() string                           { return cHarness }
func (nullC) open(string) error                      { return nil }
func (nullC) prepare(txn []workload.Op) (any, error) { return txn, nil }
func (nullC) apply(any) error                        { return nil }
func (nullC) close() error                           { return nil }
func (nullC) files() []string                        { return nil }

func childMain(name string) int {
	var spec childSpec
	if err := json.Unmarshal([]byte(os.Getenv(specEnv)), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "bench child:", err)
		return 2
	}
	var c contender = nullC{}
	if name != cHarness {
		var err error
		if c, err = newContender(name); err != nil {
			fmt.Fprintln(os.Stderr, "bench child:", err)
			return 2
		}
	}
	batches, err := sweBatches(spec.Seed, spec.Trees, spec.Batches)
	if err == nil {
		err = os.MkdirAll(spec.Dir, 0o755)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench child:", err)
		return 1
	}
	path := filepath.Join(spec.Dir, fileName(name))
	r, err := runAppend(c, path, batches)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench child:", err)
		return 1
	}
	_ = removeStore(path)
	if err := json.NewEncoder(os.Stdout).Encode(childOut{VmHWM: statusKB("VmHWM") * 1024, Result: r}); err != nil {
		return 1
	}
	return 0
}

func measureRSS(exe, name string, spec childSpec) (int64, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"="+name, specEnv+"="+string(b))
	if os.Getenv("GORACE") == "" {
		// A race-enabled child (TestSmoke under -race) would otherwise
		// sleep a second at exit.
		cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=0")
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("%w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	var co childOut
	if err := json.Unmarshal(out, &co); err != nil {
		return 0, fmt.Errorf("child output %q: %w", out, err)
	}
	if co.Result.Turns == 0 {
		return 0, fmt.Errorf("child stored no turns")
	}
	if co.VmHWM > 0 {
		return co.VmHWM, nil
	}
	// Without /proc, fall back on the child's rusage. On Linux it is not
	// used: Go starts children with vfork semantics, and exec carries the
	// parent's high-water mark into the child's ru_maxrss.
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0, fmt.Errorf("no peak RSS reported")
	}
	return maxRSSBytes(ru), nil
}

// profileOut is the pprof -top of one hot path.
type profileOut struct {
	Name string
	What string
	File string
	Top  string
	Err  string
}

// profileAll CPU-profiles patrdb's append, warm trajectory and replay scan
// after the timed repetitions, so profiling never perturbs a figure.
func profileAll(cfg config, batches []workload.Batch, work, replayPath string) []profileOut {
	var out []profileOut
	prof := func(name, what string, fn func() error) {
		p := profileOut{Name: name, What: what, File: filepath.Join(cfg.Out, name+".prof")}
		f, err := os.Create(p.File)
		if err == nil {
			err = pprof.StartCPUProfile(f)
			if err == nil {
				err = fn()
				pprof.StopCPUProfile()
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err == nil {
			p.Top, err = pprofTop(p.File)
		}
		if err != nil {
			p.Err = err.Error()
		}
		out = append(out, p)
		fmt.Fprintf(cfg.Log, "profiled %s\n", name)
	}
	var txns []any
	for _, b := range batches {
		for _, t := range b.Txns {
			p, _ := (&patrdbC{}).prepare(workload.Materialize(t)) // cannot fail without encodeAhead
			txns = append(txns, p)
		}
	}
	prof("append", "patrdb append run, fsync on (apply only: transactions materialised beforehand)", func() error {
		c := &patrdbC{}
		path := filepath.Join(work, "profile.db")
		if err := c.open(path); err != nil {
			return err
		}
		defer removeStore(path)
		for _, t := range txns {
			if err := c.apply(t); err != nil {
				_ = c.close()
				return err
			}
		}
		return c.close()
	})
	prof("trajectory", "RunTx.Trajectory of the longest leaf, warm, for 2 s", func() error {
		db, err := store.Open(filepath.Join(work, fileName(cPatrdb)), nil)
		if err != nil {
			return err
		}
		defer db.Close()
		leaf, _, _, err := findLeaf(db)
		if err != nil {
			return err
		}
		return db.ViewRun(benchRun, func(r *store.RunTx) error {
			var err error
			_, err = timeLoop(2*time.Second, 1, func() error { _, err := r.Trajectory(leaf); return err })
			return err
		})
	})
	prof("replay", "RunTx.Events over the replay store, repeated for 2 s", func() error {
		o := store.DefaultOptions()
		o.ReadOnly = true
		db, err := store.Open(replayPath, o)
		if err != nil {
			return err
		}
		defer db.Close()
		return db.ViewRun(benchRun, func(r *store.RunTx) error {
			var err error
			_, err = timeLoop(2*time.Second, 1, func() error { return r.Events(0, func(model.Event) error { return nil }) })
			return err
		})
	})
	return out
}

// pprofTop runs `go tool pprof -top -cum` on a profile.
func pprofTop(file string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	// Cumulative, with the runtime's frames folded into their callers, so
	// each line says how much of the time went through a function of ours,
	// bbolt's or msgpack's.
	cmd := exec.Command(goBin, "tool", "pprof", "-top", "-cum", "-nodecount=25",
		`-hide=^runtime\.|^internal/runtime|^main\.|^testing\.`, file)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go tool pprof: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	return string(out), nil
}

// runStepTargets measures only the append targets at ~1 KB and tiny turns:
// the full run's step-commit cells, with its repetitions and verdicts,
// printed as the Targets table's rows (RESULTS.md is left alone). A
// change to the per-call work is seen here in seconds where the full run
// takes minutes.
func runStepTargets(cfg config, w io.Writer) error {
	steps, err := targetSteps(cfg, cfg.MatrixSizes...)
	if err != nil {
		return err
	}
	if len(steps) == 0 {
		return fmt.Errorf("-step-targets: -matrix-sizes %s names no step target (%s, %s)",
			strings.Join(cfg.MatrixSizes, ","), targetStepSizes[0].flag, targetStepSizes[1].flag)
	}
	cells := make([][]matrixCell, len(steps))
	for rep := range cfg.Reps {
		for i, ts := range steps {
			c, err := ts.measure(cfg, rep)
			if err != nil {
				return err
			}
			fmt.Fprintf(cfg.Log, "rep %d, %s turns: %s\n", rep+1, ts.size.name, c.targetLog())
			cells[i] = append(cells[i], c)
		}
	}
	figs := make([]figure, len(steps))
	for i, ts := range steps {
		figs[i] = stepFigure(ts, cells[i])
	}
	_, err = fmt.Fprintf(w, "Command: `%s` (%d repetitions).\n\n%s", cfg.Command, cfg.Reps, figureTable(figs))
	return err
}
