package store_test

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	bolt "go.etcd.io/bbolt"
)

// ViewRun and UpdateRun are View and Update bound to one run: a run the
// file does not hold is ErrNotFound before fn runs, UpdateRun commits
// what fn wrote when it returns nil and nothing when it fails, and
// ViewRun cannot write.
func TestViewRunAndUpdateRun(t *testing.T) {
	db := storetest.Open(t)
	update(t, db, func(tx *store.Tx) error { _, err := tx.CreateRun("r", nil, nil); return err })
	ran := false
	for name, do := range map[string]func(string, func(*store.RunTx) error) error{"ViewRun": db.ViewRun, "UpdateRun": db.UpdateRun} {
		if err := do("nope", func(*store.RunTx) error { ran = true; return nil }); !errors.Is(err, model.ErrNotFound) || ran {
			t.Errorf("%s of a missing run: %v (fn ran: %t), want ErrNotFound", name, err, ran)
		}
	}
	failed := errors.New("fn failed")
	if err := db.UpdateRun("r", func(r *store.RunTx) error {
		if err := r.SetRunStatus(model.RunFailed); err != nil {
			return err
		}
		return failed
	}); err != failed {
		t.Fatalf("UpdateRun whose fn fails: %v", err)
	}
	status := func() model.RunStatus {
		var st model.RunStatus
		if err := db.ViewRun("r", func(r *store.RunTx) error {
			info, err := r.Info()
			st = info.Status
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := status(); st != model.RunRunning {
		t.Fatalf("after a failed UpdateRun the run is %q, want it unchanged (running)", st)
	}
	if err := db.UpdateRun("r", func(r *store.RunTx) error { return r.SetRunStatus(model.RunFinished) }); err != nil {
		t.Fatal(err)
	}
	if st := status(); st != model.RunFinished {
		t.Fatalf("after UpdateRun the run is %q, want finished", st)
	}
	if err := db.ViewRun("r", func(r *store.RunTx) error { return r.SetRunStatus(model.RunFailed) }); err == nil {
		t.Fatal("ViewRun wrote")
	}
}

// Each time a commit grows the file, bbolt truncates and fsyncs it before
// writing the pages: a second flush in that commit. So a young file that
// takes commits of a few MiB grows ahead of them, by at least four times
// the commit: the three commits after one that grew the file never grow
// it again, and the file stays within a few commits of its data. (Under
// NoSync the file is not grown ahead: it grows as bbolt writes its pages,
// with no flush to spare.)
func TestFileGrowsAheadOfItsCommits(t *testing.T) {
	path := tempPath(t, "grow.db")
	o := storetest.Options()
	o.NoSync = false
	db := storetest.OpenPath(t, path, o)
	turn := textTurn("t")
	turn.ObservationTokens = make([]uint32, 2500) // 10 KB
	var node uint64
	update(t, db, func(tx *store.Tx) error {
		_, n, err := runWithRoot(tx)
		node = n.ID
		return err
	})
	size := func() int64 {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	const commits, perCommit = 10, 200 // ~2 MB a commit
	prev, grew := size(), make([]bool, commits)
	for i := range commits {
		inRun(t, db, true, "r", func(r *store.RunTx) error {
			turns := make([]model.Turn, perCommit)
			for j := range turns {
				turns[j] = turn
			}
			return r.AppendTurns(node, i*perCommit, turns...)
		})
		now := size()
		grew[i], prev = now != prev, now
		for j := max(i-3, 0); j < i; j++ {
			if grew[i] && grew[j] {
				t.Errorf("commits %d and %d of %d turns of 10 KB both grew the file (to %d bytes)", j+1, i+1, perCommit, now)
			}
		}
	}
	if data := int64(commits * perCommit * 10_000); prev > 3*data {
		t.Errorf("%d bytes of turns in a %d-byte file", data, prev)
	}
}

// Opening files: format versions, files that are not ours, the lock held by
// another process, read-only use, the size cap and the options.

// goodFile writes the fixture into a new file, closes it and returns its
// path. The file is checked when the test ends.
func goodFile(t *testing.T) string {
	t.Helper()
	path := tempPath(t, "patr.db")
	db := storetest.OpenPath(t, path, storetest.Options())
	buildFixture(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// rawUpdate edits a file with plain bbolt, below every patrdb rule.
func rawUpdate(t *testing.T, path string, fn func(*bolt.Tx) error) {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(fn); err != nil {
		t.Fatal(err)
	}
	if err := bdb.Close(); err != nil {
		t.Fatal(err)
	}
}

// refused opens path (writable and read-only) expecting want, and checks
// the file's bytes did not change and the error names the file.
func refused(t *testing.T, path string, want error) {
	t.Helper()
	before := fileDigest(t, path)
	for _, ro := range []bool{false, true} {
		o := storetest.Options()
		o.ReadOnly = ro
		o.Timeout = 5 * time.Second
		db, err := store.Open(path, o) // expected to fail: nothing to check at cleanup
		if err == nil {
			db.Close()
			t.Fatalf("read-only %t: Open succeeded, want %v", ro, want)
		}
		if !errors.Is(err, want) {
			t.Errorf("read-only %t: Open: %v, want %v", ro, err, want)
		}
		if !strings.Contains(err.Error(), path) {
			t.Errorf("read-only %t: error %q does not name the file", ro, err)
		}
		if after := fileDigest(t, path); after != before {
			t.Fatalf("read-only %t: refused file changed: sha256 %s -> %s", ro, before, after)
		}
	}
}

func TestOpenRefusesNewerFormat(t *testing.T) {
	good := goodFile(t)
	path := filepath.Join(t.TempDir(), "newer.db")
	copyFile(t, good, path)
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		v := make([]byte, 8)
		binary.BigEndian.PutUint64(v, store.FormatVersion+1)
		return tx.Bucket([]byte("meta")).Put([]byte("format"), v)
	})
	refused(t, path, store.ErrVersionMismatch)
}

func TestOpenRefusesForeignFiles(t *testing.T) {
	dir := t.TempDir()

	otherBolt := filepath.Join(dir, "other.bolt")
	rawUpdate(t, otherBolt, func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("widgets"))
		if err != nil {
			return err
		}
		return b.Put([]byte("k"), []byte("v"))
	})

	badMagic := filepath.Join(dir, "badmagic.db")
	copyFile(t, goodFile(t), badMagic)
	rawUpdate(t, badMagic, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("meta")).Put([]byte("magic"), []byte("sqlite\x00"))
	})

	random := filepath.Join(dir, "random.bin")
	junk := make([]byte, 64<<10)
	if _, err := rand.Read(junk); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(random, junk, 0o600); err != nil {
		t.Fatal(err)
	}

	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte(strings.Repeat("not a database\n", 2000)), 0o600); err != nil {
		t.Fatal(err)
	}

	tiny := filepath.Join(dir, "tiny.bin")
	if err := os.WriteFile(tiny, []byte("patrdb"), 0o600); err != nil {
		t.Fatal(err)
	}

	for name, path := range map[string]string{"bbolt with other buckets": otherBolt, "bad magic": badMagic, "random bytes": random, "text": text, "tiny": tiny} {
		t.Run(name, func(t *testing.T) { refused(t, path, store.ErrNotPatrdb) })
	}
}

