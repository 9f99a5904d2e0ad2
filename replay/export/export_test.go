package export_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay/export"
	"github.com/patrdb/patrdb/replay/internal/replaytest"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

func runExport(t *testing.T, db *store.DB, run string, opts export.ExportOptions) (*export.ExportResult, error) {
	t.Helper()
	return exportCtx(context.Background(), db, run, opts)
}

func exportCtx(ctx context.Context, db *store.DB, run string, opts export.ExportOptions) (*export.ExportResult, error) {
	var res *export.ExportResult
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run(run)
		if err != nil {
			return err
		}
		res, err = export.Export(ctx, r, opts)
		return err
	})
	return res, err
}

// readSteps reads the Parquet files a glob matches, by step folder.
func readSteps[T any](t *testing.T, glob string) map[string][]T {
	t.Helper()
	files, err := filepath.Glob(glob)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]T{}
	for _, f := range files {
		rs, err := parquet.ReadFile[T](f)
		if err != nil {
			t.Fatalf("read %s: %v", f, err)
		}
		step := filepath.Base(filepath.Dir(f))
		rows[step] = append(rows[step], rs...)
	}
	return rows
}

// storeTotals are the sums the round trip compares against.
type storeTotals struct {
	nodes, leaves, turns, actionTokens, obsTokens, advs, rubrics int
	rewardSum, advSum, outcomeSum, logprobSum                    float64
	tokenIDSum                                                   int64
	nodeStep                                                     map[uint64]uint64 // node → step
}

