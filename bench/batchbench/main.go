// Command batchbench measures reading a step's training batch (package
// batch) and appends its figures to bench/RESULTS.md, below the notes
// marker:
//
//	go run ./bench/batchbench            # 7 repetitions, ~1 minute
//	go run ./bench/batchbench -reps 5 -results ''
//
// The step is one batch of seeded swe-like trees (internal/workload) of LLM
// shape. Figures, each a ratio taken within a repetition, median and
// min–max over the repetitions:
//
//   - Go (measured by bench/batchmeasure, which `go run ./bench` reports
//     too): batchdb.ReadInto of the rows layout (one read transaction, buffers
//     reused across steps) vs copy() of as many bytes as the batch's
//     arrays hold; also an allocating batchdb.Read, and the by-hand path
//     (RunTx.Trajectory per leaf, arrays appended) for reference.
//   - HTTP + Python: Client.batch (one GET, safetensors) into a bytearray
//     reused across steps, and into fresh memory, vs the per-leaf JSON path
//     (groups, tree, advantages and one trajectory per leaf, token lists
//     built from the typed records), all through server.Handler on
//     loopback, timed in one Python process.
//   - Go over HTTP: client.ReadBatch through server.Handler on loopback
//     (the step's source, built by batch.Assemble) vs batchdb.Read in
//     process (fresh buffers both); and client.Batch + batch.Decode (the
//     safetensors file, as the Python client reads it) and ReadBatch
//     from a second server that has not checked the run whole, so checks
//     what each request reads, beside them.
//   - wire bytes of the tree layout ÷ the bytes of its per-token arrays.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/patrdb/patrdb/batch"
	"github.com/patrdb/patrdb/batch/batchdb"
	"github.com/patrdb/patrdb/bench/batchmeasure"
	"github.com/patrdb/patrdb/store"
)

type config struct {
	reps, iters               int
	step                      batchmeasure.Config
	results, python, pyClient string
	cpuprofile                string
}

func main() {
	root, err := repoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "batchbench:", err)
		os.Exit(2)
	}
	c := config{}
	flag.IntVar(&c.reps, "reps", 7, "repetitions of every figure (>= 5 for the medians RESULTS.md reports)")
	flag.IntVar(&c.iters, "iters", 7, "timed runs per side per repetition (the fastest is the repetition's figure)")
	def := batchmeasure.Default()
	flag.IntVar(&c.step.Trees, "trees", def.Trees, "trees in the step")
	flag.IntVar(&c.step.MaxTurns, "max-turns", def.MaxTurns, "turn cap of a root-to-leaf path")
	flag.IntVar(&c.step.K, "k", def.K, "turns per interval")
	flag.IntVar(&c.step.ActionTokens, "action-tokens", def.ActionTokens, "mean action tokens per turn")
	flag.IntVar(&c.step.ObservationTokens, "observation-tokens", def.ObservationTokens, "mean observation tokens per turn")
	flag.Uint64Var(&c.step.Seed, "seed", def.Seed, "workload seed")
	flag.StringVar(&c.results, "results", filepath.Join(root, "bench", "RESULTS.md"), "RESULTS.md to append the section to; '' prints it only")
	flag.StringVar(&c.python, "python", "python3", "the Python for the client figure; '' skips it")
	flag.StringVar(&c.cpuprofile, "cpuprofile", "", "write a CPU profile of the Go figures to `FILE`")
	flag.Parse()
	c.pyClient = filepath.Join(root, "bench", "batchbench", "client_bench.py")
	section, err := run(c, strings.Join(append([]string{"go run ./bench/batchbench"}, os.Args[1:]...), " "))
	if err != nil {
		fmt.Fprintln(os.Stderr, "batchbench:", err)
		os.Exit(1)
	}
	fmt.Print(section)
	if c.results != "" {
		if err := writeSection(c.results, section); err != nil {
			fmt.Fprintln(os.Stderr, "batchbench:", err)
			os.Exit(1)
		}
	}
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil { // bench/ has a go.mod of its own
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.work above the working directory: run it in the repository")
		}
		dir = parent
	}
}

