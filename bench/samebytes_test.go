package main

import (
	"bytes"
	"io"
	"math"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/internal/workload"
)

// TestSameBytesAnchorStoresPatrdbsRecords: after the same transactions,
// the same-bytes anchor's file holds every key patrdb's file holds, in the
// same buckets, with values of the same length, and the very same turn
// bytes — so the ratio against it measures patrdb's own work, not a
// difference in what is stored. (Other values may differ only in the
// clock: event and record times.)
func TestSameBytesAnchorStoresPatrdbsRecords(t *testing.T) {
	cfg := matrixSizes(1, true)[1].cfg // ~1 KB turns
	gen, err := workload.NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	batches := []workload.Batch{gen.Next()}
	cs, paths := newContenders(t, cPatrdb, cSameInside, cSameAhead, cFloor)
	res, err := runAppendAll(cs, paths, batches, 0, collectEachTxn)
	if err != nil {
		t.Fatal(err)
	}
	want := boltContents(t, paths[0])
	if len(want["runs/bench/turns"]) != batches[0].Stats.Turns {
		t.Fatalf("patrdb stored %d turns, the batch holds %d", len(want["runs/bench/turns"]), batches[0].Stats.Turns)
	}
	var total int
	for _, kvs := range want {
		for k, v := range kvs {
			total += len(k) + len(v)
		}
	}
	for _, p := range paths[1:3] {
		got := boltContents(t, p)
		for bucket, kvs := range want {
			if len(got[bucket]) != len(kvs) {
				t.Errorf("%s: bucket %s holds %d keys, patrdb's %d", filepath.Base(p), bucket, len(got[bucket]), len(kvs))
			}
			for k, v := range kvs {
				g, ok := got[bucket][k]
				switch {
				case !ok:
					t.Errorf("%s: bucket %s lacks key %x", filepath.Base(p), bucket, k)
				case len(g) != len(v), strings.HasSuffix(bucket, "/turns") && g != v:
					t.Errorf("%s: bucket %s key %x: %d bytes, patrdb's %d", filepath.Base(p), bucket, k, len(g), len(v))
				}
			}
		}
		for bucket := range got {
			if _, ok := want[bucket]; !ok {
				t.Errorf("%s: bucket %s is not patrdb's", filepath.Base(p), bucket)
			}
		}
	}
	// The floor wrote at least every live key and value once (more: the
	// records rewritten by later transactions, and deleted frontier keys).
	if floor := res[3].Apparent; floor < int64(total) {
		t.Errorf("disk floor wrote %d bytes, patrdb's records are %d", floor, total)
	}
}

// boltContents is every bucket of a bbolt file (by its path of names) and
// its keys and values.
func boltContents(t *testing.T, path string) map[string]map[string]string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string]map[string]string{}
	var walk func(name string, b *bolt.Bucket) error
	walk = func(name string, b *bolt.Bucket) error {
		out[name] = map[string]string{}
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				return walk(name+"/"+string(k), b.Bucket(k))
			}
			out[name][string(k)] = string(bytes.Clone(v))
			return nil
		})
	}
	if err := db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error { return walk(string(name), b) })
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMatrixSmoke runs the append matrix at smoke size on tiny turns:
// every contender stores every transaction, every column is a finite
// ratio, and the split of each commit's time has bbolt's commit measured
// for patrdb and raw bbolt alike.
func TestMatrixSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every contender against a real disk")
	}
	cfg := smokeConfig(defaultConfig(moduleRoot()))
	cfg.Out, cfg.Log, cfg.MatrixSizes = t.TempDir(), io.Discard, []string{"tiny"}
	var out strings.Builder
	if err := runMatrix(cfg, &out); err != nil {
		t.Fatal(err)
	}
	rows := 0
	for _, line := range strings.Split(out.String(), "\n") {
		if !strings.HasPrefix(line, "| tiny | ") {
			continue
		}
		rows++
		cols := strings.Split(strings.Trim(line, "| "), " | ")
		if rows <= 2 && len(cols) != 10 {
			t.Errorf("row %q: %d columns, want 10", line, len(cols))
		}
		first := 4
		if rows == 3 || rows == 4 { // milliseconds per commit
			if len(cols) != 8 {
				t.Errorf("row %q: %d columns, want 8", line, len(cols))
			}
			first = 2
		}
		for _, c := range cols[first:] {
			num, _, _ := strings.Cut(c, "×")
			if x, err := strconv.ParseFloat(num, 64); err != nil || !(x > 0) || math.IsInf(x, 0) {
				t.Errorf("row %q: column %q is not a positive ratio", line, c)
			}
		}
	}
	if rows != 6 { // two speed rows, two of the time's split, two bytes-on-disk rows
		t.Errorf("%d tiny rows, want 6:\n%s", rows, out.String())
	}
}

