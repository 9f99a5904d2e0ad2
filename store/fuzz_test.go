package store_test

// Fuzz targets. Plain `go test` runs each target over its
// committed seed corpus in testdata/fuzz/<Name>/; `go test -fuzz=^Name$`
// explores. A crasher the fuzzer finds is written to testdata/fuzz/<Name>/
// and stays there as a regression input.
//
//   - FuzzDecodeTurn and FuzzDecodeRecord: any bytes, raw or wrapped in a
//     valid frame (so the fuzzer reaches msgpack instead of dying at the
//     CRC), decode without panicking; damage is ErrCorrupt; what decodes
//     re-encodes, and decode→encode→decode→encode is a fixed point.
//   - FuzzFile: flips bytes of, or truncates, a real small store; Open and
//     Check return errors or violations and never panic or hang; and a file
//     whose Check is clean holds exactly the original records (a damage
//     Check does not see is a hole in Check).

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

var castagnoliTable = crc32.MakeTable(crc32.Castagnoli)

// frame wraps a payload the way the store frames every value.
func frame(payload []byte) []byte {
	out := make([]byte, 5+len(payload))
	out[0] = 1
	binary.BigEndian.PutUint32(out[1:5], crc32.Checksum(payload, castagnoliTable))
	copy(out[5:], payload)
	return out
}

func FuzzDecodeTurn(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		checkTurnDecode(t, data)
		checkTurnDecode(t, frame(data))
	})
}

func checkTurnDecode(t *testing.T, raw []byte) {
	t1, err := store.DecodeTurn(raw)
	if err != nil {
		if !errors.Is(err, store.ErrCorrupt) {
			t.Fatalf("DecodeTurn error is not ErrCorrupt: %v", err)
		}
		return
	}
	enc1, err := store.EncodeTurn(&t1)
	if err != nil {
		t.Fatalf("a decoded turn does not re-encode: %v (%+v)", err, t1)
	}
	t2, err := store.DecodeTurn(enc1)
	if err != nil {
		t.Fatalf("a re-encoded turn does not decode: %v", err)
	}
	enc2, err := store.EncodeTurn(&t2)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(enc1, enc2) {
		t.Fatalf("decode→encode is not stable:\n%x\n%x", enc1, enc2)
	}
	if len(t2.ActionTokens) != len(t1.ActionTokens) || len(t2.ActionLogprobs) != len(t1.ActionLogprobs) ||
		len(t2.ObservationTokens) != len(t1.ObservationTokens) || t2.Action != t1.Action || t2.Observation != t1.Observation {
		t.Fatalf("round trip changed the turn:\n%+v\n%+v", t1, t2)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		k := store.RecordKinds[int(kind)%len(store.RecordKinds)]
		checkRecordDecode(t, k, data)
		checkRecordDecode(t, k, frame(data))
		// An event payload is the same msgpack without the frame.
		if err := store.DecodePayload(model.Event{Seq: 1, Payload: data}, store.NewRecord(k)); err != nil && !errors.Is(err, store.ErrCorrupt) {
			t.Fatalf("DecodePayload error is not ErrCorrupt: %v", err)
		}
	})
}

func checkRecordDecode(t *testing.T, kind string, raw []byte) {
	v1, err := store.DecodeRecord(kind, raw)
	if err != nil {
		if !errors.Is(err, store.ErrCorrupt) {
			t.Fatalf("decode %s: error is not ErrCorrupt: %v", kind, err)
		}
		return
	}
	enc1, err := store.EncodeRecord(v1)
	if err != nil {
		t.Fatalf("a decoded %s does not re-encode: %v (%+v)", kind, err, v1)
	}
	v2, err := store.DecodeRecord(kind, enc1)
	if err != nil {
		t.Fatalf("a re-encoded %s does not decode: %v\n%x", kind, err, enc1)
	}
	enc2, err := store.EncodeRecord(v2)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(enc1, enc2) {
		t.Fatalf("%s: decode→encode is not stable:\n%x\n%x", kind, enc1, enc2)
	}
}

// fuzzBasePath is the small real store FuzzFile damages: the first
// transactions of the crash loop's workload with 1 KiB pages, so most of
// the file is live records, events, b-tree and free pages. It is committed
// rather than rebuilt because bbolt's page layout is not deterministic (it
// spills sub-buckets in map order), and a committed fuzz input must damage
// the same bytes in every process. Rewrite it (and the corrupt fixtures)
// with PATRDB_WRITE_FIXTURES=1 go test -run TestWriteFixtures ./store/
const fuzzBasePath = "testdata/fuzz/FuzzFile-base.db"

const fuzzBaseTxs = 12

func writeFuzzBase(t *testing.T) {
	path := workloadFile(t, 1, fuzzBaseTxs, 1024)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fuzzBasePath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", fuzzBasePath, len(b))
}

