package lake_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/patrdb/patrdb/internal/frozenlake"
	"github.com/patrdb/patrdb/lake"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// trainConfig is a small PaTR run on FrozenLake with the rubric buffer on:
// every record kind, several steps.
func trainConfig(run string, steps int, seed int64) frozenlake.TrainConfig {
	cfg := frozenlake.DefaultTrainConfig("patr")
	cfg.Run, cfg.Steps, cfg.Batch, cfg.Seed, cfg.EvalEpisodes = run, steps, 3, seed, 10
	cfg.Tree.Seed = seed
	cfg.EnableRubrics()
	return cfg
}

// train runs (or resumes) cfg's run in db.
func train(ctx context.Context, t testing.TB, db *store.DB, cfg frozenlake.TrainConfig, resume bool) error {
	t.Helper()
	tr, err := frozenlake.NewTrainer(db, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr.ShaperFor = frozenlake.RubricShaper
	_, err = tr.Train(ctx, resume)
	return err
}

// openAt opens a test file whose clock starts at start: two files of
// storetest's clock create runs at the same instant.
func openAt(t testing.TB, start time.Time) *store.DB {
	t.Helper()
	o := storetest.Options()
	o.Clock = func() time.Time {
		start = start.Add(time.Millisecond)
		return start
	}
	return storetest.OpenPath(t, filepath.Join(t.TempDir(), "patr.db"), o)
}

func openLake(t testing.TB, u string) *lake.Lake {
	t.Helper()
	lk, err := lake.Open(u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return lk
}

// files reads every file under dir but the lake's own records (_patrdb)
// and hidden ones, by path.
func files(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() && (d.Name() == "_patrdb" || (strings.HasPrefix(d.Name(), ".") && p != dir)) {
			return fs.SkipDir
		}
		if !d.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[filepath.ToSlash(rel)] = b
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return out
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// sameFiles reports how two lakes' files differ.
func sameFiles(t testing.TB, got, want map[string][]byte, what string) {
	t.Helper()
	for _, k := range keys(want) {
		if g, ok := got[k]; !ok {
			t.Errorf("%s: %s missing", what, k)
		} else if !bytes.Equal(g, want[k]) {
			t.Errorf("%s: %s differs", what, k)
		}
	}
	for _, k := range keys(got) {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: %s should not be there", what, k)
		}
	}
}

func readTable[T any](t testing.TB, dir, table, run string) []T {
	t.Helper()
	var out []T
	paths, _ := filepath.Glob(filepath.Join(dir, table, "run="+run, "step=*", "*.parquet"))
	for _, p := range paths {
		rows, err := parquet.ReadFile[T](p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rows...)
	}
	return out
}

// A finished run exported once: every table holds what the store holds,
// the manifest says so, and exporting again adds nothing.
func TestExportHoldsTheRun(t *testing.T) {
	db := storetest.Open(t)
	if err := train(context.Background(), t, db, trainConfig("demo", 4, 1), false); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "lake")
	lk := openLake(t, dir)
	res, err := lk.Export(context.Background(), db, "demo", lake.ExportOptions{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Whole || res.Through != 4 || len(res.Steps) < 4 || res.Status != model.RunFinished {
		t.Fatalf("export: whole %v through %d steps %v", res.Whole, res.Through, res.Steps)
	}
	var nodes, turns, leaves, ckpts int
	var last uint64
	var rubrics []model.Rubric
	err = db.View(func(tx *store.Tx) error {
		r, _ := tx.Run("demo")
		last = r.LastSeq()
		rubrics, _ = r.Rubrics("")
		info, _ := r.Info()
		for s := uint64(1); s <= info.LastStep; s++ {
			if _, err := r.Checkpoint(s); err == nil {
				ckpts++
			}
		}
		return r.ForEachGroup(0, func(g model.Group) error {
			ns, err := r.GroupNodes(g)
			for _, n := range ns {
				nodes++
				turns += n.Turns
				if n.Status.Leaf() {
					leaves++
				}
			}
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	gotNodes := readTable[lake.NodeRow](t, dir, "nodes", "demo")
	gotLeaves := 0
	for _, n := range gotNodes {
		if n.Leaf {
			gotLeaves++
		}
	}
	events := readTable[lake.EventRow](t, dir, "events", "demo")
	if len(gotNodes) != nodes || gotLeaves != leaves || len(readTable[lake.TurnRow](t, dir, "turns", "demo")) != turns ||
		len(events) != int(last) || len(readTable[lake.CheckpointRow](t, dir, "checkpoints", "demo")) != ckpts {
		t.Errorf("lake: %d nodes, %d leaves, %d events; store: %d nodes, %d leaves, %d events", len(gotNodes), gotLeaves, len(events), nodes, leaves, last)
	}
	// The rubrics' last versions are the store's.
	lastVersion := map[int64]lake.RubricRow{}
	for _, rr := range readTable[lake.RubricRow](t, dir, "rubrics", "demo") {
		if rr.Seq > lastVersion[rr.Rubric].Seq {
			lastVersion[rr.Rubric] = rr
		}
	}
	if len(rubrics) == 0 || len(lastVersion) != len(rubrics) {
		t.Fatalf("%d rubrics in the lake, %d in the store", len(lastVersion), len(rubrics))
	}
	for _, rb := range rubrics {
		if got := lastVersion[int64(rb.ID)]; got.Pool != string(rb.Pool) || got.Usage.Activations != int32(rb.Usage.Activations) {
			t.Errorf("rubric %d: lake %+v, store %+v", rb.ID, got, rb)
		}
	}
	m, err := lk.Manifest(context.Background(), "demo")
	if err != nil || m.Tail == nil || m.Tail.Seq != last || m.Step != 4 {
		t.Fatalf("manifest: %+v %v", m, err)
	}
	before := files(t, dir)
	again, err := lk.Export(context.Background(), db, "demo", lake.ExportOptions{})
	if err != nil || len(again.Files) != 0 || again.Through != 4 || !again.Whole {
		t.Fatalf("export again: %v, %d files, through %d, whole %v", err, len(again.Files), again.Through, again.Whole)
	}
	sameFiles(t, files(t, dir), before, "after exporting again")
}

// A lake that follows a live run (Follow, exporting while the trainer
// writes) holds, at every export, only checkpointed steps, and ends file
// for file the lake one export of the run writes. The trainer runs a step
// at a time, marking the run finished after each and resuming it: each
// export of a finished run holds it whole, and the next rewrites what
// followed its last checkpoint.
func TestFollowerTracksALiveRun(t *testing.T) {
	db := storetest.Open(t)
	dir := filepath.Join(t.TempDir(), "lake")
	lk := openLake(t, dir)
	var exports int
	var bad []string
	f, err := lk.Follow(db, lake.FollowOptions{Interval: time.Millisecond, OnExport: func(res *lake.ExportResult) {
		exports++
		var lastStep uint64
		_ = db.View(func(tx *store.Tx) error {
			r, err := tx.Run(res.Run)
			if err == nil {
				info, _ := r.Info()
				lastStep = info.LastStep
			}
			return err
		})
		for _, fl := range res.Files {
			if fl.Step > lastStep && !res.Whole {
				bad = append(bad, fmt.Sprintf("%s before step %d was checkpointed", fl.Key, fl.Step))
			}
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	for k := 1; k <= 5; k++ {
		if err := train(context.Background(), t, db, trainConfig("demo", k, 3), k > 1); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			m, err := lk.Manifest(context.Background(), "demo")
			if err == nil && m.Step >= uint64(k) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the lake did not follow step %d: %+v %v", k, m, err)
			}
			time.Sleep(time.Millisecond)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if exports < 5 {
		t.Errorf("%d exports while the run grew: the follower did not follow", exports)
	}
	for _, b := range bad {
		t.Error(b)
	}
	once := filepath.Join(t.TempDir(), "once")
	if _, err := openLake(t, once).Export(context.Background(), db, "demo", lake.ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, files(t, dir), files(t, once), "followed lake vs one export")
}

// The lake holds one run under a name: another file's run under the same
// id is refused and the lake stays as it was; --as exports it beside;
// Replace swaps the lake's run for it whole — never steps of one and steps
// of the other.
func TestARunIDFromAnotherFileIsRefused(t *testing.T) {
	short, long := storetest.Open(t), openAt(t, time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
	if err := train(context.Background(), t, short, trainConfig("demo", 2, 1), false); err != nil {
		t.Fatal(err)
	}
	if err := train(context.Background(), t, long, trainConfig("demo", 5, 2), false); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "lake")
	lk := openLake(t, dir)
	ctx := context.Background()
	if _, err := lk.Export(ctx, short, "demo", lake.ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	before := files(t, dir)
	_, err := lk.Export(ctx, long, "demo", lake.ExportOptions{})
	var conflict *lake.RunConflictError
	if !errors.As(err, &conflict) || conflict.Have.CreatedAt == conflict.Want.CreatedAt {
		t.Fatalf("another file's run under the same id: %v, want a RunConflictError", err)
	}
	sameFiles(t, files(t, dir), before, "after a refused export")

	// Beside it, under another name.
	if _, err := lk.Export(ctx, long, "demo", lake.ExportOptions{As: "demo-long"}); err != nil {
		t.Fatal(err)
	}
	alone := filepath.Join(t.TempDir(), "alone")
	if _, err := openLake(t, alone).Export(ctx, long, "demo", lake.ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	renamed := map[string][]byte{}
	for k, v := range files(t, alone) {
		renamed[strings.Replace(k, "/run=demo/", "/run=demo-long/", 1)] = v
	}
	got := map[string][]byte{}
	for k, v := range files(t, dir) {
		if strings.Contains(k, "/run=demo-long/") {
			got[k] = v
		}
	}
	sameFiles(t, got, renamed, "--as")

	// Replaced whole: the lake's demo is the long run's and nothing else.
	if _, err := lk.Export(ctx, long, "demo", lake.ExportOptions{Replace: true}); err != nil {
		t.Fatal(err)
	}
	got = map[string][]byte{}
	for k, v := range files(t, dir) {
		if strings.Contains(k, "/run=demo/") {
			got[k] = v
		}
	}
	sameFiles(t, got, files(t, alone), "replaced")
	// And the short run is now the other file.
	if _, err := lk.Export(ctx, short, "demo", lake.ExportOptions{}); !errors.Is(err, lake.ErrConflict) {
		t.Errorf("the replaced run exported again: %v, want ErrConflict", err)
	}
}

// Two exporters of one run at once: the second is refused while the first
// holds the run.
func TestTwoExportersOfOneRunAreRefused(t *testing.T) {
	db := storetest.Open(t)
	if err := train(context.Background(), t, db, trainConfig("demo", 2, 1), false); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "lake")
	lk := openLake(t, dir)
	f, err := lk.Follow(db, lake.FollowOptions{Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := lk.Export(context.Background(), db, "demo", lake.ExportOptions{}); !errors.Is(err, lake.ErrBusy) {
		t.Errorf("a second exporter: %v, want ErrBusy", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := lk.Export(context.Background(), db, "demo", lake.ExportOptions{}); err != nil {
		t.Errorf("export once the follower stopped: %v", err)
	}
}

// fingerprint is what a trainer's result is judged by: trees, advantages,
// rubrics with their usage statistics, checkpoints.
func fingerprint(t testing.TB, db *store.DB, run string) string {
	t.Helper()
	var b strings.Builder
	err := db.ViewRun(run, func(r *store.RunTx) error {
		var err error
		info, _ := r.Info()
		fmt.Fprintf(&b, "run %s last %d config %s\n", info.Status, info.LastStep, info.Config)
		err = r.ForEachGroup(0, func(g model.Group) error {
			fmt.Fprintf(&b, "group %d step %d %s %v %s\n", g.ID, g.Step, g.Task, g.Roots, g.Status)
			ns, err := r.GroupNodes(g)
			for _, n := range ns {
				tr, _ := r.Trajectory(n.ID)
				fmt.Fprintf(&b, "node %d p %d f %d %s r %v s %v d %v traj %d\n", n.ID, n.Parent, n.Fork, n.Status, n.Reward, n.Scores, n.Decisions, len(tr))
			}
			return err
		})
		if err != nil {
			return err
		}
		advs, _ := r.Advantages(0, 0)
		for _, a := range advs {
			fmt.Fprintf(&b, "adv %+v\n", a)
		}
		rbs, _ := r.Rubrics("")
		for _, rb := range rbs {
			rb.Origin = model.RubricOrigin{}
			fmt.Fprintf(&b, "rubric %d %s %q usage %+v\n", rb.ID, rb.Pool, rb.Text, rb.Usage)
		}
		for s := uint64(1); s <= info.LastStep; s++ {
			c, err := r.Checkpoint(s)
			if err == nil {
				fmt.Fprintf(&b, "ckpt %d %x\n", c.Step, c.Inline)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A machine lost mid-run: the follower exported the checkpointed steps;
// the file is gone; Restore rebuilds the run from the lake, the trainer
// resumes it and finishes, and the result equals a run never interrupted.
func TestRestoreResumesAsIfNeverLost(t *testing.T) {
	ref := storetest.Open(t)
	if err := train(context.Background(), t, ref, trainConfig("demo", 6, 5), false); err != nil {
		t.Fatal(err)
	}
	want := fingerprint(t, ref, "demo")

	path := filepath.Join(t.TempDir(), "lost.db")
	db := storetest.OpenPath(t, path, storetest.Options())
	dir := filepath.Join(t.TempDir(), "lake")
	lk := openLake(t, dir)
	f, err := lk.Follow(db, lake.FollowOptions{Interval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// The machine dies some time after step 3's checkpoint.
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for ctx.Err() == nil {
			var last uint64
			_ = db.View(func(tx *store.Tx) error {
				if r, err := tx.Run("demo"); err == nil {
					info, _ := r.Info()
					last = info.LastStep
				}
				return nil
			})
			if last >= 3 {
				cancel()
			}
		}
	}()
	if err := train(ctx, t, db, trainConfig("demo", 6, 5), false); !errors.Is(err, context.Canceled) {
		t.Fatalf("training stopped with %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	m, err := lk.Manifest(context.Background(), "demo")
	if err != nil || m.Step < 3 {
		t.Fatalf("manifest %+v %v", m, err)
	}

	back := storetest.Open(t)
	res, err := lk.Restore(context.Background(), back, "demo", lake.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.LastStep != m.Step || res.Turns == 0 {
		t.Fatalf("restored %+v, manifest step %d", res, m.Step)
	}
	// Every exported step reads as it did in the lost file.
	for s := uint64(1); s <= m.Step; s++ {
		if a, b := stepDump(t, db, s), stepDump(t, back, s); !reflect.DeepEqual(a, b) {
			t.Errorf("step %d restored differs", s)
		}
	}
	if err := train(context.Background(), t, back, trainConfig("demo", 6, 5), true); err != nil {
		t.Fatal(err)
	}
	if got := fingerprint(t, back, "demo"); got != want {
		t.Errorf("the restored and resumed run differs from one never interrupted:\n%s", firstDiff(want, got))
	}
}

func stepDump(t testing.TB, db *store.DB, step uint64) string {
	t.Helper()
	var b strings.Builder
	err := db.ViewRun("demo", func(r *store.RunTx) error {
		return r.ForEachGroup(step, func(g model.Group) error {
			fmt.Fprintf(&b, "%+v\n", g)
			ns, err := r.GroupNodes(g)
			for _, n := range ns {
				tr, _ := r.Trajectory(n.ID)
				fmt.Fprintf(&b, "%+v %+v\n", n, tr)
			}
			advs, _ := r.Advantages(step, g.ID)
			fmt.Fprintf(&b, "%+v\n", advs)
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) && i < len(bl); i++ {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n want %s\n got  %s", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("lengths differ: %d vs %d lines", len(al), len(bl))
}

// A follower that keeps the last 2 steps drops the rest once exported:
// the file checks clean, holds only those steps, the lake holds every
// step, and a restore from the lake brings all of them back.
func TestFollowerKeepsTheFileBounded(t *testing.T) {
	db := storetest.Open(t)
	dir := filepath.Join(t.TempDir(), "lake")
	lk := openLake(t, dir)
	f, err := lk.Follow(db, lake.FollowOptions{Interval: time.Millisecond, KeepSteps: 2})
	if err != nil {
		t.Fatal(err)
	}
	cfg := trainConfig("demo", 7, 4)
	if err := train(context.Background(), t, db, cfg, false); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	vs, err := db.Check(nil)
	if err != nil || len(vs) > 0 {
		t.Fatalf("check: %v %v", err, vs)
	}
	var info model.Run
	_ = db.View(func(tx *store.Tx) error { r, _ := tx.Run("demo"); info, _ = r.Info(); return nil })
	if info.DroppedStep != 5 {
		t.Errorf("dropped through step %d, want 5", info.DroppedStep)
	}
	// The lake has every step as an uninterrupted run writes it.
	ref := storetest.Open(t)
	if err := train(context.Background(), t, ref, cfg, false); err != nil {
		t.Fatal(err)
	}
	once := filepath.Join(t.TempDir(), "once")
	if _, err := openLake(t, once).Export(context.Background(), ref, "demo", lake.ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	// The records of every step are the uninterrupted run's. (The log
	// tables differ: the follower's log holds its drops too, which moves
	// the sequence numbers and the test clock's later times, and with them
	// the rubric versions and the checkpoints' times.)
	want, got := files(t, once), files(t, dir)
	for _, m := range []map[string][]byte{want, got} {
		for k := range m {
			switch strings.Split(k, "/")[0] {
			case "groups", "nodes", "turns", "advantages":
			default:
				delete(m, k)
			}
		}
	}
	sameFiles(t, got, want, "the kept file's lake")
	back := storetest.Open(t)
	if _, err := lk.Restore(context.Background(), back, "demo", lake.RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	if a, b := fingerprint(t, ref, "demo"), fingerprint(t, back, "demo"); a != b {
		t.Errorf("restored from the lake of a kept file:\n%s", firstDiff(a, b))
	}
}

// A write landing between a follower's export and its drop is exported
// by a later look, never taken as exported: the follower had read the
// log's end after the drop, so a run that ended meanwhile kept its last
// events out of the lake for good.
func TestFollowerExportsWhatLandsDuringADrop(t *testing.T) {
	db := storetest.Open(t)
	if err := train(context.Background(), t, db, trainConfig("demo", 4, 2), false); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	lk := openLake(t, filepath.Join(t.TempDir(), "lake"))
	f, err := lk.Follow(db, lake.FollowOptions{Interval: time.Hour, KeepSteps: 1, OnExport: func(*lake.ExportResult) {
		once.Do(func() { // a trainer's metrics of the last step, written while the follower works
			if err := db.UpdateRun("demo", func(r *store.RunTx) error {
				return r.PutScalars(4, map[string]float64{"loss": 0.5})
			}); err != nil {
				t.Error(err)
			}
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	var last uint64
	_ = db.View(func(tx *store.Tx) error { r, _ := tx.Run("demo"); last = r.LastSeq(); return nil })
	m, err := lk.Manifest(context.Background(), "demo")
	if err != nil {
		t.Fatal(err)
	}
	if end := max(m.Seq, tailSeq(m)); end != last {
		t.Fatalf("the lake's log ends at event %d, the file's at %d", end, last)
	}
}

func tailSeq(m *lake.Manifest) uint64 {
	if m.Tail == nil {
		return 0
	}
	return m.Tail.Seq
}

// An export cut short after it published some files, before its manifest
// counted them (a kill, an interrupt), is completed by the next one: the
// name was claimed first, so its files are not taken for another writer's;
// and the staging folder a killed export left is removed.
func TestACutShortExportIsCompleted(t *testing.T) {
	db := storetest.Open(t)
	if err := train(context.Background(), t, db, trainConfig("demo", 3, 1), false); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "lake")
	lk := openLake(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	res, err := lk.Export(ctx, db, "demo", lake.ExportOptions{OnProgress: func(done, _ int64) {
		if done == 3 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) || res == nil || len(res.Files) != 3 {
		t.Fatalf("cut-short export: %v, %+v", err, res)
	}
	// Staging folders of exports that were killed, which no process holds:
	// this build's, and an older build's (named .export-*).
	stale := []string{filepath.Join(dir, ".export.partial-killed"), filepath.Join(dir, ".export-killed")}
	for _, s := range stale {
		if err := os.MkdirAll(filepath.Join(s, "turns"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(s, ".lock"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := lk.Export(context.Background(), db, "demo", lake.ExportOptions{}); err != nil {
		t.Fatalf("the next export: %v", err)
	}
	for _, s := range stale {
		if _, err := os.Stat(s); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the killed export's staging folder %s is still there: %v", s, err)
		}
	}
	once := filepath.Join(t.TempDir(), "once")
	if _, err := openLake(t, once).Export(context.Background(), db, "demo", lake.ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, files(t, dir), files(t, once), "completed lake vs one export")
}

// Retention leaves a resume as it was: a run trained 5 steps while a
// follower kept the last 2 in the file, then resumed to 8, ends with the
// steps the file keeps, its rubric pools and its checkpoints exactly those
// of a run never dropped from.
func TestResumeAfterRetention(t *testing.T) {
	ref := storetest.Open(t)
	if err := train(context.Background(), t, ref, trainConfig("demo", 8, 6), false); err != nil {
		t.Fatal(err)
	}
	db := storetest.Open(t)
	lk := openLake(t, filepath.Join(t.TempDir(), "lake"))
	f, err := lk.Follow(db, lake.FollowOptions{Interval: time.Hour, KeepSteps: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := train(context.Background(), t, db, trainConfig("demo", 5, 6), false); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := train(context.Background(), t, db, trainConfig("demo", 8, 6), true); err != nil {
		t.Fatal(err)
	}
	for s := uint64(4); s <= 8; s++ {
		if a, b := stepDump(t, ref, s), stepDump(t, db, s); a != b {
			t.Errorf("step %d after a resume of a dropped file differs", s)
		}
	}
	kept := func(db *store.DB) string {
		var b strings.Builder
		_ = db.View(func(tx *store.Tx) error {
			r, _ := tx.Run("demo")
			rbs, _ := r.Rubrics("")
			for _, rb := range rbs {
				fmt.Fprintf(&b, "rubric %d %s usage %+v\n", rb.ID, rb.Pool, rb.Usage)
			}
			c, _ := r.Checkpoint(0)
			fmt.Fprintf(&b, "ckpt %d %x\n", c.Step, c.Inline)
			return nil
		})
		return b.String()
	}
	if a, b := kept(ref), kept(db); a != b {
		t.Errorf("rubrics and checkpoint after a resume of a dropped file:\n%s", firstDiff(a, b))
	}
	var info model.Run
	_ = db.View(func(tx *store.Tx) error { r, _ := tx.Run("demo"); info, _ = r.Info(); return nil })
	if info.DroppedStep != 3 {
		t.Errorf("dropped through step %d, want 3", info.DroppedStep)
	}
}
