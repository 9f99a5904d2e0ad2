// Command bench measures patrdb against raw bbolt, SQLite and a JSONL dump
// on the workloads of its targets (see RESULTS.md) and rewrites bench/RESULTS.md.
//
//	go run ./bench                 # 5 repetitions, ~5 minutes once the resume stores are cached
//	go run ./bench -smoke          # 1 repetition at tiny sizes (CI runs it through TestSmoke)
//	go run ./bench -reps 3 -resume 10000,100000
//	go run ./bench -step-targets   # only the append targets at ~1 KB and tiny turns, ~25 s
//
// Every figure is a ratio measured side by side in one process: the
// contenders take turns transaction by transaction (the order rotating),
// fsync is on, and each transaction is one interval of a batch of trees.
// Peak RSS is the exception: each contender runs once more in a child
// process of the runner, which reports its high-water mark.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// config is what one invocation measures.
type config struct {
	Reps        int           // repetitions of every figure
	Trees       int           // trees per batch; a transaction is one interval of a batch
	Batches     int           // swe-like batches per append run
	Seed        uint64        // workload seed
	ResumeSizes []int         // node counts of the resume stores
	ReplayNodes int           // size of the resume store whose event log the replay figure scans
	ResumeIters int           // open+frontier iterations per repetition and size (median taken)
	ColdIters   int           // cold iterations (file dropped from the page cache) per repetition
	Budget      time.Duration // time per micro-measurement loop
	BatchIters  int           // timed runs per side of the batch figures per repetition (the fastest counts)
	Out         string        // work directory: stores of this run, cached resume stores, profiles
	Root        string        // the module's root, where the patrdb command is built from
	Results     string        // RESULTS.md to rewrite; "" leaves it alone
	RSS         bool          // measure peak RSS in child processes
	Profile     bool          // CPU-profile the patrdb hot paths after the repetitions
	Smoke       bool
	Command     string // the command line, recorded in RESULTS.md
	Log         io.Writer

	Matrix        bool     // only the append matrix (matrix.go)
	StepTargets   bool     // only the append targets at ~1 KB and tiny turns (runStepTargets)
	PageSize      int      // of the patrdb and raw bbolt stores; 0: patrdb's default
	MatrixSizes   []string // the matrix's turn sizes (matrixSizeFlags)
	MatrixCommits []string // the matrix's commit sizes (matrixCommitNames)
	// Collect is when the matrix and the step targets collect the heap:
	// before every transaction (the default, and always in the full run),
	// or once a cell with the collector off (a diagnostic, contender.go).
	Collect collectMode
}

func defaultConfig(root string) config {
	return config{
		Reps: 5, Trees: 64, Batches: 1, Seed: 1,
		ResumeSizes: []int{10_000, 100_000, 1_000_000}, ReplayNodes: 100_000,
		ResumeIters: 30, ColdIters: 3, Budget: 300 * time.Millisecond, BatchIters: 7,
		Out: filepath.Join(root, "bench", "out"), Root: root, Results: filepath.Join(root, "bench", "RESULTS.md"),
		RSS: true, Profile: true, Log: os.Stderr,
		MatrixSizes: slices.Clone(matrixSizeFlags), MatrixCommits: slices.Clone(matrixCommitNames),
		Collect: collectEachTxn,
	}
}

// smokeConfig shrinks everything so the whole runner finishes in seconds.
func smokeConfig(c config) config {
	c.Smoke = true
	c.Reps, c.Trees, c.Batches = 1, 4, 1
	c.ResumeSizes, c.ReplayNodes = []int{300, 1200}, 1200
	c.ResumeIters, c.ColdIters, c.BatchIters = 3, 1, 1
	c.Budget = 20 * time.Millisecond
	c.Profile = false
	return c
}

