package replay_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// A lake exported again and again while the run is written grows by whole
// settled steps, never rewrites a file, never conflicts, and ends byte for
// byte the lake a single export of the finished run writes.
func TestLakeGrowsWithALiveRun(t *testing.T) {
	db := storetest.Open(t)
	spec := smallSpec("live")
	spec.steps = 4
	lake := filepath.Join(t.TempDir(), "lake")
	seen := map[string]string{} // every file the lake ever held, with its bytes
	mutations, exports, grew := 0, 0, 0
	check := func() {
		t.Helper()
		res, err := export(t, db, spec.id, replay.ExportOptions{Out: lake, Format: replay.Parquet})
		if err != nil {
			t.Fatalf("export %d: %v", exports, err)
		}
		exports++
		if len(res.Files) > 0 {
			grew++
		}
		var info store.Run
		_ = db.View(func(tx *store.Tx) error { r, _ := tx.Run(spec.id); info, _ = r.Info(); return nil })
		for _, s := range res.HeldBack {
			if info.Status != store.RunRunning || s < info.LastStep {
				t.Errorf("held back step %d of a %s run at last step %d", s, info.Status, info.LastStep)
			}
		}
		for _, f := range res.Files {
			if f.Step > info.LastStep && info.Status == store.RunRunning {
				t.Errorf("export %d wrote %s of a step not checkpointed yet (last step %d)", exports, f.Path, info.LastStep)
			}
		}
		for path, body := range treeOf(t, lake) {
			if path != "." && strings.HasPrefix(filepath.Base(path), ".") {
				t.Errorf("export %d left %s", exports, path)
			}
			if old, ok := seen[path]; ok && old != body {
				t.Errorf("export %d rewrote %s", exports, path)
			}
			seen[path] = body
		}
	}
	buildRun(t, db, spec, perTx(t, db, spec.id, func() {
		if mutations++; mutations%20 == 0 {
			check()
		}
	}))
	check() // the run is finished: every step is settled
	if exports < 5 || grew < 3 {
		t.Fatalf("%d exports, %d added files: the run did not grow under the exports", exports, grew)
	}

	// Again: nothing new, every partition reported as skipped.
	res, err := export(t, db, spec.id, replay.ExportOptions{Out: lake, Format: replay.Parquet})
	if err != nil || len(res.Files) != 0 || len(res.Skipped) == 0 || len(res.HeldBack) != 0 {
		t.Fatalf("export of an exported run: %v, %d files, %d skipped, held back %v", err, len(res.Files), len(res.Skipped), res.HeldBack)
	}
	once := filepath.Join(t.TempDir(), "once")
	if _, err := export(t, db, spec.id, replay.ExportOptions{Out: once, Format: replay.Parquet}); err != nil {
		t.Fatal(err)
	}
	if got, want := treeOf(t, lake), treeOf(t, once); !equalTrees(got, want) {
		t.Errorf("grown lake differs from one export:\n got  %v\n want %v", keys(got), keys(want))
	}
	if len(res.Skipped) != len(dirsAt(t, once, 3)) {
		t.Errorf("%d partitions skipped, the lake has %d", len(res.Skipped), len(dirsAt(t, once, 3)))
	}
}