// damage applies a FuzzFile input to a copy of the base file: every 4
// bytes of muts flip one byte (page, offset within it, xor mask), then a
// non-zero cut truncates the file (odd: to any length; even: to a page
// boundary).
func damage(base []byte, pageSize int, muts []byte, cut uint32) []byte {
	b := bytes.Clone(base)
	pages := len(b) / pageSize
	for i := 0; i+4 <= len(muts); i += 4 {
		page := int(muts[i]) % pages
		off := int(binary.BigEndian.Uint16(muts[i+1:])) % pageSize
		x := muts[i+3]
		if x == 0 {
			x = 0xff
		}
		b[page*pageSize+off] ^= x
	}
	if cut != 0 {
		n := int(cut>>1) % len(b)
		if cut&1 == 0 {
			n -= n % pageSize
		}
		b = b[:n]
	}
	return b
}

func FuzzFile(f *testing.F) {
	base, err := os.ReadFile(fuzzBasePath)
	if err != nil {
		f.Fatal(err)
	}
	const pageSize = 1024
	// The base itself must be sound, or every input "finds" its damage.
	basePath := filepath.Join(f.TempDir(), "base.db")
	if err := os.WriteFile(basePath, base, 0o600); err != nil {
		f.Fatal(err)
	}
	if db, err := store.Open(basePath, &store.Options{ReadOnly: true}); err != nil {
		f.Fatalf("%s: %v", fuzzBasePath, err)
	} else {
		vs, err := db.Check(nil)
		db.Close()
		if err != nil || len(vs) > 0 {
			f.Fatalf("%s is not clean: %v %v", fuzzBasePath, vs, err)
		}
	}
	f.Fuzz(func(t *testing.T, muts []byte, cut uint32) {
		b := damage(base, pageSize, muts, cut)
		if bytes.Equal(b, base) || len(b) == 0 {
			// Unchanged, or empty: an empty file is a new store to a
			// writable Open (like touch + sqlite3) and refused read-only.
			return
		}
		path := filepath.Join(t.TempDir(), "damaged.db")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		// A hang is a failure too: crash with the input rather than wait
		// for the test binary's timeout.
		watchdog := time.AfterFunc(60*time.Second, func() {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			panic(fmt.Sprintf("FuzzFile: Open+Check of a damaged file hung (muts %x cut %d)\n%s", muts, cut, buf))
		})
		defer watchdog.Stop()
		for _, ro := range []bool{true, false} {
			clean := openAndCheck(t, path, ro)
			if clean {
				if err := sameRecords(base, path); err != nil {
					t.Fatalf("Check (read-only %t) is clean but the records changed: %v", ro, err)
				}
			}
		}
	})
}

// openAndCheck opens a damaged file and checks it; it reports whether the
// file opened and Check found nothing.
func openAndCheck(t *testing.T, path string, readOnly bool) bool {
	o := store.DefaultOptions()
	o.ReadOnly = readOnly
	o.NoSync = true
	o.Timeout = time.Second
	db, err := store.Open(path, o)
	if err != nil {
		if !errors.Is(err, store.ErrCorrupt) && !errors.Is(err, store.ErrNotPatrdb) && !errors.Is(err, store.ErrVersionMismatch) {
			t.Fatalf("Open (read-only %t) of a damaged file: untyped error %v", readOnly, err)
		}
		return false
	}
	defer db.Close()
	vs, err := db.Check(nil)
	if err != nil && !errors.Is(err, store.ErrCorrupt) {
		return false
	}
	for _, v := range vs {
		if v.Kind == "corrupt" && (v.Bucket == "" || v.Key == nil) {
			t.Errorf("corrupt violation does not name bucket and key: %s", v)
		}
	}
	return len(vs) == 0
}

// sameRecords compares the damaged file's records with the base's, ignoring
// what damage may change without harm: the meta bucket's writer string and
// the sequences of buckets whose sequence allocates nothing. The sequences
// that allocate ids (groups, nodes, rubrics, events) may only have grown.
func sameRecords(base []byte, path string) error {
	dir, err := os.MkdirTemp("", "patrdb-fuzzref-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ref := filepath.Join(dir, "base.db")
	if err := os.WriteFile(ref, base, 0o600); err != nil {
		return err
	}
	a, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return err
	}
	defer a.Close()
	b, err := bolt.Open(ref, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return err
	}
	defer b.Close()
	return a.View(func(ta *bolt.Tx) error {
		return b.View(func(tb *bolt.Tx) error {
			return sameBucket("", ta.Cursor(), tb.Cursor(), ta.Bucket, tb.Bucket)
		})
	})
}

