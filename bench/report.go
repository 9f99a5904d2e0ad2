package main

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/patrdb/patrdb/bench/batchmeasure"
	"github.com/patrdb/patrdb/store"
)

// target is a bound a figure's ratio must respect; op "" means the figure
// is reported without one.
type target struct {
	op string // ">=" or "<="
	v  float64
}

func (t target) String() string {
	switch t.op {
	case ">=":
		return "≥ " + trimFloat(t.v) + "×"
	case "<=":
		return "≤ " + trimFloat(t.v) + "×"
	}
	return "—"
}

// verdict: met when every repetition meets the target, not met when none
// does, inconclusive when the min–max spread crosses it.
func (t target) verdict(xs []float64) string {
	if t.op == "" || len(xs) == 0 {
		return "—"
	}
	lo, hi := slices.Min(xs), slices.Max(xs)
	switch {
	case t.op == ">=" && lo >= t.v, t.op == "<=" && hi <= t.v:
		return "**met**"
	case t.op == ">=" && hi < t.v, t.op == "<=" && lo > t.v:
		return "**not met**"
	}
	return "inconclusive"
}

// figure is one row of the main table: a ratio per repetition, with the
// raw values it came from.
type figure struct {
	name     string
	measured string
	anchor   string
	ratios   []float64
	target   target
}

func spread(xs []float64, f func(float64) string) string {
	if len(xs) == 0 {
		return "—"
	}
	if len(xs) == 1 {
		return f(xs[0])
	}
	return fmt.Sprintf("%s (%s–%s)", f(median(xs)), f(slices.Min(xs)), f(slices.Max(xs)))
}

func trimFloat(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

func fmtRatio(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f×", x)
	case x >= 10:
		return fmt.Sprintf("%.1f×", x)
	}
	return fmt.Sprintf("%.2f×", x)
}

// fmtSI prints x with a k/M/G suffix and three significant digits.
func fmtSI(x float64) string {
	suffix := ""
	for _, s := range []string{"k", "M", "G"} {
		if x < 1000 {
			break
		}
		x /= 1000
		suffix = s
	}
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f%s", x, suffix)
	case x >= 10:
		return fmt.Sprintf("%.1f%s", x, suffix)
	}
	return fmt.Sprintf("%.2f%s", x, suffix)
}

func fmtDur(ns float64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%.2f s", ns/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.1f µs", ns/1e3)
	}
	return fmt.Sprintf("%.0f ns", ns)
}

func fmtMB(b float64) string { return fmt.Sprintf("%.2f MB", b/1e6) }

func (res *results) series(fn func(repResult) float64) []float64 {
	out := make([]float64, len(res.reps))
	for i, r := range res.reps {
		out[i] = fn(r)
	}
	return out
}

func (res *results) appendSeries(name string, fn func(appendResult) float64) []float64 {
	return res.series(func(r repResult) float64 { return fn(r.Append[name]) })
}

// stepTPS is contender name's turns/s at step size flag (targetStepSizes).
func (res *results) stepTPS(flag, name string) []float64 {
	return res.series(func(r repResult) float64 { return r.Step[flag].res[name].turnsPerSec() })
}

// stepFigure is the append target of step size ts, from its cell in
// each repetition.
func stepFigure(ts targetStep, reps []matrixCell) figure {
	tps := func(name string) []float64 {
		out := make([]float64, len(reps))
		for i, c := range reps {
			out[i] = c.res[name].turnsPerSec()
		}
		return out
	}
	c := reps[0]
	return figure{
		name: fmt.Sprintf("same, %s turns (%.0f bytes a turn; the append matrix's step commits, %d turns a commit), turns encoded inside",
			ts.size.name, float64(c.turnBytes)/float64(max(c.turns, 1)), c.turns/max(c.txns, 1)),
		measured: "patrdb: " + spread(tps(cPatrdb), fmtSI) + " turns/s", anchor: cSameInside + ": " + spread(tps(cSameInside), fmtSI) + " turns/s",
		ratios: ratio(tps(cPatrdb), tps(cSameInside)), target: target{">=", ts.min},
	}
}

// batchNs is side's time of the batch figures, in nanoseconds.
func (res *results) batchNs(side batchmeasure.Side) []float64 {
	return res.series(func(r repResult) float64 { return r.Batch.Wall[side][0] * 1e9 })
}