// lockHolderEnv selects the child role of TestOpenTimeoutSecondProcess.
const lockHolderEnv = "PATRDB_STORE_TEST_HOLD_LOCK"

// TestLockHolderProcess is not a test: run as a child by
// TestOpenTimeoutSecondProcess, it opens the file named by the environment,
// says "locked" and holds the lock until its stdin closes or it is killed.
func TestLockHolderProcess(t *testing.T) {
	path := os.Getenv(lockHolderEnv)
	if path == "" {
		t.Skip("child process of TestOpenTimeoutSecondProcess")
	}
	// Not storetest.OpenPath: this process only holds the lock, the parent
	// checks the file.
	db, err := store.Open(path, storetest.Options())
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(3)
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = db.Close()
	os.Exit(0)
}

// startLockHolder runs this test binary as a second process holding path.
func startLockHolder(t *testing.T, path string) (*exec.Cmd, io.WriteCloser) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHolderProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), lockHolderEnv+"="+path)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // never leave a child behind, whatever happened
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "locked" {
		t.Fatalf("lock holder did not start: %q, %v", line, err)
	}
	return cmd, stdin
}

func TestOpenTimeoutSecondProcess(t *testing.T) {
	for _, release := range []string{"exit", "kill"} {
		t.Run(release, func(t *testing.T) {
			path := goodFile(t)
			before := fileDigest(t, path)
			cmd, stdin := startLockHolder(t, path)

			for _, ro := range []bool{false, true} {
				o := storetest.Options()
				o.Timeout = 200 * time.Millisecond
				o.ReadOnly = ro
				start := time.Now()
				db, err := store.Open(path, o) // expected to fail while the child holds the lock
				waited := time.Since(start)
				if err == nil {
					db.Close()
					t.Fatalf("read-only %t: Open succeeded while another process holds the file", ro)
				}
				if !errors.Is(err, store.ErrTimeout) {
					t.Fatalf("read-only %t: Open: %v, want ErrTimeout", ro, err)
				}
				if !strings.Contains(err.Error(), path) {
					t.Errorf("read-only %t: error %q does not name the file", ro, err)
				}
				if waited > time.Minute {
					t.Errorf("read-only %t: Open waited %v on a %v timeout", ro, waited, o.Timeout)
				}
			}

			if release == "exit" {
				_ = stdin.Close()
				if err := cmd.Wait(); err != nil {
					t.Fatalf("lock holder: %v", err)
				}
			} else {
				// A crashed writer's lock goes with its process.
				if err := cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
				_ = cmd.Wait()
			}
			if after := fileDigest(t, path); after != before {
				t.Errorf("file changed while locked: %s -> %s", before, after)
			}
			o := storetest.Options()
			o.Timeout = 5 * time.Second
			db := storetest.OpenPath(t, path, o)
			inRun(t, db, true, "r1", func(r *store.RunTx) error { return r.SetRunStatus(model.RunFinished) })
		})
	}
}

