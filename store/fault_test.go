package store_test

// Faults and the committed broken fixtures.
//
// Every fault starts from a real file written by the crash loop's workload
// and ends with the same two questions: did the caller get the right typed
// error, and is every byte that should be intact intact? Tests run as root,
// so nothing here relies on permission bits: read-only opens, MaxSize and a
// second process holding the lock stand in for them.

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// workloadFile writes transactions 1..txs of the workload with the given
// seed into a new file and closes it.
func workloadFile(t *testing.T, seed, txs uint64, pageSize int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "w.db")
	w := newWorkload(seed, nil)
	o := w.options(true)
	o.PageSize = pageSize
	db, err := store.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= txs; i++ {
		if err := w.apply(db, i, i == 1); err != nil {
			t.Fatalf("workload transaction %d: %v", i, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func digest(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// faultCount tallies the faults TestFaults injects, for RELIABILITY.md.
var faultCount map[string]int

func TestFaults(t *testing.T) {
	faultCount = map[string]int{}
	t.Run("MaxSizeMidTransaction", testMaxSizeMidTransaction)
	t.Run("ReadOnlyRefusesWrites", testReadOnlyRefusesWrites)
	t.Run("LockHeldByAnotherProcess", testLockHeld)
	t.Run("NewerFormat", testNewerFormat)
	t.Run("NotAPatrdbFile", testNotPatrdb)
	t.Run("Truncated", testTruncated)
	var parts []string
	for _, k := range []string{"maxsize", "readonly", "lock", "format", "foreign", "truncate"} {
		parts = append(parts, fmt.Sprintf("%s=%d", k, faultCount[k]))
	}
	t.Logf("faults injected: %s", strings.Join(parts, " "))
}

// A transaction that would grow the file past MaxSize fails at commit with
// ErrFull; nothing of it stays, earlier data is intact, the same DB keeps
// working, and a reopen without the cap continues the seeded workload
// exactly where it was.
func testMaxSizeMidTransaction(t *testing.T) {
	const seed, before = 21, 12
	path := workloadFile(t, seed, before, 4096)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	w := newWorkload(seed, nil)
	o := w.options(true)
	o.MaxSize = st.Size() + 256<<10
	db, err := store.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	// The heavy transaction: a new run whose node gets 2 MB of turns, far
	// past the cap, so the commit cannot allocate its pages.
	heavy := func(tx *store.Tx) error {
		r, err := tx.CreateRun("heavy", nil, nil)
		if err != nil {
			return err
		}
		g, err := r.OpenGroup(store.GroupSpec{Step: 1})
		if err != nil {
			return err
		}
		n, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID})
		if err != nil {
			return err
		}
		turns := make([]model.Turn, 100)
		for i := range turns {
			turns[i] = model.Turn{Action: "a", Observation: strings.Repeat("x", 20<<10)}
		}
		return r.AppendTurns(n.ID, 0, turns...)
	}
	for attempt := 0; attempt < 3; attempt++ {
		dump := dumpRaw(t, db)
		err := db.Update(heavy)
		if !errors.Is(err, store.ErrFull) {
			t.Fatalf("attempt %d: heavy transaction: %v, want ErrFull", attempt, err)
		}
		faultCount["maxsize"]++
		if !bytes.Equal(dump, dumpRaw(t, db)) {
			t.Fatalf("attempt %d: the failed transaction changed the file's records", attempt)
		}
		if vs, err := db.Check(nil); err != nil || len(vs) != 0 {
			t.Fatalf("attempt %d: check after ErrFull: %v %v", attempt, vs, err)
		}
		// The same DB goes on: the workload's next transaction fits.
		i := uint64(before + 1 + attempt)
		if err := w.apply(db, i, false); err != nil {
			t.Fatalf("workload transaction %d after ErrFull: %v", i, err)
		}
	}
	if st, err := os.Stat(path); err != nil || st.Size() > o.MaxSize {
		t.Errorf("file is %d bytes, MaxSize %d (%v)", st.Size(), o.MaxSize, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopen without the cap: the heavy transaction now commits, and the
	// workload's records are byte for byte what an uncapped run writes.
	o.MaxSize = 0
	if db, err = store.Open(path, o); err != nil {
		t.Fatal(err)
	}
	if err := db.Update(heavy); err != nil {
		t.Fatalf("heavy transaction without the cap: %v", err)
	}
	if vs, err := db.Check(nil); err != nil || len(vs) != 0 {
		t.Fatalf("check: %v %v", vs, err)
	}
	ref := workloadFile(t, seed, before+3, 4096)
	rdb, err := store.Open(ref, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if err := diffRun(db, rdb, "run-0001"); err != nil {
		t.Errorf("after ErrFull and reopen, the workload's run differs from an uncapped one: %v", err)
	}
}

// diffRun compares one run's buckets of two files byte for byte.
func diffRun(a, b *store.DB, run string) error {
	return storetest.Bolt(a).View(func(ta *bolt.Tx) error {
		return storetest.Bolt(b).View(func(tb *bolt.Tx) error {
			ra := ta.Bucket([]byte("runs")).Bucket([]byte(run))
			rb := tb.Bucket([]byte("runs")).Bucket([]byte(run))
			if ra == nil || rb == nil {
				return fmt.Errorf("run %s missing", run)
			}
			return diffBucketCursors("runs/"+run, ra.Cursor(), rb.Cursor(), ra.Bucket, rb.Bucket)
		})
	})
}

// dumpRaw serialises every bucket, key, value and sequence of the file.
func dumpRaw(t *testing.T, db *store.DB) []byte {
	t.Helper()
	var buf bytes.Buffer
	var walk func(path string, c *bolt.Cursor, sub func([]byte) *bolt.Bucket)
	walk = func(path string, c *bolt.Cursor, sub func([]byte) *bolt.Bucket) {
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if v == nil {
				b := sub(k)
				fmt.Fprintf(&buf, "%s/%x seq=%d\n", path, k, b.Sequence())
				walk(path+"/"+string(k), b.Cursor(), b.Bucket)
				continue
			}
			fmt.Fprintf(&buf, "%s %x=%x\n", path, k, v)
		}
	}
	if err := storetest.Bolt(db).View(func(tx *bolt.Tx) error {
		walk("", tx.Cursor(), tx.Bucket)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A read-only open refuses every write entry point with ErrReadOnly and
// never changes a byte of the file.
func testReadOnlyRefusesWrites(t *testing.T) {
	path := workloadFile(t, 22, 20, 4096)
	sum := digest(t, path)
	db, err := store.Open(path, &store.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	writes := map[string]func(*store.Tx) error{
		"Update": nil,
		"CreateRun": func(tx *store.Tx) error {
			_, err := tx.CreateRun("x", nil, nil)
			return err
		},
		"AppendTurns": func(tx *store.Tx) error {
			r, err := tx.Run("run-0001")
			if err != nil {
				return err
			}
			return r.AppendTurns(1, 0, model.Turn{Action: "a"})
		},
		"SetRunStatus": func(tx *store.Tx) error {
			r, err := tx.Run("run-0001")
			if err != nil {
				return err
			}
			return r.SetRunStatus(model.RunFailed)
		},
		"AppendEvent": func(tx *store.Tx) error {
			r, err := tx.Run("run-0001")
			if err != nil {
				return err
			}
			_, err = r.AppendEvent("x", 0, 0, 0, 0, nil)
			return err
		},
	}
	for name, fn := range writes {
		var err error
		if fn == nil {
			err = db.Update(func(*store.Tx) error { return nil })
		} else {
			err = db.View(fn) // a write method inside a read transaction
		}
		if !errors.Is(err, store.ErrReadOnly) {
			t.Errorf("%s on a read-only DB: %v, want ErrReadOnly", name, err)
		}
		faultCount["readonly"]++
	}
	if vs, err := db.Check(nil); err != nil || len(vs) != 0 {
		t.Errorf("check: %v %v", vs, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if digest(t, path) != sum {
		t.Error("a read-only DB changed the file")
	}
	// A read-only open creates nothing, and writes nothing to an empty
	// file (a writer's first open cut short, which reads as new: format_test.go).
	missing := filepath.Join(t.TempDir(), "missing.db")
	if _, err := store.Open(missing, &store.Options{ReadOnly: true}); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("read-only open of a missing file: %v, want ErrNotFound", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("read-only open created %s", missing)
	}
	empty := filepath.Join(t.TempDir(), "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if db, err := store.Open(empty, &store.Options{ReadOnly: true}); err != nil {
		t.Errorf("read-only open of an empty file: %v", err)
	} else if err := db.Close(); err != nil {
		t.Error(err)
	}
	if fi, err := os.Stat(empty); err != nil || fi.Size() != 0 {
		t.Errorf("a read-only open wrote to an empty file: %v, %v", fi, err)
	}
	faultCount["readonly"] += 2
}

const envFaultHold = "PATRDB_FAULT_HOLD" // the file a TestFaultLockHolder child locks

// TestFaultLockHolder is the child of testLockHeld: it opens the file
// writable, says "locked", and holds it until killed.
func TestFaultLockHolder(t *testing.T) {
	path := os.Getenv(envFaultHold)
	if path == "" {
		t.Skip("the lock-holding child of TestFaults/LockHeldByAnotherProcess")
	}
	db, err := store.Open(path, &store.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent kills us
}

// While a live process holds the file, Open waits Options.Timeout and
// fails with ErrTimeout (writable and read-only); after the holder is
// killed -9 the lock is gone with it and Open succeeds at once.
func testLockHeld(t *testing.T) {
	path := workloadFile(t, 23, 10, 4096)
	sum := digest(t, path)
	cmd := exec.Command(os.Args[0], "-test.run=^TestFaultLockHolder$", "-test.count=1")
	cmd.Env = append(os.Environ(), envFaultHold+"="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	if l, err := bufio.NewReader(out).ReadString('\n'); err != nil || strings.TrimSpace(l) != "locked" {
		t.Fatalf("lock holder did not start: %q %v", l, err)
	}
	const timeout = 300 * time.Millisecond
	for _, ro := range []bool{false, true} {
		start := time.Now()
		db, err := store.Open(path, &store.Options{ReadOnly: ro, Timeout: timeout})
		took := time.Since(start)
		if err == nil {
			db.Close()
			t.Fatalf("read-only %t: Open succeeded while another process holds the lock", ro)
		}
		if !errors.Is(err, store.ErrTimeout) {
			t.Fatalf("read-only %t: %v, want ErrTimeout", ro, err)
		}
		// bbolt polls the lock and gives up a poll (50 ms) early.
		if took < timeout/2 || took > timeout+10*time.Second {
			t.Errorf("read-only %t: Open gave up after %v with a %v timeout", ro, took, timeout)
		}
		faultCount["lock"]++
	}
	// kill -9: the kernel drops the flock with the process; no stale lock.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	start := time.Now()
	db, err := store.Open(path, &store.Options{Timeout: timeout})
	if err != nil {
		t.Fatalf("Open after the holder was killed: %v", err)
	}
	defer db.Close()
	if took := time.Since(start); took >= timeout {
		t.Errorf("Open after the holder died waited %v", took)
	}
	if vs, err := db.Check(nil); err != nil || len(vs) != 0 {
		t.Errorf("check: %v %v", vs, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if digest(t, path) != sum {
		t.Error("the file changed although nobody wrote")
	}
}

// setMeta rewrites a meta key with plain bbolt, below every patrdb rule.
func setMeta(t *testing.T, path, key string, val []byte) {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	if err := bdb.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("meta")).Put([]byte(key), val) }); err != nil {
		t.Fatal(err)
	}
}

// refusedUnchanged opens path writable and read-only, wants err, and
// wants the file's bytes as they were.
func refusedUnchanged(t *testing.T, path string, want error, count string) {
	t.Helper()
	sum := digest(t, path)
	for _, ro := range []bool{false, true} {
		db, err := store.Open(path, &store.Options{ReadOnly: ro, Timeout: time.Second})
		if err == nil {
			db.Close()
			t.Errorf("read-only %t: %s opened, want %v", ro, filepath.Base(path), want)
			continue
		}
		if !errors.Is(err, want) {
			t.Errorf("read-only %t: %s: %v, want %v", ro, filepath.Base(path), err, want)
		}
		faultCount[count]++
	}
	if digest(t, path) != sum {
		t.Errorf("%s: a refused open changed the file", filepath.Base(path))
	}
}

func testNewerFormat(t *testing.T) {
	path := workloadFile(t, 24, 10, 4096)
	v := make([]byte, 8)
	binary.BigEndian.PutUint64(v, store.FormatVersion+1)
	setMeta(t, path, "format", v)
	refusedUnchanged(t, path, store.ErrVersionMismatch, "format")

	zero := workloadFile(t, 24, 3, 4096)
	setMeta(t, zero, "format", make([]byte, 8))
	refusedUnchanged(t, zero, store.ErrCorrupt, "format")
}

func testNotPatrdb(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, bytes.Repeat([]byte("not a database\n"), 500), 0o600); err != nil {
		t.Fatal(err)
	}
	refusedUnchanged(t, text, store.ErrNotPatrdb, "foreign")

	noise := filepath.Join(dir, "noise.bin")
	b := make([]byte, 64<<10)
	_, _ = rand.Read(b)
	if err := os.WriteFile(noise, b, 0o600); err != nil {
		t.Fatal(err)
	}
	refusedUnchanged(t, noise, store.ErrNotPatrdb, "foreign")

	foreign := filepath.Join(dir, "foreign.db")
	bdb, err := bolt.Open(foreign, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("widgets"))
		if err != nil {
			return err
		}
		return b.Put([]byte("k"), []byte("v"))
	}); err != nil {
		t.Fatal(err)
	}
	bdb.Close()
	refusedUnchanged(t, foreign, store.ErrNotPatrdb, "foreign")

	magic := workloadFile(t, 25, 3, 4096)
	setMeta(t, magic, "magic", []byte("sqlite\x00"))
	refusedUnchanged(t, magic, store.ErrNotPatrdb, "foreign")
}

// A file cut at any page boundary, and inside pages, never panics: Open
// fails with a typed error, or Check reports the damage, or — when only
// unused tail pages were cut — the records are all there. A refused open
// leaves the bytes alone.
func testTruncated(t *testing.T) {
	base := workloadFile(t, 26, 30, 1024)
	orig, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	// Every page boundary and a cut inside every page, up to two pages past
	// the high-water mark (beyond it bbolt's file is preallocated slack),
	// and a few odd lengths.
	hwm := 0
	for page := 0; page < 2; page++ {
		hwm = max(hwm, int(binary.NativeEndian.Uint64(orig[page*1024+16+40:])))
	}
	var cuts []int
	for p := 1; p <= hwm+2 && p*1024 < len(orig); p++ {
		cuts = append(cuts, p*1024, p*1024-517)
	}
	cuts = append(cuts, 1, 100, len(orig)-1)
	outcomes := map[string]int{}
	for _, n := range cuts {
		path := filepath.Join(t.TempDir(), "cut.db")
		if err := os.WriteFile(path, orig[:n], 0o600); err != nil {
			t.Fatal(err)
		}
		for _, ro := range []bool{true, false} {
			sum := digest(t, path)
			db, err := store.Open(path, &store.Options{ReadOnly: ro, Timeout: time.Second})
			faultCount["truncate"]++
			if err != nil {
				if !errors.Is(err, store.ErrCorrupt) && !errors.Is(err, store.ErrNotPatrdb) {
					t.Errorf("cut at %d, read-only %t: untyped error %v", n, ro, err)
				}
				if digest(t, path) != sum {
					t.Errorf("cut at %d, read-only %t: a failed open changed the file", n, ro)
				}
				outcomes["open refused"]++
				continue
			}
			vs, err := db.Check(nil)
			db.Close()
			switch {
			case err != nil:
				t.Errorf("cut at %d: check: %v", n, err)
			case len(vs) > 0:
				outcomes["check found damage"]++
			default:
				if err := sameRecords(orig, path); err != nil {
					t.Errorf("cut at %d, read-only %t: Check is clean but %v", n, ro, err)
				}
				outcomes["only unused pages cut"]++
			}
		}
	}
	t.Logf("%d cuts of a %d-byte file: %v", len(cuts), len(orig), outcomes)
}

// ---------------------------------------------------------------------------
// Broken fixtures (testdata/corrupt/): small files with one kind of damage
// each, for `patrdb check` and for this test. Regenerate them (and the
// FuzzFile base) with PATRDB_WRITE_FIXTURES=1 go test -run TestWriteFixtures ./store/

const envWriteFixtures = "PATRDB_WRITE_FIXTURES"

// corruptFixture is one broken file and what Check (or Open) must say.
type corruptFixture struct {
	name    string
	rwErr   error  // a writable Open refuses the file with this (nil: not tried)
	openErr error  // a read-only Open refuses the file with this
	kind    string // else Check reports a violation of this kind ...
	bucket  string // ... in this bucket ...
	detail  string // ... whose detail contains this
	make    func(t *testing.T, path string)
}

var corruptFixtures = []corruptFixture{
	{name: "flipped-value", kind: "corrupt", bucket: "runs/run-0001/turns", detail: "CRC32C mismatch",
		make: func(t *testing.T, path string) { flipInValue(t, path, "turns", 3) }},
	{name: "flipped-meta-page", kind: "structure", bucket: "(file)", detail: "checksum mismatch",
		make: func(t *testing.T, path string) { flipMeta(t, path, true) }},
	{name: "both-meta-pages", openErr: store.ErrCorrupt,
		make: func(t *testing.T, path string) { flipMeta(t, path, true); flipMeta(t, path, false) }},
	{name: "truncated-tail", rwErr: store.ErrCorrupt, openErr: store.ErrCorrupt,
		make: truncateTail},
	{name: "dangling-parent", kind: "invariant", bucket: "runs/run-0001/nodes", detail: "parent 999 does not exist",
		make: danglingParent},
	{name: "frontier-pruned", kind: "invariant", bucket: "runs/run-0001/frontier", detail: "which is pruned",
		make: frontierPruned},
}

func fixturePath(name string) string { return filepath.Join("testdata", "corrupt", name+".db") }

// TestWriteFixtures regenerates testdata/corrupt and the FuzzFile base
// from the seeded workload. Run it only when the damage recipes or the
// format change: the fuzz corpus's inputs point into the base's bytes.
func TestWriteFixtures(t *testing.T) {
	if os.Getenv(envWriteFixtures) == "" {
		t.Skip("set " + envWriteFixtures + "=1 to rewrite testdata/corrupt and the FuzzFile base")
	}
	writeFuzzBase(t)
	writeFuzzSeeds(t)
	if err := os.MkdirAll(filepath.Join("testdata", "corrupt"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range corruptFixtures {
		path := workloadFile(t, 8, 14, 1024)
		f.make(t, path)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(fixturePath(f.name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", fixturePath(f.name), len(b))
	}
}

// TestCorruptFixtures opens each committed fixture (a copy: Open must not
// need to write, but the fixture stays pristine either way) and wants the
// fixture's violation from Check, or its error from Open.
func TestCorruptFixtures(t *testing.T) {
	for _, f := range corruptFixtures {
		t.Run(f.name, func(t *testing.T) {
			orig, err := os.ReadFile(fixturePath(f.name))
			if err != nil {
				t.Fatalf("%v (regenerate with %s=1 go test -run TestWriteFixtures ./store/)", err, envWriteFixtures)
			}
			path := filepath.Join(t.TempDir(), f.name+".db")
			if err := os.WriteFile(path, orig, 0o600); err != nil {
				t.Fatal(err)
			}
			if f.rwErr != nil {
				db, err := store.Open(path, &store.Options{Timeout: time.Second})
				if err == nil {
					db.Close()
					t.Fatalf("writable Open succeeded, want %v", f.rwErr)
				}
				if !errors.Is(err, f.rwErr) {
					t.Fatalf("writable Open: %v, want %v", err, f.rwErr)
				}
			}
			db, err := store.Open(path, &store.Options{ReadOnly: true, Timeout: time.Second})
			if f.openErr != nil {
				if err == nil {
					db.Close()
					t.Fatalf("Open succeeded, want %v", f.openErr)
				}
				if !errors.Is(err, f.openErr) {
					t.Fatalf("Open: %v, want %v", err, f.openErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer db.Close()
			vs, err := db.Check(nil)
			if err != nil && !errors.Is(err, store.ErrCorrupt) {
				t.Fatal(err)
			}
			found := false
			for _, v := range vs {
				if v.Kind == f.kind && v.Bucket == f.bucket && strings.Contains(v.Detail, f.detail) {
					found = true
				}
			}
			if !found {
				t.Errorf("Check did not report %s in %s (%q); it reported:", f.kind, f.bucket, f.detail)
				for _, v := range vs {
					t.Errorf("  %s", v)
				}
			}
			if digest(t, path) != sha256.Sum256(orig) {
				t.Error("a read-only open and check changed the file")
			}
		})
	}
}

// flipInValue flips one byte in the middle of the n-th value of a run's
// sub-bucket, found by its bytes in the file.
func flipInValue(t *testing.T, path, bucket string, n int) {
	t.Helper()
	var val []byte
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = bdb.View(func(tx *bolt.Tx) error {
		c := tx.Bucket([]byte("runs")).Bucket([]byte("run-0001")).Bucket([]byte(bucket)).Cursor()
		i := 0
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if i++; i == n {
				val = bytes.Clone(v)
			}
		}
		return nil
	})
	bdb.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(b, val)
	if val == nil || at < 0 || bytes.Index(b[at+1:], val) >= 0 {
		t.Fatalf("value %d of %s is not unique in the file", n, bucket)
	}
	b[at+len(val)/2] ^= 0x20
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// flipMeta flips a byte inside the checksummed part of the newer (or the
// older) meta page.
func flipMeta(t *testing.T, path string, newer bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ps := int(binary.NativeEndian.Uint32(b[16+8:]))
	txid := func(page int) uint64 { return binary.NativeEndian.Uint64(b[page*ps+16+48:]) }
	page := 0
	if (txid(1) > txid(0)) == newer {
		page = 1
	}
	b[page*ps+16+40] ^= 0x01 // the high-water mark
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// truncateTail cuts the file inside its used pages.
func truncateTail(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ps := int(binary.NativeEndian.Uint32(b[16+8:]))
	hwm := 0
	for page := 0; page < 2; page++ {
		hwm = max(hwm, int(binary.NativeEndian.Uint64(b[page*ps+16+40:])))
	}
	if err := os.WriteFile(path, b[:(hwm*2/3)*ps], 0o600); err != nil {
		t.Fatal(err)
	}
}

// rawRunEdit edits run-0001 with plain bbolt; values it writes are framed
// with a valid CRC, so only the invariants can see the damage.
func rawRunEdit(t *testing.T, path string, fn func(r *bolt.Bucket) error) {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	if err := bdb.Update(func(tx *bolt.Tx) error {
		return fn(tx.Bucket([]byte("runs")).Bucket([]byte("run-0001")))
	}); err != nil {
		t.Fatal(err)
	}
}

// danglingParent points the first child node at a node that never existed.
func danglingParent(t *testing.T, path string) {
	rawRunEdit(t, path, func(r *bolt.Bucket) error {
		nodes := r.Bucket([]byte("nodes"))
		c := nodes.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			rec, err := store.DecodeRecord("node", v)
			if err != nil {
				return err
			}
			n := rec.(*model.Node)
			if n.Parent == 0 {
				continue
			}
			n.Parent = 999
			val, err := store.EncodeRecord(n)
			if err != nil {
				return err
			}
			return nodes.Put(bytes.Clone(k), val)
		}
		return errors.New("no child node in the fixture")
	})
}

// frontierPruned puts a pruned node back on the frontier.
func frontierPruned(t *testing.T, path string) {
	rawRunEdit(t, path, func(r *bolt.Bucket) error {
		c := r.Bucket([]byte("nodes")).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			rec, err := store.DecodeRecord("node", v)
			if err != nil {
				return err
			}
			if rec.(*model.Node).Status == model.NodePruned {
				return r.Bucket([]byte("frontier")).Put(bytes.Clone(k), []byte{})
			}
		}
		return errors.New("no pruned node in the fixture")
	})
}
