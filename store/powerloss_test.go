package store_test

// The power-loss test (in the manner of ALICE, OSDI '14).
//
// kill -9 keeps the kernel's page cache, so the crash loop cannot see a
// write that was acknowledged but never reached the disk. Here the crash
// loop's writer child runs once, to the end, under strace, which records
// every pwrite64, ftruncate, fsync and fdatasync on the file and every
// "ack i" line the child writes after Update returned. Replaying the
// record gives, at each sync point, the bytes the disk is guaranteed to
// hold, plus the writes since then that it may or may not hold. For every
// sync interval the test builds crash states — none of the unsynced writes,
// or a random subset of them with some torn at 512-byte sectors (a disk may
// write back in any order) — and proves on each:
//
//   - the file opens and Check is clean, except that it may report the
//     meta page being written as torn (bbolt then uses the other one);
//   - the committed transactions are 1..C with C >= every transaction
//     acknowledged before the interval's sync returned, and C <= that + 1;
//   - the file equals, bucket by bucket, a replay of transactions 1..C of
//     the same seed (when C has not gone back behind the reference).

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// fileOp is one recorded operation that matters to the file's bytes.
type fileOp struct {
	kind string // "write", "truncate", "sync", "ack", "ready"
	off  int64
	data []byte
	n    uint64 // the acknowledged transaction
	// pieces are the sectors of a torn write that reached the disk.
	pieces []fileOp
}

func TestPowerLoss(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed (apt-get install -y strace): the power-loss test records the writer's system calls with it")
	}
	txs := powerEnv(t, "PATRDB_POWERLOSS_TXS", 40)
	variants := powerEnv(t, "PATRDB_POWERLOSS_VARIANTS", 3)
	seed := uint64(powerEnv(t, "PATRDB_POWERLOSS_SEED", 20261201))
	dir := t.TempDir()
	path := filepath.Join(dir, "patr.db")
	trace := filepath.Join(dir, "trace.txt")

	start := time.Now()
	cmd := exec.Command(strace, "-f", "-qq", "-xx", "-s", "16777216", "-o", trace,
		"-e", "trace=openat,pwrite64,pwritev,pwritev2,write,writev,ftruncate,fallocate,fsync,fdatasync,sync_file_range",
		os.Args[0], "-test.run=^TestCrashChild$")
	cmd.Env = append(os.Environ(), envChild+"=1", envDB+"="+path, fmt.Sprintf("%s=%d", envSeed, seed), fmt.Sprintf("%s=%d", envMaxTx, txs))
	if out, err := cmd.CombinedOutput(); err != nil {
		if strings.Contains(string(out), "ptrace") {
			t.Skipf("strace cannot trace here: %s", out)
		}
		t.Fatalf("writer under strace: %v\n%s", err, out)
	}
	ops := parseTrace(t, trace, path)
	traced := time.Since(start)

	refW := newWorkload(seed, nil)
	ref, err := store.Open(filepath.Join(dir, "ref.db"), refW.options(true))
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	v := &powerVerifier{t: t, dir: dir, seed: seed, ref: ref, refW: refW}
	rng := rand.New(rand.NewPCG(seed, 1))
	var durable []byte
	var pending []fileOp
	ready := false
	var acked uint64
	var syncs int
	crashAt := func() {
		// Nothing of the interval reached the disk, then random subsets.
		v.verify(durable, nil, acked, "dropped")
		for range variants {
			var some []fileOp
			for _, op := range pending {
				if rng.IntN(2) == 0 {
					continue
				}
				if op.kind == "write" && len(op.data) > 512 && rng.IntN(3) == 0 {
					op = tearWrite(op, rng)
				}
				some = append(some, op)
			}
			v.verify(durable, some, acked, "subset")
		}
	}
	for _, op := range ops {
		switch op.kind {
		case "write", "truncate":
			pending = append(pending, op)
		case "ready":
			ready = true
		case "ack":
			if op.n != acked+1 {
				t.Fatalf("acknowledged %d after %d", op.n, acked)
			}
			acked = op.n
		case "sync":
			syncs++
			if ready {
				crashAt()
			}
			durable = applyOps(durable, pending)
			pending = nil
		}
	}
	if acked != uint64(txs) {
		t.Fatalf("the writer acknowledged %d of %d transactions", acked, txs)
	}
	crashAt()
	t.Logf("%d transactions, %d sync points traced in %v; %d crash states (%d with torn writes, %d with a torn meta page reported by Check), "+
		"lowest C - acked %d, in-flight transaction present in %d; %d compared byte for byte with the replay; 0 acknowledged transactions lost; %v in all",
		txs, syncs, traced.Round(time.Millisecond), v.states, v.torn, v.tornMeta, v.minMargin, v.inflight, v.compared, time.Since(start).Round(time.Millisecond))
}