func run(c config, command string) (string, error) {
	dir, err := os.MkdirTemp("", "batchbench-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	step, err := batchmeasure.Build(c.step, filepath.Join(dir, "step.db"))
	if err != nil {
		return "", err
	}
	defer step.Close()
	db, st, rows, built := step.DB, step.Stats, step.Rows, step.Built
	tree, err := batchdb.ReadDB(db, batchmeasure.Run, 1, batch.Options{Layout: batch.Tree})
	if err != nil {
		return "", err
	}
	var out strings.Builder
	w := &out
	fmt.Fprintf(w, "\n%s\n\n## Training batch of one step (package batch)\n\n", beginMarker)
	fmt.Fprintf(w, "- Date: %s; command: `%s`; %d CPUs; %s; %d repetitions × %d timed runs per side, sides taking turns run by run in a rotating order; a repetition's figure is the fastest of its runs (the one least disturbed by the other processes of this shared machine, the same rule for both sides), the table gives the median over repetitions and the min–max; a ratio is taken within a repetition.\n",
		time.Now().UTC().Format(time.RFC3339), command, runtime.NumCPU(), runtime.Version(), c.reps, c.iters)
	fmt.Fprintf(w, "- Step: %d swe-like trees (internal/workload, B0=4, K=%d, M=2, top-2, paths capped at %d turns, ~%d action + ~%d observation tokens per turn): %d leaves (%.1f per tree), %.1f turns per leaf path, %d turns stored. Rows layout: %d rows, %d tokens (%.1f MB of arrays); tree layout: %d tokens packed, tree token ratio %.2f.\n",
		st.Trees, c.step.K, c.step.MaxTurns, c.step.ActionTokens, c.step.ObservationTokens, st.Leaves, float64(st.Leaves)/float64(st.Trees), float64(st.PathTurns)/float64(st.Leaves), st.Turns,
		rows.Len(), len(rows.InputIDs), float64(batchmeasure.ArrayBytes(rows))/1e6, tree.TokensPacked, tree.TreeTokenRatio())

	if c.cpuprofile != "" {
		f, err := os.Create(c.cpuprofile)
		if err != nil {
			return "", err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return "", err
		}
	}
	goFig, err := goFigures(c, step)
	pprof.StopCPUProfile()
	if err != nil {
		return "", err
	}
	wire, err := fileLen(tree)
	if err != nil {
		return "", err
	}
	tokenBytes := tokenArrayBytes(tree)
	fmt.Fprintf(w, "\n| figure | measured, median (min–max) | anchor, median (min–max) | ratio | ratio min–max | target | verdict |\n|---|---|---|---|---|---|---|\n")
	for _, f := range goFig {
		f.row(w)
	}
	py, err := pythonFigures(c, db)
	if err != nil {
		return "", err
	}
	for _, f := range py {
		f.row(w)
	}
	(&figure{name: "tree layout on the wire vs its per-token arrays", unit: "bytes",
		got: []float64{float64(wire)}, anchor: []float64{float64(tokenBytes)}, gotName: "safetensors file", anchorName: "its per-token arrays",
		target: "≤ 1.1×", max: 1.1}).row(w)
	actions := 0
	for _, m := range tree.LossMask {
		actions += int(m)
	}
	(&figure{name: "tree layout on the wire vs the token ids and action logprobs alone (4 bytes each)", unit: "bytes",
		got: []float64{float64(wire)}, anchor: []float64{float64(4*len(tree.InputIDs) + 4*actions)}, gotName: "safetensors file", anchorName: "ids + logprobs"}).row(w)
	fmt.Fprintf(w, "\nNotes: the memcpy anchor copies, between two warm buffers, exactly as many bytes as the rows batch's arrays hold (%d bytes per token: int32 id, uint8 mask, float32 logprob, advantage and three loss coefficients, int32 position, int64 policy version, int32 turn index, float32 turn reward; plus the row tables). The batch side opens a read transaction, walks the step's groups and leaves, checks every stored turn's CRC once and decodes its token arrays straight from the mapped pages into the reused buffers. The Go HTTP side is the server's read of the step's source (batch.Source: groups, leaves, the turns on their paths, each token once; 12.4 MB), copied out of its read transaction and written into the socket, the kernel's copies across the loopback, the client's read into one buffer sized from Content-Length, and batch.Assemble building the rows batch from views of that buffer into fresh arrays; the server has checked the run whole first (one GET of its frontier), as a trainer's server has once its workers leased through it. The checking side is the same call to a second server of the same file that only ever serves batches, so never checks the run whole and reads every request in checked mode (each page a request reads checked as it is read). The HTTP file side is the server's read of the batch itself and the 225 MB safetensors file across the loopback, batch.Decode viewing the client's buffer without copying. The HTTP + Python rows side reads the file into one bytearray kept across calls (Client.batch(into=...)), as a trainer reading a batch a step does, or into fresh memory, whose pages the kernel maps and zeroes on every call. The per-leaf JSON path is what a Python trainer did before: one GET per group (tree, advantages) and per leaf (trajectory), typed records, token arrays as JSON numbers (the wire before API 1.5), Python lists of token ids per row. The tree layout's wire bytes add the JSON header, the segment and row tables to its per-token arrays. Store built in %s (NoSync).\n",
		tokenBytes/int64(len(tree.InputIDs)), built.Round(time.Millisecond))
	fmt.Fprintf(w, "\n%s\n", endMarker)
	return out.String(), nil
}

const (
	beginMarker = "<!-- batchbench: begin (rewritten by go run ./bench/batchbench) -->"
	endMarker   = "<!-- batchbench: end -->"
)

// writeSection replaces the batchbench section of RESULTS.md, or appends
// it at the end (below the notes marker the main runner keeps).
func writeSection(path, section string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc := string(b)
	if i := strings.Index(doc, beginMarker); i >= 0 {
		j := strings.Index(doc, endMarker)
		if j < i {
			return fmt.Errorf("%s: batchbench begin marker without its end", path)
		}
		doc = strings.TrimRight(doc[:i], "\n") + "\n" + doc[j+len(endMarker):]
	}
	doc = strings.TrimRight(doc, "\n") + "\n" + section
	return os.WriteFile(path, []byte(doc), 0o644)
}

func fileLen(b *batch.Batch) (int64, error) { return b.FileLen() }

// tokenArrayBytes is the bytes of b's per-token arrays (those as long as
// its token ids).
func tokenArrayBytes(b *batch.Batch) int64 {
	var n int64
	for _, t := range b.Tensors() {
		if t.Shape[0] == len(b.InputIDs) {
			n += int64(len(t.Data))
		}
	}
	return n
}

// pythonFigures runs client_bench.py against a loopback server.
func pythonFigures(c config, db *store.DB) ([]*figure, error) {
	if c.python == "" {
		return nil, nil
	}
	if _, err := exec.LookPath(c.python); err != nil {
		fmt.Fprintf(os.Stderr, "batchbench: %s not found: the HTTP + Python figure is skipped\n", c.python)
		return nil, nil
	}
	url, stop, err := batchmeasure.Serve(db)
	if err != nil {
		return nil, err
	}
	defer stop()
	cmd := exec.Command(c.python, c.pyClient, url, batchmeasure.Run, "1", fmt.Sprint(c.reps))
	cmd.Stderr = os.Stderr
	raw, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.pyClient, err)
	}
	var res struct {
		Batch, Into, Tree, PerLeaf []float64
		Requests                   int
		JSONBytes                  int64 `json:"json_bytes"`
		Numpy                      bool
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("%s printed %q: %w", c.pyClient, raw, err)
	}
	arrays := "memoryview"
	if res.Numpy {
		arrays = "numpy"
	}
	// The target is read as the in-process batch target is, with the
	// buffers reused from step to step, as a trainer's are.
	return []*figure{
		{name: fmt.Sprintf("HTTP + Python, rows batch into a reused buffer (one GET, Client.batch(into=bytearray), %s arrays) vs the per-leaf JSON path (%d requests, %.1f MB of JSON)", arrays, res.Requests, float64(res.JSONBytes)/1e6),
			unit: "s", got: res.PerLeaf, anchor: res.Into, gotName: "per-leaf JSON", anchorName: "Client.batch rows, into=", target: "≥ 20× (JSON ÷ batch)", min: 20},
		{name: "HTTP + Python, rows batch into fresh memory (Client.batch) vs the per-leaf JSON path",
			unit: "s", got: res.PerLeaf, anchor: res.Batch, gotName: "per-leaf JSON", anchorName: "Client.batch rows"},
		{name: "HTTP + Python, tree batch vs the per-leaf JSON path", unit: "s", got: res.PerLeaf, anchor: res.Tree,
			gotName: "per-leaf JSON", anchorName: "Client.batch tree"},
	}, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
