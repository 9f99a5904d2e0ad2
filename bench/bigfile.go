package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// bigfileMain is `go run ./bench bigfile`: it builds (or reuses) the cached
// resume stores and times, on the largest, what a user runs against a big
// file: `patrdb runs`, `show`, `tree RUN latest` and `check` (with its peak
// anonymous memory), plus resume (open + frontier) against the smallest.
// It prints a Markdown section for RESULTS.md.
func bigfileMain(args []string, root string, log io.Writer) error {
	fs := flag.NewFlagSet("bench bigfile", flag.ContinueOnError)
	fs.SetOutput(log)
	sizes := fs.String("sizes", "10000,1000000", "node counts of the stores, comma-separated (smallest is the resume anchor, largest is measured)")
	out := fs.String("out", filepath.Join(root, "bench", "out"), "work directory (cached stores, the patrdb binary)")
	trees := fs.Int("trees", 64, "trees per batch")
	seed := fs.Uint64("seed", 1, "workload seed")
	reps := fs.Int("reps", 7, "repetitions of runs, show, tree latest and resume")
	checkReps := fs.Int("check-reps", 3, "repetitions of check")
	treeCLI := fs.Bool("tree-cli", true, "also time the tree command end to end")
	buildOnly := fs.Bool("build-only", false, "build the stores and stop")
	summaries := fs.Bool("summaries", false, "time only runs and show (warm, and cold on both sizes), then stop")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ns, err := parseInts(*sizes)
	if err != nil {
		return err
	}
	if len(ns) < 2 {
		return fmt.Errorf("bench bigfile: -sizes needs an anchor and a big size")
	}
	var infos []resumeInfo
	for _, n := range ns {
		info, err := resumeStore(*out, n, *seed, *trees, log)
		if err != nil {
			return err
		}
		fmt.Fprintf(log, "store %d: %s (%d nodes, %.0f MB)\n", n, info.Path, info.Nodes, float64(info.Bytes)/1e6)
		infos = append(infos, info)
	}
	if *buildOnly {
		return nil
	}
	exe := filepath.Join(*out, "patrdb")
	if err := buildPatrdb(root, exe, log); err != nil {
		return err
	}
	big, small := infos[len(infos)-1], infos[0]
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	fmt.Fprintf(w, "Store: %s nodes, %s events, %.2f GB (frozenlake, built in %.0f s with NoSync); anchor %d nodes.\n\n",
		fmtCount(big.Nodes), fmtCount(int(big.Events)), float64(big.Bytes)/1e9, big.BuildSec, small.Nodes)
	fmt.Fprintln(w, "| what | median | min–max | reps | target |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	row := func(what, target string, xs []float64) {
		fmt.Fprintf(w, "| %s | %s | %s–%s | %d | %s |\n", what, fmtSec(median(xs)), fmtSec(slices.Min(xs)), fmtSec(slices.Max(xs)), len(xs), target)
	}
	// cli times patrdb args... (and with withCPU its CPU time too).
	cli := func(withCPU bool, target string, args ...string) error {
		name := strings.Join(args, " ")
		fmt.Fprintf(log, "timing patrdb %s...\n", name)
		xs, cpu, err := timeCLI(exe, big.Path, *reps, args...)
		if err != nil {
			return err
		}
		row(fmt.Sprintf("`patrdb %s`, warm, end to end", name), target, xs)
		if withCPU {
			row(fmt.Sprintf("`patrdb %s`, CPU time (user + sys)", name), "—", cpu)
		}
		return nil
	}
	// The floor under any command: a patrdb process that opens nothing.
	if err := cli(true, "—", "version"); err != nil {
		return err
	}
	if err := cli(false, "≤ 50 ms", "runs"); err != nil {
		return err
	}
	if err := cli(false, "≤ 50 ms", "show", benchRun); err != nil {
		return err
	}
	if canDropCache {
		for _, args := range summaryCommands {
			fmt.Fprintf(log, "timing patrdb %s cold...\n", strings.Join(args, " "))
			c, err := timeCLICold(exe, small.Path, big.Path, *reps, args...)
			if err != nil {
				return err
			}
			c.row(w, strings.Join(args, " "), fmtCount(big.Nodes), fmtCount(small.Nodes))
		}
	}
	if *summaries {
		return nil
	}
	for _, m := range []latestMode{latestPlain, latestChecked, latestWalkAll} {
		for _, cold := range []bool{false, true} {
			if cold && (!canDropCache || m == latestPlain) {
				continue
			}
			lib, err := timeLatest(big.Path, *reps, m, cold)
			if err != nil {
				return err
			}
			target := "≤ 10 ms"
			if cold {
				target = "—"
			}
			row(fmt.Sprintf("`tree latest` in the library (open, LatestGroup, GroupNodes, Advantages)%s, %s", m, warmCold(cold)), target, lib)
		}
	}
	if *treeCLI {
		if err := cli(true, "≤ 10 ms", "tree", benchRun, "latest"); err != nil {
			return err
		}
	}
	var walls []float64
	var anon, hwm []int64
	for i := range *checkReps {
		fmt.Fprintf(log, "check %d/%d...\n", i+1, *checkReps)
		wall, a, h, err := checkRSS(exe, big.Path)
		if err != nil {
			return err
		}
		walls, anon, hwm = append(walls, wall), append(anon, a), append(hwm, h)
	}
	fmt.Fprintf(w, "| `patrdb check` wall, warm | %s | %s–%s | %d | — |\n", fmtSec(median(walls)), fmtSec(slices.Min(walls)), fmtSec(slices.Max(walls)), len(walls))
	fmt.Fprintf(w, "| `patrdb check` peak anonymous memory (RssAnon, sampled every 20 ms) | %.1f MB | %.1f–%.1f MB | %d | ≤ 300 MB |\n",
		medianInt(anon)/1e3, float64(slices.Min(anon))/1e3, float64(slices.Max(anon))/1e3, len(anon))
	fmt.Fprintf(w, "| `patrdb check` peak RSS with the mapped file (VmHWM) | %.0f MB | %.0f–%.0f MB | %d | — |\n",
		medianInt(hwm)/1e3, float64(slices.Min(hwm))/1e3, float64(slices.Max(hwm))/1e3, len(hwm))
	var ratios, bigNs, smallNs []float64
	for range *reps {
		rs, err := measureResumeAll([]string{small.Path, big.Path}, 30, 0)
		if err != nil {
			return err
		}
		smallNs, bigNs = append(smallNs, rs[0].WarmNs), append(bigNs, rs[1].WarmNs)
		ratios = append(ratios, rs[1].WarmNs/rs[0].WarmNs)
	}
	fmt.Fprintf(w, "| resume (open + frontier nodes + their groups), %s ÷ %s nodes, warm | %.2f× (%s vs %s) | %.2f×–%.2f× | %d × 30 | ≤ 1.2× |\n",
		fmtCount(big.Nodes), fmtCount(small.Nodes), median(ratios), fmtDur(median(bigNs)), fmtDur(median(smallNs)),
		slices.Min(ratios), slices.Max(ratios), len(ratios))
	return nil
}

