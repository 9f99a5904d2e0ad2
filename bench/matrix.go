package main

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/patrdb/patrdb/internal/workload"
	"github.com/patrdb/patrdb/store"
)

// The append matrix: turn appends through patrdb's public API against
// anchors measured in the same run, with the same commits — raw bbolt
// putting the very keys and values patrdb stores (every record a
// transaction changes, each bucket's keys in order), with the turns
// encoded inside the transaction or everything encoded ahead of it; the
// disk floor (one pwrite + fdatasync of those bytes per commit); raw
// bbolt putting only the turns and node records (what is left with no
// event log, indexes or counters); SQLite (WAL, synchronous=FULL); and a
// JSONL full-trajectory dump fsynced per commit — at three turn sizes and
// two commit sizes. Every contender takes each transaction in turn (the
// order rotating), fsync on, so a burst of load elsewhere on the machine
// falls on all alike; each figure is the median over repetitions of a
// ratio taken within one repetition.

var matrixContenders = []string{cPatrdb, cPatrdbEnc, cSameInside, cSameAhead, cFloor, cBoltInside, cSQLite, cJSONL}

// matrixSize is one turn size: its workload and how many batches of
// matrixTrees trees one repetition writes.
type matrixSize struct {
	name    string
	flag    string // its name in -matrix-sizes
	cfg     workload.Config
	batches int
}

// matrixTrees trees per batch make a round (one interval of the batch) of
// about 60 turns; a step commit holds matrixStep batches (~1,300 turns).
const (
	matrixTrees = 2
	matrixStep  = 3
)

func matrixSizes(seed uint64, smoke bool) []matrixSize {
	shape := func(c workload.Config) workload.Config {
		c.Trees, c.Tree.K, c.Tree.MaxTurns = matrixTrees, 5, 40
		return c
	}
	tiny := shape(workload.FrozenLakeConfig(seed))
	medium := shape(workload.SWEConfig(seed))
	medium.ActionTokens, medium.ObservationTokens, medium.BytesPerToken, medium.PromptBytes = 40, 80, 4, 512
	llm := shape(workload.SWEConfig(seed))
	llm.ActionTokens, llm.ObservationTokens, llm.BytesPerToken = 400, 600, 4
	// Enough batches for at least four step commits a repetition at every
	// size (eight below ~10 KB): one slow fsync then decides less of a
	// repetition's ratio.
	n := 2 * matrixStep
	if smoke {
		n = 1
	}
	return []matrixSize{{"tiny", matrixSizeFlags[0], tiny, 4 * n}, {"~1 KB", matrixSizeFlags[1], medium, 4 * n}, {"~10 KB", matrixSizeFlags[2], llm, 2 * n}}
}

// The names -matrix-sizes and -matrix-commits take.
var (
	matrixSizeFlags   = []string{"tiny", "1kb", "10kb"}
	matrixCommitNames = []string{"round", "step"}
)

// matrixCell is one (turn size, commit size) of one repetition.
type matrixCell struct {
	size, commit string
	txns, turns  int
	turnBytes    int64
	res          map[string]appendResult
}

// runMatrix measures every cell reps times and writes the markdown report
// to w.
func runMatrix(cfg config, w io.Writer) error {
	var cells [][]matrixCell // [cell][rep]
	for _, sz := range matrixSizes(cfg.Seed, cfg.Smoke) {
		if !slices.Contains(cfg.MatrixSizes, sz.flag) {
			continue
		}
		batches, step, err := matrixBatches(sz)
		if err != nil {
			return err
		}
		for _, commit := range []struct {
			name    string
			batches []workload.Batch
		}{{matrixCommitNames[0], batches}, {matrixCommitNames[1], []workload.Batch{step}}} {
			if !slices.Contains(cfg.MatrixCommits, commit.name) {
				continue
			}
			var reps []matrixCell
			for rep := range cfg.Reps {
				cell, err := runMatrixCell(cfg, matrixContenders, sz.name, commit.name, commit.batches, rep)
				if err != nil {
					return err
				}
				fmt.Fprintf(cfg.Log, "matrix %s %s rep %d: patrdb %.0f turns/s, raw bbolt %.0f, floor %.0f\n", sz.name, commit.name, rep+1,
					cell.res[cPatrdb].turnsPerSec(), cell.res[cSameInside].turnsPerSec(), cell.res[cFloor].turnsPerSec())
				reps = append(reps, cell)
			}
			cells = append(cells, reps)
		}
	}
	return writeMatrix(w, cfg, cells)
}

// matrixBatches generates sz's batches, and the same batches as step
// commits: one transaction per matrixStep batches.
func matrixBatches(sz matrixSize) ([]workload.Batch, workload.Batch, error) {
	gen, err := workload.NewGenerator(sz.cfg)
	if err != nil {
		return nil, workload.Batch{}, err
	}
	var batches []workload.Batch
	for range sz.batches {
		batches = append(batches, gen.Next())
	}
	step := workload.Batch{}
	for _, b := range batches {
		step.Stats.Add(b.Stats)
	}
	for i := 0; i < len(batches); i += matrixStep {
		var txn []workload.Op
		for _, b := range batches[i:min(i+matrixStep, len(batches))] {
			for _, t := range b.Txns {
				txn = append(txn, t...)
			}
		}
		step.Txns = append(step.Txns, txn)
	}
	return batches, step, nil
}