func readStoreTotals(t *testing.T, db *store.DB, run string) storeTotals {
	t.Helper()
	s := storeTotals{nodeStep: map[uint64]uint64{}}
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run(run)
		if err != nil {
			return err
		}
		err = r.ForEachGroup(0, func(g model.Group) error {
			nodes, err := r.GroupNodes(g)
			if err != nil {
				return err
			}
			for _, n := range nodes {
				s.nodes++
				s.nodeStep[n.ID] = n.Step
				if n.Status.Leaf() {
					s.leaves++
				}
				if n.HasReward {
					s.rewardSum += n.Reward
				}
				turns, err := r.Turns(n.ID)
				if err != nil {
					return err
				}
				for _, tu := range turns {
					s.turns++
					s.actionTokens += len(tu.ActionTokens)
					s.obsTokens += len(tu.ObservationTokens)
					for _, x := range tu.ActionTokens {
						s.tokenIDSum += int64(x)
					}
					for _, x := range tu.ObservationTokens {
						s.tokenIDSum += int64(x)
					}
					for _, lp := range tu.ActionLogprobs {
						s.logprobSum += float64(lp)
					}
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		advs, err := r.Advantages(0, 0)
		for _, a := range advs {
			s.advs++
			s.advSum += a.Advantage
			s.outcomeSum += a.Outcome
		}
		rbs, _ := r.Rubrics("")
		s.rubrics = len(rbs)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func itoa(x uint64) string {
	b, _ := json.Marshal(x)
	return string(b)
}

// TestExportJSONL: one line per leaf with exactly the store's trajectory,
// one line per node.
func TestExportJSONL(t *testing.T) {
	db := storetest.Open(t)
	spec := replaytest.SmallSpec("j")
	replaytest.BuildOneTx(t, db, spec)
	out := filepath.Join(t.TempDir(), "out")
	if err := os.Mkdir(out, 0o755); err != nil { // an existing empty folder is fine
		t.Fatal(err)
	}
	res, err := runExport(t, db, spec.ID, export.ExportOptions{Out: out, Format: export.JSONL})
	if err != nil {
		t.Fatal(err)
	}
	want := readStoreTotals(t, db, spec.ID)
	type line struct {
		Run     string `json:"run"`
		Step    uint64 `json:"step"`
		Leaf    uint64 `json:"leaf"`
		PathLen int    `json:"path_len"`
		Turns   []struct {
			Node         uint64   `json:"node"`
			Index        int      `json:"index"`
			Action       string   `json:"action"`
			ActionTokens []uint32 `json:"action_tokens"`
		} `json:"turns"`
		Advantage *struct {
			Advantage float64 `json:"advantage"`
		} `json:"advantage"`
	}
	leaves := 0
	err = db.View(func(tx *store.Tx) error {
		r, err := tx.Run(spec.ID)
		if err != nil {
			return err
		}
		files, _ := filepath.Glob(filepath.Join(out, "run="+spec.ID, "step=*", "trajectories.jsonl"))
		if len(files) != spec.Steps {
			t.Errorf("trajectory files %v", files)
		}
		for _, f := range files {
			lines := readLines(t, f)
			for _, l := range lines {
				var tr line
				if err := json.Unmarshal([]byte(l), &tr); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				leaves++
				path, err := r.Trajectory(tr.Leaf)
				if err != nil {
					return err
				}
				if len(path) != len(tr.Turns) || tr.PathLen != len(path) || tr.Run != spec.ID || tr.Advantage == nil {
					t.Errorf("leaf %d: %d turns (path_len %d), store %d", tr.Leaf, len(tr.Turns), tr.PathLen, len(path))
					continue
				}
				for i, p := range path {
					got := tr.Turns[i]
					if got.Node != p.Node || got.Index != p.Index || got.Action != p.Action || !equalU32(got.ActionTokens, p.ActionTokens) {
						t.Errorf("leaf %d turn %d: %+v, store %+v", tr.Leaf, i, got, p)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	nodeLines := 0
	files, _ := filepath.Glob(filepath.Join(out, "run="+spec.ID, "step=*", "nodes.jsonl"))
	for _, f := range files {
		for _, l := range readLines(t, f) {
			var n struct {
				Node   uint64 `json:"node"`
				Parent uint64 `json:"parent"`
				Fork   int    `json:"fork"`
			}
			if err := json.Unmarshal([]byte(l), &n); err != nil {
				t.Fatal(err)
			}
			nodeLines++
		}
	}
	if leaves != want.leaves || nodeLines != want.nodes || res.Rows["trajectories"] != int64(leaves) || res.Rows["nodes"] != int64(nodeLines) {
		t.Errorf("%d trajectory lines, %d node lines; store %d leaves, %d nodes; result %v", leaves, nodeLines, want.leaves, want.nodes, res.Rows)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func equalU32(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// treeOf lists every path under dir with its contents, to prove a refused
// export touched nothing.
func treeOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if fi.IsDir() {
			out[rel] = "/"
		} else {
			b, _ := os.ReadFile(p)
			out[rel] = string(b)
		}
		return nil
	})
	return out
}

func TestExportRefusesAndReplaces(t *testing.T) {
	db := storetest.Open(t)
	a, b := replaytest.SmallSpec("a"), replaytest.SmallSpec("b")
	replaytest.BuildOneTx(t, db, a)
	replaytest.BuildOneTx(t, db, b)
	base := t.TempDir()
	lake := filepath.Join(base, "lake")
	if _, err := runExport(t, db, "a", export.ExportOptions{Out: lake, Format: export.JSONL}); err != nil {
		t.Fatal(err)
	}
	before := treeOf(t, base)

	// Non-empty without force: refused, nothing changes.
	if _, err := runExport(t, db, "b", export.ExportOptions{Out: lake, Format: export.JSONL}); !errors.Is(err, export.ErrOutExists) {
		t.Errorf("non-empty out: %v, want ErrOutExists", err)
	}
	// A file in the way.
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	before["file"] = "x"
	if _, err := runExport(t, db, "a", export.ExportOptions{Out: file, Format: export.JSONL, Force: true}); !errors.Is(err, export.ErrOutExists) {
		t.Errorf("out is a file: %v, want ErrOutExists", err)
	}
	// An unwritable place (a path under a file): an error, nothing created.
	if _, err := runExport(t, db, "a", export.ExportOptions{Out: filepath.Join(file, "sub"), Format: export.JSONL}); err == nil {
		t.Error("export under a file succeeded")
	}
	// Bad options and an unknown run.
	if _, err := runExport(t, db, "a", export.ExportOptions{Out: lake, Format: "csv"}); !errors.Is(err, export.ErrExportOptions) {
		t.Errorf("format csv: %v, want ErrExportOptions", err)
	}
	if _, err := runExport(t, db, "nope", export.ExportOptions{Out: filepath.Join(base, "n"), Format: export.JSONL}); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("unknown run: %v, want ErrNotFound", err)
	}
	if got := treeOf(t, base); !equalTrees(got, before) {
		t.Errorf("refused exports changed the folder:\n got  %v\n want %v", keys(got), keys(before))
	}

	// Force: run b joins the folder, run a stays.
	if _, err := runExport(t, db, "b", export.ExportOptions{Out: lake, Format: export.RL, Force: true}); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(lake)
	if names := dirNames(entries); strings.Join(names, ",") != "run=a,run=b" {
		t.Errorf("lake after forced export of b: %v", names)
	}
	// Force again over run a, now as RL: the JSONL files are gone.
	if _, err := runExport(t, db, "a", export.ExportOptions{Out: lake, Format: export.RL, Force: true}); err != nil {
		t.Fatal(err)
	}
	if j, _ := filepath.Glob(filepath.Join(lake, "run=a", "step=*", "nodes.jsonl")); len(j) != 0 {
		t.Errorf("old export left behind: %v", j)
	}
	if p, _ := filepath.Glob(filepath.Join(lake, "run=a", "step=*", "rl.parquet")); len(p) != a.Steps {
		t.Errorf("new export: %v", p)
	}
	entries, _ = os.ReadDir(lake)
	if names := dirNames(entries); strings.Join(names, ",") != "run=a,run=b" {
		t.Errorf("lake holds %v; no temporary folder may remain", names)
	}
}

func dirNames(es []os.DirEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func equalTrees(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestExportCancelLeavesNothing: an export interrupted half-way leaves no
// target and no temporary folder.
func TestExportCancelLeavesNothing(t *testing.T) {
	db := storetest.Open(t)
	spec := replaytest.MediumSpec("c")
	replaytest.BuildOneTx(t, db, spec)
	base := t.TempDir()
	out := filepath.Join(base, "out")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls int
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run(spec.ID)
		if err != nil {
			return err
		}
		_, err = export.Export(ctx, r, export.ExportOptions{Out: out, Format: export.JSONL,
			OnProgress: func(done, total int64) {
				calls++
				if done > total/2 {
					cancel()
				}
			}})
		return err
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled export: %v", err)
	}
	if entries, _ := os.ReadDir(base); len(entries) != 0 {
		t.Errorf("cancelled export left %v", dirNames(entries))
	}
	if calls == 0 {
		t.Error("OnProgress was never called")
	}
}

// An export's result says what it wrote where, whether the run's folder
// was new or replaced one (force): the run, the format, the run's folder,
// and each file by its path under Out (steps named in decimal) with its
// size, which add up to the result's bytes. The folder it built (Out when
// new, the run's when replaced) is readable by all, not private as a
// temporary folder is made.
func TestExportResultDescribesTheExport(t *testing.T) {
	db := storetest.Open(t)
	oneLeafRun(t, db, "ten", 10)
	lake := filepath.Join(t.TempDir(), "lake")
	for _, force := range []bool{false, true} {
		var done, total int64
		res, err := runExport(t, db, "ten", export.ExportOptions{Out: lake, Format: export.JSONL, Force: force,
			OnProgress: func(d, tot int64) { done, total = d, tot }})
		if err != nil {
			t.Fatal(err)
		}
		if done != 1 || total != 1 {
			t.Errorf("force %v: progress ended at %d of %d, want 1 of 1 (the one group: JSONL holds no log)", force, done, total)
		}
		if res == nil || res.Run != "ten" || res.Format != export.JSONL || res.Dir != filepath.Join(lake, "run=ten") {
			t.Fatalf("force %v: result %+v, want run ten, format jsonl, dir %s", force, res, filepath.Join(lake, "run=ten"))
		}
		built := lake
		if force {
			built = res.Dir
		}
		fi, err := os.Stat(built)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o755 {
			t.Errorf("force %v: %s has mode %v, want rwxr-xr-x", force, built, fi.Mode())
		}
		var paths []string
		var bytes int64
		for _, f := range res.Files {
			paths = append(paths, f.Path)
			fi, err := os.Stat(filepath.Join(lake, filepath.FromSlash(f.Path)))
			if err != nil || fi.Size() != f.Bytes || f.Step != 10 || f.Rows != 1 {
				t.Errorf("force %v: file %+v: %v", force, f, err)
				continue
			}
			bytes += f.Bytes
		}
		sort.Strings(paths)
		if strings.Join(paths, ",") != "run=ten/step=10/nodes.jsonl,run=ten/step=10/trajectories.jsonl" || bytes == 0 || res.Bytes != bytes {
			t.Errorf("force %v: files %v of %d bytes, result %d bytes", force, paths, bytes, res.Bytes)
		}
	}
}

// A run with nothing to export still gets its folder, empty, where the
// result says it is.
func TestExportOfAnEmptyRun(t *testing.T) {
	db := storetest.Open(t)
	if err := db.Update(func(tx *store.Tx) error { _, err := tx.CreateRun("empty", nil, nil); return err }); err != nil {
		t.Fatal(err)
	}
	lake := filepath.Join(t.TempDir(), "lake")
	res, err := runExport(t, db, "empty", export.ExportOptions{Out: lake, Format: export.JSONL})
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(res.Dir)
	if err != nil || len(ents) != 0 || res.Dir != filepath.Join(lake, "run=empty") || len(res.Files) != 0 {
		t.Errorf("empty run: result %+v, its folder holds %v (%v); want an empty run=empty", res, dirNames(ents), err)
	}
}