func ratio(a, b []float64) []float64 {
	out := make([]float64, len(a))
	for i := range a {
		out[i] = a[i] / b[i]
	}
	return out
}

func sizeLabel(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "M"
	case n >= 1000 && n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

func (res *results) figures() []figure {
	var figs []figure
	tps := func(n string) []float64 { return res.appendSeries(n, appendResult.turnsPerSec) }
	mbs := func(n string) []float64 { return res.appendSeries(n, appendResult.mbPerSec) }
	desc := func(n string) string {
		return fmt.Sprintf("%s: %s turns/s, %s MB/s", n, spread(tps(n), fmtSI), spread(mbs(n), fmtSI))
	}
	perTxn := float64(res.stats.Turns) / float64(max(res.txns, 1))
	// vs is the append figure of contender p against anchor a.
	vs := func(name, p, a string, t target) figure {
		return figure{name: name, measured: desc(p), anchor: desc(a), ratios: ratio(tps(p), tps(a)), target: t}
	}
	// The append targets, against raw bbolt putting patrdb's own bytes:
	// these turns are LLM-sized and a transaction is step-sized; the
	// smaller sizes follow.
	figs = append(figs,
		vs(fmt.Sprintf("turn append vs raw bbolt putting patrdb's bytes, turns encoded inside the transaction (LLM turns, %.0f turns a commit)", perTxn),
			cPatrdb, cSameInside, target{">=", 0.85}),
		vs("same, turns encoded ahead (EncodeTurns, AppendEncodedTurns; the anchor's encoded before its transaction too)",
			cPatrdbEnc, cSameAhead, target{">=", 0.85}))
	// The same target at the matrix's smaller turn sizes, step commits.
	for _, ts := range res.steps {
		cells := make([]matrixCell, len(res.reps))
		for i, r := range res.reps {
			cells[i] = r.Step[ts.size.flag]
		}
		figs = append(figs, stepFigure(ts, cells))
	}
	figs = append(figs,
		vs("turn append vs raw bbolt putting the turns and each touched node's record only (no event log, indexes, groups or counters)",
			cPatrdb, cBolt, target{}),
		vs("turn append vs SQLite (step-sized commits)", cPatrdb, cSQLite, target{">=", 2}),
		vs("turn append vs a JSONL full-trajectory dump", cPatrdb, cJSONL, target{">=", 2}))
	disk := func(n string) []float64 { return res.appendSeries(n, appendResult.diskPerTree) }
	payload := res.appendSeries(cPatrdb, func(a appendResult) float64 { return float64(a.TurnBytes) / float64(a.Trees) })
	figs = append(figs,
		figure{
			name:     "bytes on disk per tree vs the raw turn payload (text + 4 bytes per token id and logprob)",
			measured: "patrdb: " + spread(disk(cPatrdb), fmtMB), anchor: "payload: " + spread(payload, fmtMB),
			ratios: ratio(disk(cPatrdb), payload), target: target{"<=", 1.2},
		},
		figure{
			name:     "bytes on disk per tree vs JSONL",
			measured: "patrdb: " + spread(disk(cPatrdb), fmtMB), anchor: "JSONL: " + spread(disk(cJSONL), fmtMB),
			ratios: ratio(disk(cPatrdb), disk(cJSONL)), target: target{"<=", 0.45},
		})
	first, last := 0, len(res.resume)-1
	rs := func(i int) []float64 { return res.series(func(r repResult) float64 { return r.Resume[i].WarmNs }) }
	figs = append(figs, figure{
		name:     fmt.Sprintf("resume (open + load frontier), %s vs %s nodes", sizeLabel(res.resume[last].Target), sizeLabel(res.resume[first].Target)),
		measured: fmt.Sprintf("%d nodes: %s", res.resume[last].Nodes, spread(rs(last), fmtDur)),
		anchor:   fmt.Sprintf("%d nodes: %s", res.resume[first].Nodes, spread(rs(first), fmtDur)),
		ratios:   ratio(rs(last), rs(first)), target: target{"<=", 1.2},
	})
	for _, cc := range coldCommands(res.cfg.Out) {
		name := cc.label
		if res.reps[0].SummaryCold == nil {
			break
		}
		small := res.series(func(r repResult) float64 { return r.SummaryCold[name].small[0] * 1e9 })
		big := res.series(func(r repResult) float64 { return r.SummaryCold[name].big[0] * 1e9 })
		figs = append(figs, figure{
			name:     fmt.Sprintf("`patrdb %s`, cold (a fresh process, file evicted before each), %s vs %s nodes", name, sizeLabel(res.resume[last].Target), sizeLabel(res.resume[first].Target)),
			measured: fmt.Sprintf("%d nodes: %s", res.resume[last].Nodes, spread(big, fmtDur)),
			anchor:   fmt.Sprintf("%d nodes: %s", res.resume[first].Nodes, spread(small, fmtDur)),
			ratios:   ratio(big, small), target: target{"<=", 10},
		})
	}
	warm := res.series(func(r repResult) float64 { return r.Traj.WarmNs })
	cp := res.series(func(r repResult) float64 { return r.Traj.CopyNs })
	tr := res.reps[0].Traj
	cpDesc := fmt.Sprintf("bytes.Clone of %s: %s", fmtMB(float64(tr.Bytes)), spread(cp, fmtDur))
	figs = append(figs, figure{
		name:     fmt.Sprintf("trajectory of a %d-turn leaf, warm", tr.Turns),
		measured: "Trajectory: " + spread(warm, fmtDur), anchor: cpDesc,
		ratios: ratio(warm, cp),
	})
	if res.reps[0].Traj.ColdNs > 0 {
		cold := res.series(func(r repResult) float64 { return r.Traj.ColdNs })
		figs = append(figs, figure{
			name:     fmt.Sprintf("trajectory of a %d-turn leaf, cold (reopened, file evicted from the page cache)", tr.Turns),
			measured: "Trajectory: " + spread(cold, fmtDur), anchor: cpDesc,
			ratios: ratio(cold, cp),
		})
	}
	bw := res.batchNs
	bs := res.batchStep
	figs = append(figs,
		figure{
			name:     fmt.Sprintf("training batch of one step (%d rows, %d tokens), buffers reused (batchdb.ReadInto) vs memcpy of the same bytes", bs.Rows, bs.Tokens),
			measured: "ReadInto: " + spread(bw(batchmeasure.ReadInto), fmtDur),
			anchor:   fmt.Sprintf("memcpy of %s: %s", fmtMB(float64(bs.Bytes)), spread(bw(batchmeasure.Memcpy), fmtDur)),
			ratios:   ratio(bw(batchmeasure.ReadInto), bw(batchmeasure.Memcpy)), target: target{"<=", 1.5},
		},
		figure{
			name:     "the same batch through the Go client over HTTP (client.ReadBatch: the step's source on loopback, built by batch.Assemble) vs the in-process call (batchdb.Read, fresh buffers)",
			measured: "HTTP: " + spread(bw(batchmeasure.HTTP), fmtDur), anchor: "batchdb.Read: " + spread(bw(batchmeasure.Read), fmtDur),
			ratios: ratio(bw(batchmeasure.HTTP), bw(batchmeasure.Read)), target: target{"<=", 2},
		})
	pc := res.series(func(r repResult) float64 { return r.Point.CachedNs })
	pu := res.series(func(r repResult) float64 { return r.Point.UncachedNs })
	figs = append(figs, figure{
		name:     "point read of a node (RunTx.Node), LRU vs no LRU",
		measured: "CacheNodes default: " + spread(pc, fmtDur), anchor: "no node cache: " + spread(pu, fmtDur),
		ratios: ratio(pc, pu),
	})
	rp := res.series(func(r repResult) float64 { return r.Replay.replayPerSec() })
	wk := res.series(func(r repResult) float64 { return r.Replay.walkPerSec() })
	million := make([]float64, len(rp))
	for i := range million {
		million[i] = 1e6
	}
	figs = append(figs,
		figure{
			name:     "replay scan rate",
			measured: "RunTx.Events: " + spread(rp, fmtSI) + " events/s", anchor: "1,000,000 events/s",
			ratios: ratio(rp, million), target: target{">=", 1},
		},
		figure{
			name:     "replay scan vs bare cursor walk",
			measured: "RunTx.Events: " + spread(rp, fmtSI) + " events/s", anchor: "cursor walk: " + spread(wk, fmtSI) + " events/s",
			ratios: ratio(rp, wk),
		},
		figure{
			name:     "replay scan vs cursor walk that CRC-checks and copies each event",
			measured: "RunTx.Events: " + spread(rp, fmtSI) + " events/s",
			anchor:   "walk + CRC32C + copy: " + spread(res.series(func(r repResult) float64 { return r.Replay.copyPerSec() }), fmtSI) + " events/s",
			ratios:   ratio(rp, res.series(func(r repResult) float64 { return r.Replay.copyPerSec() })), target: target{">=", 0.8},
		})
	if res.reps[0].RSS != nil {
		rss := func(n string) []float64 { return res.series(func(r repResult) float64 { return float64(r.RSS[n]) }) }
		figs = append(figs, figure{
			name:     "peak RSS of an append run vs raw bbolt",
			measured: "patrdb: " + spread(rss(cPatrdb), fmtMB), anchor: "raw bbolt: " + spread(rss(cBolt), fmtMB),
			ratios: ratio(rss(cPatrdb), rss(cBolt)),
		})
	}
	return figs
}

// table is the main Markdown table.
func (res *results) table() string { return figureTable(res.figures()) }

// figureTable is figs as the main table's markdown.
func figureTable(figs []figure) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| figure | measured, median (min–max) | anchor, median (min–max) | ratio | ratio min–max | target | verdict |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|\n")
	for _, f := range figs {
		lo, hi := slices.Min(f.ratios), slices.Max(f.ratios)
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s–%s | %s | %s |\n", f.name, f.measured, f.anchor,
			fmtRatio(median(f.ratios)), fmtRatio(lo), fmtRatio(hi), f.target, f.target.verdict(f.ratios))
	}
	return b.String()
}