// runMatrixCell runs the contenders names through batches, side by side.
func runMatrixCell(cfg config, names []string, size, commit string, batches []workload.Batch, rep int) (matrixCell, error) {
	dir := filepath.Join(cfg.Out, "matrix")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return matrixCell{}, err
	}
	cs := make([]contender, len(names))
	paths := make([]string, len(names))
	for i, name := range names {
		c, err := newContender(name)
		if err != nil {
			return matrixCell{}, err
		}
		if cfg.PageSize != 0 {
			switch c := c.(type) {
			case *patrdbC:
				c.opts = store.DefaultOptions()
				c.opts.PageSize = cfg.PageSize
			case *boltC:
				c.pageSize = cfg.PageSize
			case *sameC:
				c.pageSize = cfg.PageSize
			}
		}
		cs[i], paths[i] = c, filepath.Join(dir, fileName(name))
	}
	res, err := runAppendAll(cs, paths, batches, rep, cfg.Collect)
	if err != nil {
		return matrixCell{}, err
	}
	cell := matrixCell{size: size, commit: commit, res: map[string]appendResult{}}
	for i, name := range names {
		cell.res[name] = res[i]
	}
	for _, b := range batches {
		cell.txns += len(b.Txns)
		cell.turns += b.Stats.Turns
		cell.turnBytes += b.Stats.TurnBytes
	}
	for _, p := range paths {
		_ = removeStore(p)
	}
	return cell, nil
}

// ratioStat is the median and range over repetitions of f(rep).
func ratioStat(reps []matrixCell, f func(matrixCell) float64) string {
	xs := make([]float64, len(reps))
	for i, c := range reps {
		xs[i] = f(c)
	}
	slices.Sort(xs)
	if len(xs) == 1 {
		return fmt.Sprintf("%.2f×", xs[0])
	}
	return fmt.Sprintf("%.2f× (%.2f–%.2f)", xs[len(xs)/2], xs[0], xs[len(xs)-1])
}

func speed(a, b string) func(matrixCell) float64 {
	return func(c matrixCell) float64 { return c.res[a].turnsPerSec() / c.res[b].turnsPerSec() }
}

func writeMatrix(w io.Writer, cfg config, cells [][]matrixCell) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Command: `%s` (page size %d KiB; %d repetitions; medians with min–max of per-repetition ratios).\n\n",
		cfg.Command, cmp.Or(cfg.PageSize, store.DefaultOptions().PageSize)>>10, cfg.Reps)
	b.WriteString("| turns | commit | turns/commit | patrdb turns/s | ÷ raw bbolt, same bytes, turns encoded inside | encoded ahead ÷ raw bbolt, same bytes, encoded ahead | ÷ disk floor, same bytes | ÷ raw bbolt, turns and nodes only | ÷ SQLite | ÷ JSONL |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, reps := range cells {
		c := reps[0]
		tps := make([]float64, len(reps))
		for i, r := range reps {
			tps[i] = r.res[cPatrdb].turnsPerSec()
		}
		slices.Sort(tps)
		fmt.Fprintf(&b, "| %s | %s | %d | %.0f | %s | %s | %s | %s | %s | %s |\n", c.size, c.commit, c.turns/max(c.txns, 1), tps[len(tps)/2],
			ratioStat(reps, speed(cPatrdb, cSameInside)), ratioStat(reps, speed(cPatrdbEnc, cSameAhead)),
			ratioStat(reps, speed(cPatrdb, cFloor)), ratioStat(reps, speed(cPatrdb, cBoltInside)),
			ratioStat(reps, speed(cPatrdb, cSQLite)), ratioStat(reps, speed(cPatrdb, cJSONL)))
	}
	b.WriteString("\nWhere a commit's time goes, milliseconds per commit (medians over repetitions): bbolt's commit — its spill and page writes, fsyncs included, from bbolt's TxStats — and the rest of the timed call: for raw bbolt its Puts (and encoding, inside), for patrdb its Puts and its own work per API call.\n\n")
	b.WriteString("| turns | commit | bbolt's commit: patrdb | raw bbolt, same bytes | the rest, encoded inside: patrdb | raw bbolt | the rest, encoded ahead: patrdb | raw bbolt |\n|---|---|---|---|---|---|---|---|\n")
	for _, reps := range cells {
		c := reps[0]
		ms := func(name string, rest bool) string {
			xs := make([]float64, len(reps))
			for i, r := range reps {
				res := r.res[name]
				x := res.Commit
				if rest {
					x = res.Seconds - res.Commit
				}
				xs[i] = 1e3 * x / float64(max(res.Txns, 1))
			}
			slices.Sort(xs)
			return fmt.Sprintf("%.2f", xs[len(xs)/2])
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", c.size, c.commit, ms(cPatrdb, false), ms(cSameInside, false),
			ms(cPatrdb, true), ms(cSameInside, true), ms(cPatrdbEnc, true), ms(cSameAhead, true))
	}
	b.WriteString("\nBytes on disk (allocated blocks after close) per byte of turn payload (text + 4 bytes per token id and logprob):\n\n")
	b.WriteString("| turns | commit | payload | patrdb ÷ payload | patrdb ÷ JSONL | raw bbolt, turns and nodes only, ÷ payload | SQLite ÷ payload |\n|---|---|---|---|---|---|---|\n")
	for _, reps := range cells {
		c := reps[len(reps)-1]
		disk := func(name string) float64 { return float64(c.res[name].Disk) }
		fmt.Fprintf(&b, "| %s | %s | %.1f MB | %.2f× | %.2f× | %.2f× | %.2f× |\n", c.size, c.commit, float64(c.turnBytes)/1e6,
			disk(cPatrdb)/float64(c.turnBytes), disk(cPatrdb)/disk(cJSONL), disk(cBoltInside)/float64(c.turnBytes), disk(cSQLite)/float64(c.turnBytes))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