func TestReadOnly(t *testing.T) {
	path := goodFile(t)
	before := fileDigest(t, path)
	o := storetest.Options()
	o.ReadOnly = true
	db := storetest.OpenPath(t, path, o)

	if err := db.Update(func(*store.Tx) error { t.Error("Update ran its function"); return nil }); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("Update on a read-only DB: %v, want ErrReadOnly", err)
	}
	// Write methods inside a View fail the same way.
	view(t, db, func(tx *store.Tx) error {
		if tx.Writable() {
			t.Error("View transaction is writable")
		}
		if _, err := tx.CreateRun("new", nil, nil); !errors.Is(err, store.ErrReadOnly) {
			t.Errorf("CreateRun in a View: %v, want ErrReadOnly", err)
		}
		r, err := tx.Run("r1")
		if err != nil {
			return err
		}
		if err := r.SetRunStatus(model.RunFailed); !errors.Is(err, store.ErrReadOnly) {
			t.Errorf("SetRunStatus in a View: %v, want ErrReadOnly", err)
		}
		if err := r.AppendTurns(1, 0, textTurn("x")); !errors.Is(err, store.ErrReadOnly) {
			t.Errorf("AppendTurns in a View: %v, want ErrReadOnly", err)
		}
		if _, err := r.AppendEvent("x", 0, 0, 0, 0, nil); !errors.Is(err, store.ErrReadOnly) {
			t.Errorf("AppendEvent in a View: %v, want ErrReadOnly", err)
		}
		return nil
	})
	// Every read works.
	d := dumpRun(t, db, "r1")
	if len(d.Nodes) != 6 || len(d.Events) == 0 {
		t.Errorf("read-only dump: %d nodes %d events", len(d.Nodes), len(d.Events))
	}
	if vs, err := db.Check(nil); err != nil || len(vs) != 0 {
		t.Errorf("Check on read-only: %v %v", vs, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if after := fileDigest(t, path); after != before {
		t.Errorf("read-only use changed the file: %s -> %s", before, after)
	}

	// A read-only open never creates a file.
	missing := filepath.Join(t.TempDir(), "missing.db")
	if db, err := store.Open(missing, o); !errors.Is(err, model.ErrNotFound) { // expected to fail
		if err == nil {
			db.Close()
		}
		t.Errorf("read-only open of a missing file: %v, want ErrNotFound", err)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("read-only open created %s", missing)
	}
}

func TestClosedDB(t *testing.T) {
	db := storetest.Open(t)
	buildFixture(t, db)
	var kept *store.Tx
	view(t, db, func(tx *store.Tx) error { kept = tx; return nil })
	if _, err := kept.Run("r1"); !errors.Is(err, store.ErrTxDone) {
		t.Errorf("Tx used after View returned: %v, want ErrTxDone", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := db.View(func(*store.Tx) error { return nil }); !errors.Is(err, store.ErrClosed) {
		t.Errorf("View after Close: %v, want ErrClosed", err)
	}
	if err := db.Update(func(*store.Tx) error { return nil }); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Update after Close: %v, want ErrClosed", err)
	}
}

func TestMaxSize(t *testing.T) {
	path := tempPath(t, "capped.db")
	const maxSize = 2 << 20
	o := storetest.Options()
	o.MaxSize = maxSize
	db := storetest.OpenPath(t, path, o)
	var g model.Group
	update(t, db, func(tx *store.Tx) (err error) {
		r, err := tx.CreateRun("r", nil, nil)
		if err != nil {
			return err
		}
		g, err = r.OpenGroup(store.GroupSpec{Step: 1})
		return err
	})
	// Each transaction adds a node with ~200 KB of turns until the cap.
	batch := func(i int) func(*store.Tx) error {
		return func(tx *store.Tx) error {
			r, err := tx.Run("r")
			if err != nil {
				return err
			}
			n, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Ordinal: i})
			if err != nil {
				return err
			}
			turns := textTurns(fmt.Sprintf("n%d-", i), 20)
			for j := range turns {
				turns[j].Observation = strings.Repeat("o", 10_000)
			}
			return r.AppendTurns(n.ID, 0, turns...)
		}
	}
	var full error
	committed := 0
	for ; committed < 100; committed++ {
		if full = db.Update(batch(committed)); full != nil {
			break
		}
	}
	if !errors.Is(full, store.ErrFull) {
		t.Fatalf("after %d batches: %v, want ErrFull", committed, full)
	}
	if committed == 0 {
		t.Fatal("the cap refused the very first batch; raise maxSize")
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > maxSize {
		t.Errorf("file is %d bytes, past MaxSize %d", st.Size(), maxSize)
	}
	// The failed transaction left nothing; everything before it is intact.
	want := dumpRun(t, db, "r")
	if len(want.Nodes) != committed {
		t.Errorf("%d nodes after %d committed batches", len(want.Nodes), committed)
	}
	for _, n := range want.Nodes {
		if n.Turns != 20 || len(want.Turns[n.ID]) != 20 {
			t.Errorf("node %d has %d turns, want 20", n.ID, n.Turns)
		}
	}
	if vs, err := db.Check(nil); err != nil || len(vs) != 0 {
		t.Errorf("Check after ErrFull: %v %v", vs, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Without the cap, writing continues where it stopped.
	db = storetest.OpenPath(t, path, storetest.Options())
	if got := dumpRun(t, db, "r"); !reflect.DeepEqual(got, want) {
		t.Error("reopened store differs from the one that hit the cap")
	}
	update(t, db, batch(committed))
	if got := dumpRun(t, db, "r"); len(got.Nodes) != committed+1 {
		t.Errorf("%d nodes after writing past the old cap, want %d", len(got.Nodes), committed+1)
	}
}

// TestOptionsZeroValueIsDefault: a zero field means its default, so a
// caller who sets only ReadOnly gets the default lock timeout (a locked
// file fails with ErrTimeout instead of hanging) and the node cache.
func TestOptionsZeroValueIsDefault(t *testing.T) {
	if got, want := (&store.Options{}).EnsureDefaults(), store.DefaultOptions(); !reflect.DeepEqual(got, want) {
		t.Errorf("EnsureDefaults of the zero value = %v, want %v", got, want)
	}
	if got := (*store.Options)(nil).EnsureDefaults(); !reflect.DeepEqual(got, store.DefaultOptions()) {
		t.Errorf("EnsureDefaults(nil) = %v", got)
	}
	off := &store.Options{Timeout: store.WaitForever, CacheNodes: store.NoCache, InitialMmapSize: store.MapOnDemand, PageSize: 4096, FileMode: 0o640}
	if got := off.EnsureDefaults(); !reflect.DeepEqual(got, off) || got == off {
		t.Errorf("EnsureDefaults changed set fields or returned its receiver: %v", got)
	}

	path := tempPath(t, "patr.db")
	w := storetest.OpenPath(t, path, storetest.Options())
	update(t, w, func(tx *store.Tx) error { _, err := tx.CreateRun("r", nil, nil); return err })
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		db, err := store.Open(path, &store.Options{ReadOnly: true})
		if err == nil {
			db.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, store.ErrTimeout) {
			t.Fatalf("read-only open of a file locked for writing: %v, want ErrTimeout", err)
		}
		if d := time.Since(start); d < store.DefaultOptions().Timeout/2 {
			t.Errorf("gave up after %v, before the default timeout", d)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("read-only open with zero options waits forever on a locked file")
	}
	w.Close()
	db, err := store.Open(path, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := db.Options(); got.CacheNodes != store.DefaultOptions().CacheNodes || got.Timeout != store.DefaultOptions().Timeout || !got.ReadOnly {
		t.Errorf("opened with %v, want the defaults with ReadOnly", &got)
	}
}

func TestOptionsValidate(t *testing.T) {
	if err := store.DefaultOptions().Validate(); err != nil {
		t.Fatalf("DefaultOptions: %v", err)
	}
	ok := []func(*store.Options){
		func(o *store.Options) { o.Timeout = 0 },
		func(o *store.Options) { o.CacheNodes = 0 },
		func(o *store.Options) { o.PageSize = 0 },
		func(o *store.Options) { o.PageSize = 4096 },
		func(o *store.Options) { o.PageSize = 1 << 20 },
		func(o *store.Options) { o.MaxSize = 1 << 30 },
		func(o *store.Options) { o.InitialMmapSize = 0 },
		func(o *store.Options) { o.InitialMmapSize = 1 << 20 },
		func(o *store.Options) { o.InitialMmapSize, o.MaxSize = 1<<30, 1<<20 }, // capped by MaxSize
		func(o *store.Options) { o.Timeout = store.WaitForever },
		func(o *store.Options) { o.CacheNodes = store.NoCache },
		func(o *store.Options) { o.InitialMmapSize = store.MapOnDemand },
	}
	for i, set := range ok {
		o := store.DefaultOptions()
		set(o)
		if err := o.Validate(); err != nil {
			t.Errorf("valid options %d (%v): %v", i, o, err)
		}
	}
	bad := map[string]func(*store.Options){
		"negative max size":   func(o *store.Options) { o.MaxSize = -1 },
		"negative page size":  func(o *store.Options) { o.PageSize = -16384 },
		"odd page size":       func(o *store.Options) { o.PageSize = 5000 },
		"page size not pow2":  func(o *store.Options) { o.PageSize = 12288 },
		"page size too small": func(o *store.Options) { o.PageSize = 512 },
		"page size too large": func(o *store.Options) { o.PageSize = 2 << 20 },
		"mmap size too large": func(o *store.Options) { o.InitialMmapSize = math.MaxInt64 },
	}
	for name, set := range bad {
		t.Run(name, func(t *testing.T) {
			o := storetest.Options()
			set(o)
			if err := o.Validate(); !errors.Is(err, model.ErrInvalid) {
				t.Errorf("Validate: %v, want ErrInvalid", err)
			}
			path := filepath.Join(t.TempDir(), "never.db")
			if db, err := store.Open(path, o); !errors.Is(err, model.ErrInvalid) { // expected to fail
				if err == nil {
					db.Close()
				}
				t.Errorf("Open: %v, want ErrInvalid", err)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("Open with invalid options created the file")
			}
		})
	}
}

// TestInitialMmapSize: while the file fits in the initial mapping, a
// commit that grows it does not remap, so it does not wait for open
// readers (bbolt remaps under a lock every read transaction holds); with
// no initial mapping the same commit waits until the reader ends.
func TestInitialMmapSize(t *testing.T) {
	if strconv.IntSize < 64 {
		t.Skip("a 64 MiB mapping per store is too much address space for this test on 32-bit")
	}
	bigTurn := textTurn("big")
	bigTurn.ObservationTokens = make([]uint32, 256<<10) // 1 MiB
	grow := func(db *store.DB, node uint64, from int) error {
		return db.UpdateRun("r", func(r *store.RunTx) error {
			turns := make([]model.Turn, 8)
			for i := range turns {
				turns[i] = bigTurn
			}
			return r.AppendTurns(node, from, turns...)
		})
	}
	for _, c := range []struct {
		mmap    int64
		blocked bool
	}{{64 << 20, false}, {store.MapOnDemand, true}} {
		t.Run(fmt.Sprintf("InitialMmapSize=%d", c.mmap), func(t *testing.T) {
			o := storetest.Options()
			o.InitialMmapSize = c.mmap
			db := storetest.OpenPath(t, tempPath(t, "patr.db"), o)
			var node uint64
			update(t, db, func(tx *store.Tx) error {
				_, n, err := runWithRoot(tx)
				node = n.ID
				return err
			})
			release, reading := make(chan struct{}), make(chan struct{})
			readerDone := make(chan error, 1)
			go func() {
				readerDone <- db.View(func(*store.Tx) error { close(reading); <-release; return nil })
			}()
			<-reading
			committed := make(chan error, 1)
			go func() { committed <- grow(db, node, 0) }() // 8 MiB: past every mapping bbolt starts with
			select {
			case err := <-committed:
				if c.blocked {
					t.Errorf("the commit finished while a reader held the old mapping (%v)", err)
				} else if err != nil {
					t.Error(err)
				}
				close(release)
			case <-time.After(map[bool]time.Duration{true: 300 * time.Millisecond, false: 30 * time.Second}[c.blocked]):
				if !c.blocked {
					t.Error("the commit waited for a reader although the file fits in the mapping")
				}
				close(release)
				if err := <-committed; err != nil {
					t.Error(err)
				}
			}
			if err := <-readerDone; err != nil {
				t.Error(err)
			}
		})
	}
	// The mapping does not make a small file big: while small it grows by
	// about its data or four times its commit (growStep), not by bbolt's
	// 16 MiB step from the first commit.
	path := tempPath(t, "small.db")
	db := storetest.OpenPath(t, path, storetest.Options())
	if db.Options().InitialMmapSize == 0 {
		t.Fatal("the default options map nothing up front")
	}
	update(t, db, func(tx *store.Tx) error {
		r, n, err := runWithRoot(tx)
		if err != nil {
			return err
		}
		return r.AppendTurns(n.ID, 0, bigTurn) // 1 MiB
	})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() > 6<<20 {
		t.Errorf("a store holding 1 MiB is a %d-byte file (%v)", st.Size(), err)
	}
}

func TestPageSize(t *testing.T) {
	pageSize := func(db *store.DB) (ps int) {
		view(t, db, func(tx *store.Tx) error { ps = storetest.BoltTx(tx).DB().Info().PageSize; return nil })
		return ps
	}
	// nil options are DefaultOptions: 4 KiB pages.
	def := storetest.OpenPath(t, tempPath(t, "default.db"), nil)
	if got := pageSize(def); got != 4<<10 {
		t.Errorf("default page size %d, want 4096", got)
	}
	if def.Options().CacheNodes != store.DefaultOptions().CacheNodes || def.Options().Timeout != store.DefaultOptions().Timeout {
		t.Errorf("nil options opened with %+v", def.Options())
	}
	path := tempPath(t, "small.db")
	o := storetest.Options()
	o.PageSize = 4096
	db := storetest.OpenPath(t, path, o)
	if got := pageSize(db); got != 4096 {
		t.Errorf("page size %d, want 4096", got)
	}
	db.Close()
	// Only a new file takes the option.
	db = storetest.OpenPath(t, path, storetest.Options())
	if got := pageSize(db); got != 4096 {
		t.Errorf("reopened with 16 KiB option: page size %d, want the file's 4096", got)
	}
}