// timeCLI runs patrdb --db path args... once to warm the page cache, then
// reps times, and returns each run's wall time and CPU time (user + sys)
// in seconds.
func timeCLI(exe, path string, reps int, args ...string) (wall, cpu []float64, err error) {
	run := func() (float64, error) {
		cmd := exec.Command(exe, append([]string{"--db", path}, args...)...)
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("patrdb %s: %v: %s", strings.Join(args, " "), err, out)
		}
		el := time.Since(t0).Seconds()
		cpu = append(cpu, (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds())
		return el, nil
	}
	wall, err = warmReps(reps, run)
	if len(cpu) > 0 {
		cpu = cpu[1:] // the warm-up's
	}
	return wall, cpu, err
}

// buildPatrdb builds the patrdb command of the module at root into exe.
func buildPatrdb(root, exe string, log io.Writer) error {
	build := exec.Command("go", "build", "-o", exe, "./cmd/patrdb")
	build.Dir, build.Stdout, build.Stderr = root, log, log
	if err := build.Run(); err != nil {
		return fmt.Errorf("building patrdb: %w", err)
	}
	return nil
}

// summaryCommands are the commands whose cold time on a big file must
// stay near the small file's: they read a run's summary.
var summaryCommands = [][]string{{"runs"}, {"show", benchRun}}

// coldBatchStep is the step `patrdb batch` reads in the cold figure: the
// first batch of every resume store, the same trees in each, so the two
// files differ only in what else they hold.
const coldBatchStep = 1

// coldCommand is a command the main run times cold: its label in the
// Targets table and its arguments.
type coldCommand struct {
	label string
	args  []string
}

// coldCommands are summaryCommands and `patrdb batch` of coldBatchStep,
// written under out.
func coldCommands(out string) []coldCommand {
	var cs []coldCommand
	for _, args := range summaryCommands {
		cs = append(cs, coldCommand{strings.Join(args, " "), args})
	}
	step := strconv.Itoa(coldBatchStep)
	return append(cs, coldCommand{"batch " + benchRun + " --step " + step,
		[]string{"batch", benchRun, "--step", step, "--out", filepath.Join(out, "cold-batch.safetensors"), "--force"}})
}

// coldCLI is one command timed cold on the anchor and the big file.
type coldCLI struct {
	small, big, ratios []float64 // seconds; big ÷ small of each repetition
	smallKB, bigKB     []float64 // read from the device (the child's rusage)
}

// timeCLICold runs patrdb --db path args... on the small and the big file
// alternating, reps times each, the file evicted from the page cache
// before each run.
func timeCLICold(exe, small, big string, reps int, args ...string) (coldCLI, error) {
	var c coldCLI
	run := func(path string) (sec, kb float64, err error) {
		if err := dropCache(path); err != nil {
			return 0, 0, err
		}
		cmd := exec.Command(exe, append([]string{"--db", path}, args...)...)
		t0 := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			return 0, 0, fmt.Errorf("patrdb %s: %v: %s", strings.Join(args, " "), err, out)
		}
		sec = time.Since(t0).Seconds()
		return sec, inblockKB(cmd.ProcessState), nil
	}
	for range reps {
		s, skb, err := run(small)
		if err != nil {
			return c, err
		}
		b, bkb, err := run(big)
		if err != nil {
			return c, err
		}
		c.small, c.big, c.ratios = append(c.small, s), append(c.big, b), append(c.ratios, b/s)
		c.smallKB, c.bigKB = append(c.smallKB, skb), append(c.bigKB, bkb)
	}
	return c, nil
}

