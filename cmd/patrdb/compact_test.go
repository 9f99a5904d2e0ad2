package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

func TestCompactGolden(t *testing.T) {
	checkGoldens(t, []goldenCase{
		{name: "compact", args: []string{"compact", "--out", "$OUT/a.db"}},
		{name: "compact_json", args: []string{"compact", "--out", "$OUT/b.db", "--json"}},
	})
}

// dump lists every bucket, key, value and sequence of a bbolt file.
func dump(t *testing.T, path string) string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var b bytes.Buffer
	var walk func(prefix string, bk *bolt.Bucket)
	walk = func(prefix string, bk *bolt.Bucket) {
		fmt.Fprintf(&b, "%s seq=%d\n", prefix, bk.Sequence())
		_ = bk.ForEach(func(k, v []byte) error {
			if v == nil {
				walk(prefix+"/"+string(k), bk.Bucket(k))
			} else {
				fmt.Fprintf(&b, "%s %x=%x\n", prefix, k, v)
			}
			return nil
		})
	}
	if err := db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, bk *bolt.Bucket) error {
			walk(string(name), bk)
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// highWater is the size of a bbolt file's allocated pages (free ones
// included), what compaction shrinks.
func highWater(t *testing.T, path string) int64 {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int64
	_ = db.View(func(tx *bolt.Tx) error { n = tx.Size(); return nil })
	return n
}

func TestCompactCopiesEverything(t *testing.T) {
	for _, pageSize := range []int{4096, 16384} {
		t.Run(fmt.Sprint(pageSize), func(t *testing.T) {
			dir := t.TempDir()
			src := filepath.Join(dir, "src.db")
			o := storetest.Options()
			o.PageSize = pageSize
			db := storetest.OpenPath(t, src, o)
			// Churn: write and delete so the source has free pages to drop.
			if err := db.Update(func(tx *store.Tx) error {
				r, err := tx.CreateRun("r", nil, nil)
				if err != nil {
					return err
				}
				g, err := r.OpenGroup(store.GroupSpec{Step: 1, Task: "t"})
				if err != nil {
					return err
				}
				n, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID})
				if err != nil {
					return err
				}
				big := model.Turn{Action: string(bytes.Repeat([]byte("a"), 3000)), ActionTokens: make([]uint32, 600)}
				for i := 0; i < 40; i++ {
					if err := r.AppendTurns(n.ID, i, big); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 40; i++ { // shrinking turns frees their old pages
				if err := db.Update(func(tx *store.Tx) error {
					r, _ := tx.Run("r")
					return r.AppendTurns(1, i, model.Turn{Action: fmt.Sprint("rewrite ", i)})
				}); err != nil {
					t.Fatal(err)
				}
			}
			db.Close()
			before := fileHash(t, src)
			out := filepath.Join(dir, "out.db")
			r := cli(t, "--db", src, "compact", "--out", out, "--json").ok(t)
			var res compactOutput
			if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
				t.Fatal(err)
			}
			if fileHash(t, src) != before {
				t.Error("compact changed its source")
			}
			if got, want := dump(t, out), dump(t, src); got != want {
				t.Errorf("the copy's buckets, keys, values or sequences differ from the source's")
			}
			cp, err := bolt.Open(out, 0o600, &bolt.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			if ps := cp.Info().PageSize; ps != pageSize || res.PageSize != pageSize {
				t.Errorf("copy page size %d (reported %d), source %d", ps, res.PageSize, pageSize)
			}
			cp.Close()
			// Small files are sized in bbolt's mmap steps, so compare the
			// pages in use: the copy drops the source's free pages.
			if used, srcUsed := highWater(t, out), highWater(t, src); used >= srcUsed {
				t.Errorf("copy uses %d bytes of pages, source %d", used, srcUsed)
			}
			fi, _ := os.Stat(out)
			if res.OutBytes != fi.Size() || res.Runs != 1 {
				t.Errorf("report %+v; copy is %d bytes", res, fi.Size())
			}
			cli(t, "--db", out, "check").ok(t)
			leftovers, _ := filepath.Glob(filepath.Join(dir, ".out.db.tmp-*"))
			if len(leftovers) != 0 {
				t.Errorf("temporary files left: %v", leftovers)
			}
		})
	}
}

func TestCompactRefusesToOverwrite(t *testing.T) {
	path := fixture(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "taken.db")
	if err := os.WriteFile(out, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	cli(t, "--db", path, "compact", "--out", out).fails(t, 2, out, "already exists")
	if b, _ := os.ReadFile(out); string(b) != "keep me" {
		t.Errorf("compact overwrote %s: %q", out, b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("compact left files behind: %v", entries)
	}
	cli(t, "--db", path, "compact").fails(t, 2, `"out" not set`)
	cli(t, "--db", path, "compact", "--out", "").fails(t, 2, "--out is empty")
	cli(t, "--db", path, "compact", "--out", filepath.Join(dir, "no", "such", "dir.db")).fails(t, 2, "no such file or directory")
	cli(t, "--db", filepath.Join(dir, "missing.db"), "compact", "--out", filepath.Join(dir, "x.db")).fails(t, 2, "does not exist")
	if _, err := os.Stat(filepath.Join(dir, "x.db")); err == nil {
		t.Error("compact of a missing file created --out")
	}
}

// TestCompactProgressOnlyOnATerminal: store.Compact's progress is drawn as
// a bar on a terminal's stderr, and nothing is written to a pipe.
func TestCompactProgressOnlyOnATerminal(t *testing.T) {
	path := fixture(t)
	r := cliEnv(t, testEnv{terminal: true}, "--db", path, "compact", "--out", filepath.Join(t.TempDir(), "a.db"))
	if r.code != 0 || !strings.Contains(r.stderr, "compact") {
		t.Errorf("terminal: exit %d, stderr %q; want a progress bar", r.code, r.stderr)
	}
	cli(t, "--db", path, "compact", "--out", filepath.Join(t.TempDir(), "b.db")).ok(t) // ok: nothing on stderr
}