// details are the per-contender, per-size and workload tables.
func (res *results) details() string {
	var b strings.Builder
	s := res.stats
	tf := float64(s.Trees)
	fmt.Fprintf(&b, "### Workload (swe-like, seed %d)\n\n", res.cfg.Seed)
	fmt.Fprintf(&b, "%d batch(es) of %d trees; %d transactions (one per interval of a batch), written %d times a repetition. Per tree: %.1f nodes, %.1f leaves "+
		"(%.1f pruned by routing, %.1f reaching the %d-turn cap), %.0f turns stored (%.2f MB), %.0f turns in the leaves' full trajectories. "+
		"Mean turn %.1f KB (text + packed token ids and logprobs).\n\n",
		res.cfg.Batches, res.cfg.Trees, res.txns, appendPasses, float64(s.Nodes)/tf, float64(s.Leaves)/tf, float64(s.Pruned)/tf, float64(s.Full)/tf, 50,
		float64(s.Turns)/tf, float64(s.TurnBytes)/tf/1e6, float64(s.PathTurns)/tf, float64(s.TurnBytes)/float64(s.Turns)/1e3)

	fmt.Fprintf(&b, "### Append run per contender\n\n")
	fmt.Fprintf(&b, "| contender | turns/s | MB/s | patrdb ÷ it | raw bbolt ÷ it | slowest transaction | bytes on disk per tree | apparent file size per tree | peak RSS |\n|---|---|---|---|---|---|---|---|---|\n")
	names := appendContenders
	ptps := res.appendSeries(cPatrdb, appendResult.turnsPerSec)
	btps := res.appendSeries(cBolt, appendResult.turnsPerSec)
	for _, n := range names {
		tps := res.appendSeries(n, appendResult.turnsPerSec)
		rss := "—"
		if _, ok := res.reps[0].RSS[n]; ok {
			rss = spread(res.series(func(r repResult) float64 { return float64(r.RSS[n]) }), fmtMB)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", n, spread(tps, fmtSI),
			spread(res.appendSeries(n, appendResult.mbPerSec), fmtSI), spread(ratio(ptps, tps), fmtRatio), spread(ratio(btps, tps), fmtRatio),
			spread(res.appendSeries(n, func(a appendResult) float64 { return a.Slowest * 1e9 }), fmtDur),
			spread(res.appendSeries(n, appendResult.diskPerTree), fmtMB),
			spread(res.appendSeries(n, func(a appendResult) float64 { return float64(a.Apparent) / float64(a.Trees) }), fmtMB), rss)
	}
	if res.reps[0].RSS != nil {
		fmt.Fprintf(&b, "| %s (generates and copies every transaction, stores nothing) | — | — | — | — | — | — | — | %s |\n", cHarness,
			spread(res.series(func(r repResult) float64 { return float64(r.RSS[cHarness]) }), fmtMB))
	}
	fmt.Fprintf(&b, "\nMB/s counts the turns' logical bytes (text + 4 bytes per token id and logprob), the same for every contender. "+
		"Bytes on disk: the blocks the store's files occupy after close (SQLite: database + WAL + shm); "+
		"a bbolt file grows by truncation, so its last few MB are a hole that takes no disk and the apparent size is larger.\n\n")

	if len(res.layout) > 0 {
		fmt.Fprintf(&b, "Where patrdb's file goes (repetition 1, RunTx.BucketSizes): %s written up to the high-water mark, %s of it free pages.\n\n",
			fmtMB(float64(res.highWater)), fmtMB(float64(res.freeBytes)))
		fmt.Fprintf(&b, "| bucket | keys | pages allocated | bytes in use | in use |\n|---|---|---|---|---|\n")
		for _, l := range res.layout {
			if l.Keys == 0 {
				continue
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %.0f%% |\n", l.Name, l.Keys, fmtMB(float64(l.Bytes)), fmtMB(float64(l.Used)),
				100*float64(l.Used)/float64(max(l.Bytes, 1)))
		}
		fmt.Fprintf(&b, "\nThe workload's turns are %s of logical bytes (%s per tree).\n\n", fmtMB(float64(res.stats.TurnBytes)),
			fmtMB(float64(res.stats.TurnBytes)/float64(res.stats.Trees)))
	}
	if len(res.pageSizes) > 0 {
		jsonl := res.reps[0].Append[cJSONL].diskPerTree()
		fmt.Fprintf(&b, "The same append run through patrdb in a file created with each page size (repetition 1, NoSync: bytes only; "+
			"every timed figure above uses the default, %d KiB):\n\n", store.DefaultOptions().PageSize>>10)
		fmt.Fprintf(&b, "| page size | bytes on disk per tree | ÷ JSONL | turns bucket pages | turns bucket in use |\n|---|---|---|---|---|\n")
		for _, p := range res.pageSizes {
			per := float64(p.Disk) / float64(p.Trees)
			fmt.Fprintf(&b, "| %d KiB | %s | %s | %s | %.0f%% |\n", p.PageSize>>10, fmtMB(per), fmtRatio(per/jsonl),
				fmtMB(float64(p.TurnPages)), 100*float64(p.TurnUsed)/float64(max(p.TurnPages, 1)))
		}
		b.WriteString("\n")
	}

	ls := res.lakeStats
	lf := float64(ls.Trees)
	fmt.Fprintf(&b, "### Append run, frozenlake workload (tiny turns, where per-record costs dominate; no target: the tiny-turn target is the step-commit run below)\n\n")
	fmt.Fprintf(&b, "Same harness and transaction boundaries: %d batch(es) of %d trees, %d transactions; per tree %.1f nodes and %.0f turns of %.0f bytes.\n\n",
		res.cfg.Batches, res.cfg.Trees, res.lakeTxns, float64(ls.Nodes)/lf, float64(ls.Turns)/lf, float64(ls.TurnBytes)/float64(max(ls.Turns, 1)))
	fmt.Fprintf(&b, "| contender | turns/s | patrdb ÷ it | raw bbolt ÷ it | bytes on disk per tree |\n|---|---|---|---|---|\n")
	lake := func(n string, fn func(appendResult) float64) []float64 {
		return res.series(func(r repResult) float64 { return fn(r.Lake[n]) })
	}
	plake := lake(cPatrdb, appendResult.turnsPerSec)
	blake := lake(cBolt, appendResult.turnsPerSec)
	for _, n := range names {
		tps := lake(n, appendResult.turnsPerSec)
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", n, spread(tps, fmtSI), spread(ratio(plake, tps), fmtRatio), spread(ratio(blake, tps), fmtRatio),
			spread(lake(n, appendResult.diskPerTree), func(x float64) string { return fmt.Sprintf("%.1f KB", x/1e3) }))
	}
	b.WriteString("\n")

	if len(res.steps) > 0 {
		fmt.Fprintf(&b, "### Append run at ~1 KB and tiny turns (the append matrix's step commits)\n\n")
		fmt.Fprintf(&b, "| turns | trees written | commits | turns a commit | bytes a turn | patrdb turns/s | raw bbolt, patrdb's bytes, turns encoded inside | patrdb bytes on disk per turn |\n|---|---|---|---|---|---|---|---|\n")
		for _, ts := range res.steps {
			c := res.reps[0].Step[ts.size.flag]
			stps := func(n string) []float64 { return res.stepTPS(ts.size.flag, n) }
			fmt.Fprintf(&b, "| %s | %d | %d | %d | %.0f | %s | %s | %.0f |\n", ts.size.name, ts.batch.Stats.Trees, c.txns, c.turns/max(c.txns, 1),
				float64(c.turnBytes)/float64(max(c.turns, 1)), spread(stps(cPatrdb), fmtSI), spread(stps(cSameInside), fmtSI),
				float64(c.res[cPatrdb].Disk)/float64(max(c.turns, 1)))
		}
		b.WriteString("\n")
	}

	fmt.Fprintf(&b, "### Resume growth (frozenlake stores, same half-grown last batch in each)\n\n")
	fmt.Fprintf(&b, "| store | nodes | events | file | frontier nodes | open + load frontier, warm | ÷ smallest | cold (file evicted) |\n|---|---|---|---|---|---|---|---|\n")
	base := res.series(func(r repResult) float64 { return r.Resume[0].WarmNs })
	for i, info := range res.resume {
		w := res.series(func(r repResult) float64 { return r.Resume[i].WarmNs })
		cold := "—"
		if res.reps[0].Resume[i].ColdNs > 0 {
			cold = spread(res.series(func(r repResult) float64 { return r.Resume[i].ColdNs }), fmtDur)
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %d | %s | %s | %s |\n", sizeLabel(info.Target), info.Nodes, info.Events,
			fmtMB(float64(info.Bytes)), info.Frontier, spread(w, fmtDur), spread(ratio(w, base), fmtRatio), cold)
	}

	tr := res.reps[0].Traj
	fmt.Fprintf(&b, "\n### Reads\n\n")
	fmt.Fprintf(&b, "- Trajectory: leaf %d, %d turns, %s stored; warm %s, cold %s; bytes.Clone of as many bytes %s.\n",
		tr.Leaf, tr.Turns, fmtMB(float64(tr.Bytes)),
		spread(res.series(func(r repResult) float64 { return r.Traj.WarmNs }), fmtDur),
		spread(res.series(func(r repResult) float64 { return r.Traj.ColdNs }), fmtDur),
		spread(res.series(func(r repResult) float64 { return r.Traj.CopyNs }), fmtDur))
	fmt.Fprintf(&b, "- Point reads over all %d nodes of the append run's store, random order: with the LRU %s, without %s per read.\n",
		res.reps[0].Point.Nodes,
		spread(res.series(func(r repResult) float64 { return r.Point.CachedNs }), fmtDur),
		spread(res.series(func(r repResult) float64 { return r.Point.UncachedNs }), fmtDur))
	bs := res.batchStep
	fmt.Fprintf(&b, "- Training batch: a step of %d trees, %d leaves, %d turns stored; its rows batch %d rows, %d tokens, %s of arrays; "+
		"ReadInto %s, batchdb.Read %s, over HTTP %s, by hand (RunTx.Trajectory per leaf) %s, memcpy %s.\n",
		bs.Stats.Trees, bs.Stats.Leaves, bs.Stats.Turns, bs.Rows, bs.Tokens, fmtMB(float64(bs.Bytes)),
		spread(res.batchNs(batchmeasure.ReadInto), fmtDur),
		spread(res.batchNs(batchmeasure.Read), fmtDur),
		spread(res.batchNs(batchmeasure.HTTP), fmtDur),
		spread(res.batchNs(batchmeasure.ByHand), fmtDur),
		spread(res.batchNs(batchmeasure.Memcpy), fmtDur))
	rp := res.reps[0].Replay
	fmt.Fprintf(&b, "- Replay: the %s-node resume store's %d events; per event RunTx.Events %s, bare cursor walk %s, walk + CRC32C + copy %s.\n",
		sizeLabel(res.replay.Target), rp.Events,
		spread(res.series(func(r repResult) float64 { return r.Replay.ReplayNs / float64(r.Replay.Events) }), fmtDur),
		spread(res.series(func(r repResult) float64 { return r.Replay.WalkNs / float64(r.Replay.Events) }), fmtDur),
		spread(res.series(func(r repResult) float64 { return r.Replay.CopyNs / float64(r.Replay.Events) }), fmtDur))
	fmt.Fprintf(&b, "\n### Cross-check of the stores (repetition 1)\n\n%s\n", res.verified)
	return b.String()
}