// row prints c as a row of the bigfile table: the big file's time, its
// ratio to the anchor's and what each read from the device.
func (c coldCLI) row(w io.Writer, name, bigN, smallN string) {
	fmt.Fprintf(w, "| `patrdb %s`, cold (file evicted before each), %s ÷ %s nodes | %.1f× (%s vs %s; read %.0f vs %.0f KB) | %.1f×–%.1f× | %d | ≤ 10× |\n",
		name, bigN, smallN, median(c.ratios), fmtSec(median(c.big)), fmtSec(median(c.small)), median(c.bigKB), median(c.smallKB),
		slices.Min(c.ratios), slices.Max(c.ratios), len(c.ratios))
}

// latestReader is what `tree RUN latest` reads of a run.
type latestReader interface {
	LatestGroup() (model.Group, error)
	GroupNodes(g model.Group) ([]model.Node, error)
	Advantages(step, group uint64) ([]model.Advantage, error)
}

// latestMode is how timeLatest's reads trust the file.
type latestMode int

const (
	latestPlain   latestMode = iota // the plain handle: the file is trusted
	latestChecked                   // each read checks the pages and records it touches
	latestWalkAll                   // every page of the file walked once at open, then plain reads
)

func (m latestMode) String() string {
	switch m {
	case latestChecked:
		return " with checked reads (each checks the pages and records it touches)"
	case latestWalkAll:
		return " after walking every page of the file once at open (Check of CheckPages)"
	}
	return ", the file trusted"
}

func warmCold(cold bool) string {
	if cold {
		return "cold (file evicted before each)"
	}
	return "warm"
}

// timeLatest is `tree RUN latest` without the command: open read-only, the
// newest group by cursor, its nodes and advantages, with the file trusted,
// checked as it is read, or walked whole first (mode); cold evicts the
// file from the page cache before each repetition.
func timeLatest(path string, reps int, mode latestMode, cold bool) ([]float64, error) {
	once := func() (float64, error) {
		if cold {
			if err := dropCache(path); err != nil {
				return 0, err
			}
		}
		t0 := time.Now()
		o := store.DefaultOptions()
		o.ReadOnly = true
		db, err := store.Open(path, o)
		if err != nil {
			return 0, err
		}
		err = db.View(func(tx *store.Tx) error {
			var r latestReader
			var err error
			switch mode {
			case latestChecked:
				if err = tx.CheckReads(); err == nil {
					r, err = tx.Run(benchRun)
				}
			case latestWalkAll:
				if _, err = tx.Check(&store.CheckOptions{Parts: store.CheckPages}); err == nil {
					r, err = tx.Run(benchRun)
				}
			default:
				r, err = tx.Run(benchRun)
			}
			if err != nil {
				return err
			}
			g, err := r.LatestGroup()
			if err != nil {
				return err
			}
			if _, err := r.GroupNodes(g); err != nil {
				return err
			}
			_, err = r.Advantages(g.Step, g.ID)
			return err
		})
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		return time.Since(t0).Seconds(), err
	}
	return warmReps(reps, once)
}

// warmReps runs fn once to warm the caches, then reps times, and returns
// what each of those returned.
func warmReps(reps int, fn func() (float64, error)) ([]float64, error) {
	if _, err := fn(); err != nil {
		return nil, err
	}
	xs := make([]float64, 0, reps)
	for range reps {
		x, err := fn()
		if err != nil {
			return nil, err
		}
		xs = append(xs, x)
	}
	return xs, nil
}

// checkRSS runs patrdb check on path and samples the child's RssAnon and
// VmHWM (kB) from /proc every 20 ms; it returns the wall time in seconds
// and the peaks in kB.
func checkRSS(exe, path string) (wall float64, anon, hwm int64, err error) {
	cmd := exec.Command(exe, "--db", path, "check")
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				return 0, 0, 0, fmt.Errorf("patrdb check: %w", err)
			}
			return time.Since(t0).Seconds(), anon, hwm, nil
		case <-tick.C:
			a, h := procKB(status, "RssAnon:"), procKB(status, "VmHWM:")
			anon, hwm = max(anon, a), max(hwm, h)
		}
	}
}

// procKB reads a "Name:  123 kB" field of a /proc status file (0 when it
// cannot).
func procKB(path, field string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

func medianInt(xs []int64) float64 {
	f := make([]float64, len(xs))
	for i, x := range xs {
		f[i] = float64(x)
	}
	return median(f)
}

func fmtCount(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// fmtSec formats seconds.
func fmtSec(sec float64) string { return fmtDur(sec * 1e9) }