func parseConfig(args []string, root string, log io.Writer) (config, error) {
	def := defaultConfig(root)
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(log)
	smoke := fs.Bool("smoke", false, "1 repetition at tiny sizes, no profiles, RESULTS.md untouched unless -results is given")
	reps := fs.Int("reps", def.Reps, "repetitions of every figure")
	trees := fs.Int("trees", def.Trees, "trees per batch (one transaction = one interval of a batch)")
	batches := fs.Int("batches", def.Batches, "swe-like batches per append run")
	seed := fs.Uint64("seed", def.Seed, "workload seed")
	resume := fs.String("resume", joinInts(def.ResumeSizes), "node counts of the resume stores, comma-separated (smallest is the anchor)")
	replay := fs.Int("replay-nodes", def.ReplayNodes, "resume store size whose event log the replay figure scans")
	iters := fs.Int("resume-iters", def.ResumeIters, "open+frontier iterations per repetition and size")
	cold := fs.Int("cold-iters", def.ColdIters, "cold iterations per repetition (0 skips cold figures)")
	budget := fs.Duration("budget", def.Budget, "time per micro-measurement loop")
	out := fs.String("out", def.Out, "work directory (stores, cached resume stores, profiles)")
	results := fs.String("results", def.Results, `RESULTS.md to rewrite ("" to leave it alone)`)
	rss := fs.Bool("rss", def.RSS, "measure peak RSS of each contender in a child process")
	prof := fs.Bool("profile", def.Profile, "CPU-profile the patrdb hot paths after the repetitions")
	pageSize := fs.Int("page-size", 0, "page size of the patrdb and raw bbolt stores (0: patrdb's default)")
	matrixSizes := fs.String("matrix-sizes", strings.Join(def.MatrixSizes, ","), "turn sizes of the append matrix, comma-separated")
	matrixCommits := fs.String("matrix-commits", strings.Join(def.MatrixCommits, ","), "commit sizes of the append matrix, comma-separated")
	stepTargets := fs.Bool("step-targets", false, "only the append targets at ~1 KB and tiny turns (the step-commit cells of the full run, its repetitions and verdicts; -matrix-sizes 1kb or tiny picks one), printed as markdown")
	collect := fs.String("collect", string(collectEachTxn), "with -matrix or -step-targets: collect the heap before every transaction (txn), or once a cell with the collector off while it runs (rep: a diagnostic of what the collection before each transaction costs each contender; the heap grows with the cell)")
	matrix := fs.Bool("matrix", false, "only the append matrix (three turn sizes, round and step commits, against raw bbolt, the disk floor, SQLite and JSONL), printed as markdown")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("bench: unexpected argument %q", fs.Arg(0))
	}
	c := def
	if *smoke {
		c = smokeConfig(c)
		c.Results = ""
	}
	// Flags given explicitly override the mode's defaults.
	var perr error
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "reps":
			c.Reps = *reps
		case "trees":
			c.Trees = *trees
		case "batches":
			c.Batches = *batches
		case "seed":
			c.Seed = *seed
		case "resume":
			c.ResumeSizes, perr = parseInts(*resume)
		case "replay-nodes":
			c.ReplayNodes = *replay
		case "resume-iters":
			c.ResumeIters = *iters
		case "cold-iters":
			c.ColdIters = *cold
		case "budget":
			c.Budget = *budget
		case "out":
			c.Out = *out
		case "results":
			c.Results = *results
		case "rss":
			c.RSS = *rss
		case "profile":
			c.Profile = *prof
		}
	})
	if perr != nil {
		return config{}, perr
	}
	c.Matrix, c.StepTargets, c.PageSize, c.Collect = *matrix, *stepTargets, *pageSize, collectMode(*collect)
	c.MatrixSizes, c.MatrixCommits = strings.Split(*matrixSizes, ","), strings.Split(*matrixCommits, ",")
	c.Command = strings.TrimSpace("go run ./bench " + strings.Join(args, " "))
	c.Log = log
	return c, c.validate()
}

func (c config) validate() error {
	switch {
	case c.Reps < 1:
		return fmt.Errorf("bench: -reps %d, want >= 1", c.Reps)
	case c.Trees < 1 || c.Batches < 1:
		return fmt.Errorf("bench: -trees and -batches must be >= 1")
	case len(c.ResumeSizes) < 2:
		return fmt.Errorf("bench: -resume needs at least two sizes to show growth")
	case c.ReplayNodes < 1:
		return fmt.Errorf("bench: -replay-nodes %d, want >= 1", c.ReplayNodes)
	case c.ResumeIters < 1 || c.ColdIters < 0:
		return fmt.Errorf("bench: -resume-iters must be >= 1 and -cold-iters >= 0")
	case c.Budget <= 0:
		return fmt.Errorf("bench: -budget must be positive")
	case c.Collect != collectEachTxn && c.Collect != collectRep:
		return fmt.Errorf("bench: -collect %q, want %s or %s", c.Collect, collectEachTxn, collectRep)
	case c.Collect == collectRep && !c.Matrix && !c.StepTargets:
		return fmt.Errorf("bench: -collect %s is a diagnostic of -matrix and -step-targets; the full run collects before every transaction", collectRep)
	}
	for _, sz := range c.MatrixSizes {
		if !slices.Contains(matrixSizeFlags, sz) {
			return fmt.Errorf("bench: -matrix-sizes %q, want some of %s", sz, strings.Join(matrixSizeFlags, ","))
		}
	}
	for _, cm := range c.MatrixCommits {
		if !slices.Contains(matrixCommitNames, cm) {
			return fmt.Errorf("bench: -matrix-commits %q, want some of %s", cm, strings.Join(matrixCommitNames, ","))
		}
	}
	return nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.ReplaceAll(strings.TrimSpace(f), "_", "")
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bench: bad size %q in %q", f, s)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// moduleRoot walks up from the working directory to the repository's root,
// the directory holding go.work (bench/ has a go.mod of its own), so
// `go run ./bench` and `go test ./bench` find the same paths.
func moduleRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return "."
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return dir
		}
	}
}

func main() {
	if name := os.Getenv(childEnv); name != "" {
		os.Exit(childMain(name))
	}
	if spec := os.Getenv(stepEnv); spec != "" {
		os.Exit(stepChildMain(spec))
	}
	if len(os.Args) > 1 && os.Args[1] == "bigfile" {
		if err := bigfileMain(os.Args[2:], moduleRoot(), os.Stderr); err != nil && err != flag.ErrHelp {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	cfg, err := parseConfig(os.Args[1:], moduleRoot(), os.Stderr)
	if err == flag.ErrHelp {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if cfg.Matrix || cfg.StepTargets {
		only := runMatrix
		if cfg.StepTargets {
			only = runStepTargets
		}
		if err := only(cfg, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	res, err := run(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	fmt.Print(res.table())
	if cfg.Results != "" {
		if err := res.writeResults(cfg.Results); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		fmt.Fprintln(os.Stderr, "wrote", cfg.Results)
	}
}