// BenchmarkMatrixCommits prepares the anchor's transactions once and
// applies them to a file started afresh by reopen each iteration: reopen
// leaves only the run's first records, and the prepared transactions
// leave the file as they did the first time, key for key.
func TestSameBytesReopenAppliesPreparedAgain(t *testing.T) {
	_, steps := twoSteps(t, matrixSizes(1, true)[0]) // tiny turns
	c := &sameC{encodeInside: true, noSync: true}
	path := filepath.Join(t.TempDir(), fileName(cSameInside))
	if err := c.open(path); err != nil {
		t.Fatal(err)
	}
	defer c.close()
	var prepared []any
	for _, s := range steps {
		p, err := c.prepare(workload.Materialize(s))
		if err != nil {
			t.Fatal(err)
		}
		prepared = append(prepared, p)
	}
	var files []map[string]map[string]string
	for range 2 {
		if err := c.reopen(); err != nil {
			t.Fatal(err)
		}
		if err := c.db.View(func(tx *bolt.Tx) error {
			if b := tx.Bucket([]byte("runs")).Bucket([]byte(benchRun)).Bucket([]byte("turns")); b != nil && b.Stats().KeyN != 0 {
				t.Errorf("reopen left %d turns in the file", b.Stats().KeyN)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		for _, p := range prepared {
			if err := c.apply(p); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.db.Close(); err != nil {
			t.Fatal(err)
		}
		c.db = nil
		files = append(files, boltContents(t, path))
	}
	if turns := len(files[0]["runs/bench/turns"]); turns == 0 {
		t.Fatal("the prepared steps stored no turns")
	}
	if !reflect.DeepEqual(files[0], files[1]) {
		t.Error("the file differs the second time the prepared steps are applied")
	}
}

// TestStepTargetsSmoke runs -step-targets at smoke size: the rows are the
// full run's step-commit targets, one per size asked for, each with a
// positive ratio and a verdict against its target.
func TestStepTargetsSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("runs patrdb and raw bbolt against a real disk")
	}
	cfg := smokeConfig(defaultConfig(moduleRoot()))
	cfg.Out, cfg.Log, cfg.MatrixSizes = t.TempDir(), io.Discard, []string{"10kb"}
	var out strings.Builder
	if err := runStepTargets(cfg, &out); err == nil || out.Len() > 0 {
		t.Errorf("-matrix-sizes 10kb, which has no step target: error %v, output %q", err, out.String())
	}
	cfg.MatrixSizes = []string{"tiny"}
	if err := runStepTargets(cfg, &out); err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "| same, ") {
			rows = append(rows, line)
		}
	}
	if len(rows) != 1 || !strings.HasPrefix(rows[0], "| same, tiny turns") {
		t.Fatalf("want the tiny-turn target's row alone:\n%s", out.String())
	}
	cols := strings.Split(strings.Trim(rows[0], "| "), " | ")
	if len(cols) != 7 {
		t.Fatalf("row %q: %d columns, want 7", rows[0], len(cols))
	}
	num, _, _ := strings.Cut(cols[3], "×")
	if x, err := strconv.ParseFloat(num, 64); err != nil || !(x > 0) || math.IsInf(x, 0) {
		t.Errorf("row %q: ratio %q is not positive", rows[0], cols[3])
	}
	if cols[5] != "≥ 0.8×" || !slices.Contains([]string{"**met**", "**not met**", "inconclusive"}, cols[6]) {
		t.Errorf("row %q: target %q, verdict %q", rows[0], cols[5], cols[6])
	}
}

// -collect rep collects the heap once before a cell and leaves the
// collector off while the contenders run, then as it was; the default
// collects before every transaction of every contender.
func TestCollectModes(t *testing.T) {
	gen, err := workload.NewGenerator(matrixSizes(1, true)[0].cfg)
	if err != nil {
		t.Fatal(err)
	}
	batches := []workload.Batch{gen.Next()}
	names := []string{cPatrdb, cSameInside}
	gcPercent := func() int { p := debug.SetGCPercent(-1); debug.SetGCPercent(p); return p }
	before := gcPercent()
	for _, mode := range []collectMode{collectEachTxn, collectRep} {
		cs, paths := newContenders(t, names...)
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		gcs := ms.NumGC
		if _, err := runAppendAll(cs, paths, batches, 0, mode); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&ms)
		n, txns := ms.NumGC-gcs, uint32(len(names)*len(batches[0].Txns))
		if mode == collectRep && n != 1 || mode == collectEachTxn && n < txns {
			t.Errorf("-collect %s: %d collections over %d transactions", mode, n, txns)
		}
		if p := gcPercent(); p != before {
			t.Errorf("-collect %s left the collector at %d%%, was %d%%", mode, p, before)
		}
	}
}

// newContenders makes the contenders names, each with its file in a fresh
// directory.
func newContenders(t *testing.T, names ...string) ([]contender, []string) {
	t.Helper()
	dir := t.TempDir()
	cs := make([]contender, len(names))
	paths := make([]string, len(names))
	for i, n := range names {
		c, err := newContender(n)
		if err != nil {
			t.Fatal(err)
		}
		cs[i], paths[i] = c, filepath.Join(dir, fileName(n))
	}
	return cs, paths
}