func sameBucket(path string, ca, cb *bolt.Cursor, ba, bb func([]byte) *bolt.Bucket) error {
	ka, va := ca.First()
	kb, vb := cb.First()
	for ka != nil || kb != nil {
		switch {
		case kb == nil || (ka != nil && bytes.Compare(ka, kb) < 0):
			return fmt.Errorf("%s: key %x appeared", path, ka)
		case ka == nil || bytes.Compare(ka, kb) > 0:
			return fmt.Errorf("%s: key %x vanished", path, kb)
		case (va == nil) != (vb == nil):
			return fmt.Errorf("%s: key %x changed between bucket and value", path, ka)
		case va == nil:
			sa, sb := ba(ka), bb(kb)
			sub := path + "/" + string(ka)
			if err := sameSequence(sub, sa.Sequence(), sb.Sequence()); err != nil {
				return err
			}
			if err := sameBucket(sub, sa.Cursor(), sb.Cursor(), sa.Bucket, sb.Bucket); err != nil {
				return err
			}
		case !bytes.Equal(va, vb) && !(path == "/meta" && string(ka) == "writer"):
			return fmt.Errorf("%s: value of key %x changed", path, ka)
		}
		ka, va = ca.Next()
		kb, vb = cb.Next()
	}
	return nil
}

func sameSequence(path string, got, want uint64) error {
	i := strings.LastIndexByte(path, '/')
	switch path[i+1:] {
	case "groups", "nodes", "rubrics", "events":
		if got < want {
			return fmt.Errorf("%s: sequence went back from %d to %d: ids would be reused", path, want, got)
		}
	}
	return nil
}