func powerEnv(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a count", name, s)
	}
	return n
}

// tearWrite keeps a random subset of the write's 512-byte sectors: what a
// disk without atomic page writes may hold after a cut in mid-write.
func tearWrite(op fileOp, rng *rand.Rand) fileOp {
	torn := fileOp{kind: "torn"}
	for at := 0; at < len(op.data); at += 512 {
		if rng.IntN(2) == 0 {
			continue
		}
		end := min(at+512, len(op.data))
		torn.pieces = append(torn.pieces, fileOp{kind: "write", off: op.off + int64(at), data: op.data[at:end]})
	}
	return torn
}

// applyOps returns a copy of base with ops applied in order.
func applyOps(base []byte, ops []fileOp) []byte {
	b := append([]byte(nil), base...)
	for _, op := range ops {
		switch op.kind {
		case "write":
			if end := op.off + int64(len(op.data)); end > int64(len(b)) {
				b = append(b, make([]byte, end-int64(len(b)))...)
			}
			copy(b[op.off:], op.data)
		case "torn":
			b = applyOps(b, op.pieces)
		case "truncate":
			if op.off <= int64(len(b)) {
				b = b[:op.off]
			} else {
				b = append(b, make([]byte, op.off-int64(len(b)))...)
			}
		}
	}
	return b
}

type powerVerifier struct {
	t         *testing.T
	dir       string
	seed      uint64
	ref       *store.DB
	refW      *workload
	refC      uint64
	states    int
	torn      int
	tornMeta  int
	compared  int
	inflight  int
	minMargin int64
}

// verify builds the crash state durable+ops and holds it to the promise:
// every transaction up to acked is there, whole, and Check is clean.
func (v *powerVerifier) verify(durable []byte, ops []fileOp, acked uint64, how string) {
	t := v.t
	t.Helper()
	v.states++
	for _, op := range ops {
		if op.kind == "torn" {
			v.torn++
			break
		}
	}
	path := filepath.Join(v.dir, "crash.db")
	if err := os.WriteFile(path, applyOps(durable, ops), 0o600); err != nil {
		t.Fatal(err)
	}
	fail := func(format string, args ...any) {
		t.Helper()
		keep := filepath.Join(os.TempDir(), fmt.Sprintf("patrdb-powerloss-%d-%d.db", v.seed, v.states))
		_ = os.Rename(path, keep)
		t.Fatalf("crash state %d (%s, acked %d, kept in %s): %s", v.states, how, acked, keep, fmt.Sprintf(format, args...))
	}
	db, err := store.Open(path, &store.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		fail("open: %v", err)
	}
	defer db.Close()
	vs, err := db.Check(nil)
	if err != nil && !errors.Is(err, store.ErrCorrupt) {
		fail("check: %v", err)
	}
	tornMeta := false
	for _, x := range vs {
		if x.Bucket == "(file)" && strings.HasPrefix(x.Detail, "meta page ") {
			tornMeta = true // the meta page in flight; bbolt uses the other
			continue
		}
		fail("check: %s", x)
	}
	if tornMeta {
		v.tornMeta++
	}
	txs, err := committedTxs(db)
	if err != nil {
		fail("reading transaction markers: %v", err)
	}
	for j, i := range txs {
		if i != uint64(j+1) {
			fail("transaction markers %v are not 1..n", txs)
		}
	}
	c := uint64(len(txs))
	switch {
	case c < acked:
		fail("LOST acknowledged transactions %d..%d (the file has %d)", c+1, acked, c)
	case c > acked+1:
		fail("the file has %d transactions, at most %d can have committed", c, acked+1)
	case c == acked+1:
		v.inflight++
	}
	if v.states == 1 || int64(c)-int64(acked) < v.minMargin {
		v.minMargin = int64(c) - int64(acked)
	}
	for v.refC < c {
		i := v.refC + 1
		if err := v.refW.apply(v.ref, i, i == 1); err != nil {
			t.Fatalf("reference replay of transaction %d: %v", i, err)
		}
		v.refC = i
	}
	if c == v.refC {
		if err := diffStores(storetest.Bolt(db), storetest.Bolt(v.ref)); err != nil {
			fail("differs from the replay of transactions 1..%d: %v", c, err)
		}
		v.compared++
	}
}