func (res *results) machine() string {
	return fmt.Sprintf("- Date: %s (run took %s)\n- Command: `%s`\n- Machine: %d CPUs (`nproc`), %s, %s, %s\n- Go: %s %s/%s\n",
		res.started.UTC().Format(time.RFC3339), res.elapsed.Round(time.Second), res.cfg.Command,
		runtime.NumCPU(), cpuModel(), memTotal(), kernel(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func (res *results) profilesSection() string {
	if len(res.profiles) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("### CPU profiles (patrdb hot paths, taken after the timed repetitions)\n\n")
	b.WriteString("`go tool pprof -top -cum`, the runtime's frames folded into their callers: each line is the share of the " +
		"samples spent in that function and what it called. The profiles are kept in bench/out/*.prof.\n\n")
	for _, p := range res.profiles {
		fmt.Fprintf(&b, "#### %s — %s\n\n", p.Name, p.What)
		if p.Err != "" {
			fmt.Fprintf(&b, "profile failed: %s\n\n", p.Err)
			continue
		}
		fmt.Fprintf(&b, "```\n%s```\n\n", p.Top)
	}
	return b.String()
}

// method says what each contender and figure is; it describes this code,
// not a result.
const method = `## What is measured

- **Workload.** Seeded PaTR trees (internal/workload): B0=4, K=13, M=2, top-2 expansion, paths capped at 50 turns,
  routing by tree.Route on noisy scores of a latent branch quality, leaf rewards and GRPO advantages by the engine's
  own rules (tree.PathReward, tree.Advantages); ~300 action tokens with logprobs and ~1,200
  observation tokens per turn, ~4 bytes of text per token. Each transaction is one interval of every tree of a batch;
  its turns are copied into fresh memory and the heap collected before the clock starts; only the store call is timed.
  A repetition writes the workload twice, each time into fresh files, and pools the two passes' times (one pass is
  four commits, and one slow fsync among them decided a repetition).
- **patrdb**: the public API (OpenGroup, AddNode, AppendTurns, Score, Route, SetNodeStatus, SetReward,
  SetGroupInterval, PutAdvantage, CloseGroup) with DefaultOptions, so validation, node records, the frontier and
  child indexes and the event log are all written. The store's ids are checked against the workload's.
- **patrdb, turns encoded ahead**: the same, except that each transaction's turns go through store.EncodeTurns
  before the clock starts and RunTx.AppendEncodedTurns inside the transaction — a trainer that encodes each
  rollout's turns as they arrive, off the commit path, the way the raw bbolt anchor's values are encoded. Its file is
  checked to hold the same turn and node values as patrdb's, byte for byte.
- **raw bbolt, patrdb's bytes** (the anchor of the append targets; bench/samebytes.go): every key and value a
  patrdb transaction leaves changed in the file — turns, node records, events, frontier and child keys, groups,
  counters, advantages — found by applying the transaction to a shadow patrdb store before the clock starts, then
  Put into raw bbolt in the same nested buckets, each bucket's keys in order (append order, the layout that suits
  bbolt best); FillPercent 1.0, patrdb's page size, fsync on, the same commits. "Turns encoded inside": it encodes
  the turn values inside its timed transaction (store.EncodeTurn), as AppendTurns does; "encoded ahead": everything
  encoded before the clock, against patrdb given EncodeTurns' output.
- **Append targets at ~1 KB and tiny turns**: the same two sides (patrdb; raw bbolt putting patrdb's bytes, turns
  encoded inside) through the append matrix's harness (bench/matrix.go, ` + "`go run ./bench -matrix`" + `) on its ~1 KB
  (40 action + 80 observation tokens, 512-byte prompts) and tiny (frozenlake) workloads, 2 trees a batch, K=5, paths
  capped at 40 turns, with its step commits: one transaction per 3 whole batches, fsync on, the two sides taking each
  transaction in turn; 24 commits a repetition at ~1 KB, 48 at tiny turns (3 and 6 times the matrix's). Each
  repetition of a cell runs in a child process of the runner (bench/stepchild.go) whose heap holds that cell's
  workload only: in the runner's own process, the collection before every
  transaction also scanned the ~290 MB held for the other figures, and left the caches cold. The LLM-sized row is the
  append run above.
- **raw bbolt**: the same turn values (store.EncodeTurn, byte-identical) under the same keys plus each touched node's
  record once per transaction, encoded before the clock starts, Put into one bucket; patrdb's page size,
  FillPercent 1.0, the map freelist, DefaultOptions' initial mapping (InitialMmapSize), fsync on — bbolt configured
  as patrdb configures it, storing less than patrdb does (no event log, indexes, groups or counters).
- **SQLite** (modernc.org/sqlite): groups, nodes (parent index, partial index of active nodes), turns keyed by
  (node, idx) with token arrays as little-endian blobs, scores, decisions, advantages; foreign keys on; WAL,
  synchronous=FULL, 16 KiB pages, prepared statements; no event log.
- **JSONL**: trees held in memory while they grow; when one closes, one encoding/json line per leaf with its full
  trajectory (inherited prefix included) and the same turn fields; fsync at the end of every transaction.
- **Resume**: frozenlake stores built once with NoSync and cached under bench/out; every size ends with the same
  half-grown batch, so the frontier is the same; timed: Open with DefaultOptions, FrontierNodes, each frontier
  group's record, Close.
- **Trajectory**: RunTx.Trajectory of the append run's longest leaf; anchor: bytes.Clone of as many bytes as its
  turns occupy in the file. Cold: the file evicted from the page cache (posix_fadvise DONTNEED) and reopened.
- **Summaries and batch cold**: ` + "`patrdb runs`, `patrdb show bench` and `patrdb batch bench --step 1 --out FILE --force`" + `
  (the command built from this tree), a fresh process on the largest and the smallest resume store in turn, the
  file evicted from the page cache before each; timed from exec to exit (the process floor, some 7 ms, is in both).
  Step 1 is the first batch of every resume store, the same 64 trees in each, so the two files differ only in what
  else they hold; the batch (rows layout) goes to a file under the work directory, written beside it and renamed
  into place, as the command always does.
- **Training batch** (bench/batchmeasure, shared with ` + "`go run ./bench/batchbench`" + `): one step of 32 swe-like
  trees (K=4, paths capped at 26 turns, ~150 action + ~350 observation tokens a turn) in its own store; its rows
  batch read by batchdb.ReadInto into buffers reused across runs, against copy() of as many bytes as the batch's
  arrays hold between two warm buffers; and client.ReadBatch through server.Handler on loopback (the step's source,
  package batch/sourcewire, built into fresh buffers by batch.Assemble; the server has checked the run whole, as a
  trainer's server has once its workers leased through it, and reads it as the in-process side does) against
  batchdb.Read (fresh buffers) in process. The sides take turns run by run in a rotating order, 7 runs each a
  repetition; a repetition's figure is each side's fastest run.
- **Replay**: RunTx.Events over a resume store's whole log; anchors: a bare bbolt cursor walk of the events
  bucket, and a walk that also checks each value's CRC32C and copies it.
- **Peak RSS**: the runner re-executes itself per contender; the child does one append run and reports its VmHWM.

`

// Markers of RESULTS.md: everything above notesMarker is rewritten by each
// run; what follows it is kept.
const notesMarker = "<!-- notes: kept across runs; every claim below cites the run above -->"

func (res *results) document() string {
	var b strings.Builder
	b.WriteString("# patrdb benchmarks\n\n")
	b.WriteString("<!-- generated by `go run ./bench`; edit only below the notes marker -->\n\n")
	b.WriteString(res.machine())
	fmt.Fprintf(&b, "- Repetitions: %d. In one process the contenders take turns transaction by transaction (their order rotating), "+
		"and paired read figures alternate in short blocks, so load from elsewhere on this shared machine falls on both sides of a ratio; fsync on; "+
		"one transaction per interval of a batch of %d trees. A ratio is computed within each repetition; the table gives its median and min–max. "+
		"A target is met when every repetition meets it, not met when none does, and inconclusive when the spread crosses it.\n\n",
		res.cfg.Reps, res.cfg.Trees)
	b.WriteString(method)
	b.WriteString("## Targets\n\n")
	b.WriteString(res.table())
	b.WriteString("\n## Details\n\n")
	b.WriteString(res.details())
	b.WriteString("\n")
	b.WriteString(res.profilesSection())
	return b.String()
}

// writeResults rewrites path, keeping the notes after notesMarker.
func (res *results) writeResults(path string) error {
	notes := notesMarker + "\n"
	if old, err := os.ReadFile(path); err == nil {
		if i := strings.Index(string(old), notesMarker); i >= 0 {
			notes = string(old[i:])
		}
	}
	doc := res.document() + "\n" + notes
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(doc), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