// writeFuzzSeeds writes the committed seed corpora: real encoded records and
// turns (whole, payload only, cut short) for the decoders, and for FuzzFile
// one targeted damage per structure of the base file — each meta page, the
// freelist count, a leaf's type, count, overflow, element offsets and
// value bytes, a branch child pointing at itself, cuts at and inside pages.
func writeFuzzSeeds(t *testing.T) {
	write := func(target, name string, args ...any) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		b.WriteString("go test fuzz v1\n")
		for _, a := range args {
			switch v := a.(type) {
			case []byte:
				fmt.Fprintf(&b, "[]byte(%q)\n", v)
			case uint8:
				fmt.Fprintf(&b, "byte(%d)\n", v)
			case uint32:
				fmt.Fprintf(&b, "uint32(%d)\n", v)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Decoders: the records a real store holds.
	db, err := store.Open(filepath.Join(t.TempDir(), "seed.db"), newWorkload(2, nil).options(true))
	if err != nil {
		t.Fatal(err)
	}
	w := newWorkload(2, nil)
	for i := uint64(1); i <= 20; i++ {
		if err := w.apply(db, i, i == 1); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]int{}
	kindOf := map[string]string{"groups": "group", "nodes": "node", "adv": "advantage", "rubrics": "rubric", "ckpt": "checkpoint", "events": "event"}
	err = storetest.Bolt(db).View(func(tx *bolt.Tx) error {
		r := tx.Bucket([]byte("runs")).Bucket([]byte("run-0001"))
		add := func(kind string, v []byte) {
			if seen[kind] >= 3 {
				return
			}
			n := seen[kind]
			seen[kind]++
			if kind == "turn" {
				write("FuzzDecodeTurn", fmt.Sprintf("turn-%d", n), v)
				write("FuzzDecodeTurn", fmt.Sprintf("turn-%d-payload", n), v[5:])
				write("FuzzDecodeTurn", fmt.Sprintf("turn-%d-cut", n), v[:len(v)/2])
				return
			}
			k := uint8(slices.Index(store.RecordKinds, kind))
			write("FuzzDecodeRecord", fmt.Sprintf("%s-%d", kind, n), k, v)
			write("FuzzDecodeRecord", fmt.Sprintf("%s-%d-payload", kind, n), k, v[5:])
		}
		add("run", r.Get([]byte("run")))
		_ = r.ForEachBucket(func(name []byte) error {
			return r.Bucket(name).ForEach(func(_, v []byte) error {
				if string(name) == "turns" {
					add("turn", v)
				} else if kind, ok := kindOf[string(name)]; ok && len(v) > 0 {
					add(kind, v)
				}
				return nil
			})
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tp, _ := store.EncodeRecord(&model.TurnsPayload{From: 2, Count: 3, Turns: 5})
	write("FuzzDecodeRecord", "turns-payload-0", uint8(slices.Index(store.RecordKinds, "turns-payload")), tp)
	write("FuzzDecodeTurn", "empty", []byte{})
	write("FuzzDecodeRecord", "empty", uint8(0), []byte{})

	// FuzzFile: targeted damage to the base.
	base, err := os.ReadFile(fuzzBasePath)
	if err != nil {
		t.Fatal(err)
	}
	const ps = 1024
	flip := func(page, off int, x byte) []byte {
		return []byte{byte(page), byte(off >> 8), byte(off), x}
	}
	// Live pages, not stale copies: the events bucket's root (a branch page
	// once the log outgrows a page), its first child, and the freelist of
	// the newer meta page.
	bdb, err := bolt.Open(fuzzBasePath, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var branch int
	_ = bdb.View(func(tx *bolt.Tx) error {
		branch = int(tx.Bucket([]byte("runs")).Bucket([]byte("run-0001")).Bucket([]byte("events")).Root())
		return nil
	})
	bdb.Close()
	if binary.NativeEndian.Uint16(base[branch*ps+8:]) != 0x01 {
		t.Fatalf("the events bucket's root page %d is not a branch page; write more transactions into the base", branch)
	}
	leaf := int(binary.NativeEndian.Uint64(base[branch*ps+16+8:]))
	meta := 0
	if binary.NativeEndian.Uint64(base[ps+16+48:]) > binary.NativeEndian.Uint64(base[16+48:]) {
		meta = 1
	}
	free := int(binary.NativeEndian.Uint64(base[meta*ps+16+32:]))
	seeds := map[string][]byte{
		"meta0-hwm":        flip(0, 16+40, 0x01),
		"meta1-txid":       flip(1, 16+48, 0x01),
		"both-metas":       append(flip(0, 16+56, 0x01), flip(1, 16+56, 0x01)...),
		"leaf-id":          flip(leaf, 0, 0x01),
		"leaf-type":        flip(leaf, 8, 0x06),
		"leaf-count":       flip(leaf, 10, 0x01),
		"leaf-overflow":    flip(leaf, 15, 0x80),
		"leaf-elem-pos":    flip(leaf, 16+4, 0x08),
		"leaf-elem-vsize":  flip(leaf, 16+12, 0x01),
		"leaf-value":       flip(leaf, 700, 0x20),
		"leaf-to-branch":   flip(leaf, 8, 0x03),
		"two-pages":        append(flip(leaf, 300, 0x04), flip(leaf+1, 500, 0x40)...),
		"freelist-count":   flip(free, 10, 0x10),
		"freelist-escape":  append(flip(free, 10, 0xff), flip(free, 11, 0xff)...),
		"freelist-overflw": flip(free, 14, 0x01),
	}
	seeds["branch-self-cycle"] = flip(branch, 16+8, byte(leaf)^byte(branch))
	seeds["branch-count"] = flip(branch, 10, 0x40)
	seeds["branch-child-freelist"] = flip(branch, 16+8, byte(leaf)^byte(free))
	for name, muts := range seeds {
		write("FuzzFile", name, muts, uint32(0))
	}
	write("FuzzFile", "cut-half-page-aligned", []byte{}, uint32(len(base)/2)<<1)
	write("FuzzFile", "cut-inside-a-page", []byte{}, uint32(len(base)/3)<<1|1)
	write("FuzzFile", "cut-one-page", []byte{}, uint32(ps)<<1)
	write("FuzzFile", "flip-and-cut", flip(leaf, 10, 0x02), uint32(len(base)*3/4)<<1)
}

// TestDecodeAllocationBounded: a short value with a valid frame whose
// headers claim gigabytes is ErrCorrupt, and decoding it allocates about
// its own size, not what the headers claim (msgpack allocates first and
// keeps pooled buffers; FuzzDecodeRecord found values that grew a worker
// past 10 GB).
func TestDecodeAllocationBounded(t *testing.T) {
	huge := [][]byte{
		{0x9e, 0x01, 0xa6, 'p', 'u', 'b', 'l', 'i', 'c', 0xc6, 0xcb, 0x3f, 0xdf, 0x08}, // rubric whose Text is a 3.4 GB bin32
		{0x97, 0xa1, 'a', 0xc6, 0xff, 0xff, 0xff, 0x00},                                // turn whose action tokens claim 4 GB
		{0xdd, 0xff, 0xff, 0xff, 0xff},                                                 // array32 of 4G elements
		{0xdf, 0x7f, 0xff, 0xff, 0xff},                                                 // map32 of 2G pairs
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 50 {
		for _, p := range huge {
			for _, kind := range store.RecordKinds {
				if _, err := store.DecodeRecord(kind, frame(p)); !errors.Is(err, store.ErrCorrupt) {
					t.Fatalf("%s %x: %v, want ErrCorrupt", kind, p, err)
				}
				if err := store.DecodePayload(model.Event{Payload: p}, store.NewRecord(kind)); !errors.Is(err, store.ErrCorrupt) {
					t.Fatalf("payload %s %x: %v, want ErrCorrupt", kind, p, err)
				}
			}
			if _, err := store.DecodeTurn(frame(p)); !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("turn %x: %v, want ErrCorrupt", p, err)
			}
		}
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
		t.Errorf("decoding %d tiny values allocated %d MB", 50*len(huge)*(2*len(store.RecordKinds)+1), got>>20)
	}
}