// parseTrace reads strace's record of the writer: writes, truncations and
// syncs of the file at path, and the child's "ready" and "ack i" lines, in
// the order the calls returned.
func parseTrace(t *testing.T, trace, path string) []fileOp {
	t.Helper()
	f, err := os.Open(trace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	unfinished := map[string]string{}
	var ops []fileOp
	dbFD := ""
	for sc.Scan() {
		line := sc.Text()
		pid, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimLeft(rest, " ")
		if i := strings.Index(rest, " <unfinished ...>"); i >= 0 {
			unfinished[pid] = rest[:i]
			continue
		}
		if strings.HasPrefix(rest, "<... ") {
			i := strings.Index(rest, " resumed>")
			if i < 0 {
				t.Fatalf("trace line %q", line)
			}
			rest = unfinished[pid] + rest[i+len(" resumed>"):]
			delete(unfinished, pid)
		}
		name, args, ok := strings.Cut(rest, "(")
		if !ok || strings.HasPrefix(rest, "---") || strings.HasPrefix(rest, "+++") {
			continue
		}
		// "call(args)   = ret": strace pads short calls before the "=".
		eq := strings.LastIndex(args, "= ")
		argList, closed := strings.CutSuffix(strings.TrimRight(args[:max(eq, 0)], " "), ")")
		if eq < 0 || !closed {
			continue
		}
		ret := strings.Fields(args[eq+2:])
		if len(ret) == 0 || strings.HasPrefix(ret[0], "-") {
			continue // failed call: no effect
		}
		fd, _, _ := strings.Cut(argList, ",")
		switch name {
		case "openat":
			p := quoted(t, argList)
			if string(p) == path && strings.Contains(argList, "O_RDWR") {
				dbFD = ret[0]
			}
		case "write":
			if fd != "1" {
				continue
			}
			for _, l := range strings.Split(string(quoted(t, argList)), "\n") {
				if f := strings.Fields(l); len(f) == 2 && f[0] == "ack" {
					n, _ := strconv.ParseUint(f[1], 10, 64)
					ops = append(ops, fileOp{kind: "ack", n: n})
				} else if len(f) == 2 && f[0] == "ready" {
					ops = append(ops, fileOp{kind: "ready"})
				}
			}
		case "pwrite64":
			if fd != dbFD {
				continue
			}
			data := quoted(t, argList)
			fields := strings.Split(argList, ", ")
			off, err := strconv.ParseInt(fields[len(fields)-1], 10, 64)
			if err != nil {
				t.Fatalf("pwrite64 offset in %q", line)
			}
			n, _ := strconv.Atoi(ret[0])
			ops = append(ops, fileOp{kind: "write", off: off, data: data[:n]})
		case "ftruncate":
			if fd != dbFD {
				continue
			}
			fields := strings.Split(argList, ", ")
			size, err := strconv.ParseInt(fields[len(fields)-1], 10, 64)
			if err != nil {
				t.Fatalf("ftruncate size in %q", line)
			}
			ops = append(ops, fileOp{kind: "truncate", off: size})
		case "fsync", "fdatasync":
			if fd == dbFD {
				ops = append(ops, fileOp{kind: "sync"})
			}
		case "pwritev", "pwritev2", "writev", "fallocate", "sync_file_range":
			if fd == dbFD {
				t.Fatalf("the writer used %s, which this test does not model: %q", name, line)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if dbFD == "" {
		t.Fatalf("the trace never opens %s for writing", path)
	}
	return ops
}

// quoted decodes the first "\xNN..." string argument of a call traced with
// -xx.
func quoted(t *testing.T, args string) []byte {
	t.Helper()
	i := strings.IndexByte(args, '"')
	j := strings.IndexByte(args[i+1:], '"')
	if i < 0 || j < 0 {
		t.Fatalf("no string in %q", args)
	}
	s := args[i+1 : i+1+j]
	if strings.HasPrefix(args[i+1+j+1:], "...") {
		t.Fatalf("strace cut a string short: %.80q", args)
	}
	b, err := hex.DecodeString(strings.ReplaceAll(s, `\x`, ""))
	if err != nil {
		t.Fatalf("string %.80q: %v", s, err)
	}
	return bytes.Clone(b)
}