// dirsAt lists the folders depth levels below root.
func dirsAt(t *testing.T, root string, depth int) []string {
	t.Helper()
	pattern := root
	for range depth {
		pattern = filepath.Join(pattern, "*")
	}
	m, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Another run under an id the lake holds is refused whole, the lake as it
// was; force replaces the partitions that differ; other runs join freely.
func TestLakeRefusesOtherContent(t *testing.T) {
	first, second := storetest.Open(t), storetest.Open(t)
	a := smallSpec("x")
	buildOneTx(t, first, a)
	b := a
	b.seed = 2
	buildOneTx(t, second, b)
	other := smallSpec("y")
	buildOneTx(t, second, other)

	lake := filepath.Join(t.TempDir(), "lake")
	if _, err := export(t, first, "x", replay.ExportOptions{Out: lake, Format: replay.Parquet}); err != nil {
		t.Fatal(err)
	}
	before := treeOf(t, lake)
	_, err := export(t, second, "x", replay.ExportOptions{Out: lake, Format: replay.Parquet})
	if !errors.Is(err, replay.ErrLakeConflict) || !strings.Contains(err.Error(), "run=x/step=") {
		t.Fatalf("other content under run x: %v, want ErrLakeConflict naming the partition", err)
	}
	if got := treeOf(t, lake); !equalTrees(got, before) {
		t.Errorf("refused export changed the lake:\n got  %v\n want %v", keys(got), keys(before))
	}

	res, err := export(t, second, "y", replay.ExportOptions{Out: lake, Format: replay.Parquet})
	if err != nil || len(res.Files) == 0 || len(res.Skipped) != 0 {
		t.Fatalf("a new run into the lake: %v, %+v", err, res)
	}
	for path, body := range before {
		if got, ok := treeOf(t, lake)[path]; !ok || got != body {
			t.Errorf("adding run y changed %s", path)
		}
	}

	if _, err := export(t, second, "x", replay.ExportOptions{Out: lake, Format: replay.Parquet, Force: true}); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(t.TempDir(), "fresh")
	if _, err := export(t, second, "x", replay.ExportOptions{Out: fresh, Format: replay.Parquet}); err != nil {
		t.Fatal(err)
	}
	got := treeOf(t, lake)
	for path, body := range treeOf(t, fresh) {
		if got[path] != body {
			t.Errorf("after force, %s is not the second run's", path)
		}
	}
}

// The lake root may not be a file, and is made when absent.
func TestLakeRoot(t *testing.T) {
	db := storetest.Open(t)
	buildOneTx(t, db, smallSpec("r"))
	base := t.TempDir()
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := export(t, db, "r", replay.ExportOptions{Out: file, Format: replay.Parquet}); !errors.Is(err, replay.ErrOutExists) {
		t.Errorf("lake root is a file: %v, want ErrOutExists", err)
	}
	deep := filepath.Join(base, "a", "b", "lake")
	res, err := export(t, db, "r", replay.ExportOptions{Out: deep, Format: replay.Parquet})
	if err != nil || res.Dir != deep || len(res.Files) == 0 {
		t.Fatalf("export into a missing folder: %v %+v", err, res)
	}
}

// A partition written by another version of the writer (other encoding,
// same rows), or with another tool's marker beside it, is the same
// content: skipped, not a conflict.
func TestLakeComparesRowsNotEncoding(t *testing.T) {
	db := storetest.Open(t)
	buildOneTx(t, db, smallSpec("e"))
	lake := filepath.Join(t.TempDir(), "lake")
	if _, err := export(t, db, "e", replay.ExportOptions{Out: lake, Format: replay.Parquet}); err != nil {
		t.Fatal(err)
	}
	part := filepath.Join(lake, "nodes", "run=e", "step=1", "part-00000.parquet")
	rows, err := parquet.ReadFile[replay.NodeRow](part)
	if err != nil || len(rows) < 2 {
		t.Fatalf("%d rows: %v", len(rows), err)
	}
	rewrite := func(rows []replay.NodeRow) string {
		t.Helper()
		var buf bytes.Buffer
		w := parquet.NewGenericWriter[replay.NodeRow](&buf, parquet.Compression(&parquet.Snappy), parquet.MaxRowsPerRowGroup(1))
		if _, err := w.Write(rows); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(part, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	rewrite(rows)
	// Another tool's marker beside the parts is not content either.
	if err := os.WriteFile(filepath.Join(filepath.Dir(part), "_SUCCESS"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := export(t, db, "e", replay.ExportOptions{Out: lake, Format: replay.Parquet})
	if err != nil || len(res.Files) != 0 {
		t.Fatalf("same rows, other encoding: %v, %d files written", err, len(res.Files))
	}
	rows[1].Reward = nil
	body := rewrite(rows)
	_, err = export(t, db, "e", replay.ExportOptions{Out: lake, Format: replay.Parquet})
	var conflict *replay.LakeConflictError
	if !errors.As(err, &conflict) || len(conflict.Partitions) != 1 || conflict.Partitions[0] != "nodes/run=e/step=1" {
		t.Fatalf("one changed row: %v", err)
	}
	if b, _ := os.ReadFile(part); string(b) != body {
		t.Error("the refused export changed the lake's file")
	}
}
