package store_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	"github.com/vmihailenco/msgpack/v5"
	bolt "go.etcd.io/bbolt"
)

// A write transaction's Check sees the transaction's own writes, including
// node records still buffered for the commit: a node that just gained turns
// is consistent with them, not reported as stale.
func TestTxCheckSeesPendingNodeWrites(t *testing.T) {
	db := storetest.Open(t)
	update(t, db, func(tx *store.Tx) error {
		r, n, err := runWithRoot(tx)
		if err != nil {
			return err
		}
		if err := r.AppendTurns(n.ID, 0, textTurns("p", 3)...); err != nil {
			return err
		}
		if vs, _ := tx.Check(nil); len(vs) != 0 {
			t.Errorf("Check inside the write that appended turns: %v, want no violations", vs)
		}
		return nil
	})
	var vs []store.Violation
	view(t, db, func(tx *store.Tx) error { vs, _ = tx.Check(nil); return nil })
	if len(vs) != 0 {
		t.Errorf("Check after the commit: %v, want no violations", vs)
	}
}

// One damage per invariant Check enforces, each asserting the exact set of
// violations it yields. Where the log can agree with the damage (a writer
// bug writes the record and its event alike) the damage is made in both, so
// only the invariant itself can catch it.

// wantV is one expected violation: Bucket is relative to runs/r1/ ("" for
// the run bucket itself), Detail a substring.
type wantV struct {
	kind, bucket string
	key          []byte
	detail       string
}

func inv(bucket string, key []byte, detail string) wantV {
	return wantV{"invariant", bucket, key, detail}
}

// logDiffers and notLogged are the log cross-check's findings for damage
// the log cannot agree with.
func logDiffers(bucket string, key []byte) wantV {
	return inv(bucket, key, "differs from the event log")
}
func notLogged(bucket string, key []byte) wantV { return inv(bucket, key, "not in the event log") }

// errRollback ends a damaging Update without committing it.
var errRollback = errors.New("rollback")

// checkAfter applies damage to the fixture inside a write transaction, runs
// Tx.Check there and rolls back.
func checkAfter(t *testing.T, db *store.DB, damage func(t *testing.T, tx *bolt.Tx)) []store.Violation {
	t.Helper()
	var vs []store.Violation
	err := db.Update(func(tx *store.Tx) error {
		damage(t, storetest.BoltTx(tx))
		vs, _ = tx.Check(nil)
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("damaging update: %v", err)
	}
	return vs
}

// inflate adds to meta and to every sub-bucket of run r1 an entry under a
// malformed key with a value larger than bbolt stores inline, so each
// bucket gets pages of its own in the file.
func inflate(t *testing.T, tx *bolt.Tx) {
	t.Helper()
	big := bytes.Repeat([]byte{0xc1}, 8<<10)
	mustPut(t, tx.Bucket([]byte("meta")), []byte("~filler"), big)
	run := tx.Bucket([]byte("runs")).Bucket([]byte("r1"))
	_ = run.ForEachBucket(func(name []byte) error {
		mustPut(t, run.Bucket(name), []byte("~filler"), big)
		return nil
	})
}

// checkClosed runs DB.Check and closes db. Every key in the violations is
// written to first: a key that still pointed into the file's read-only
// mapping, instead of being a copy, would fault.
func checkClosed(t *testing.T, db *store.DB) []store.Violation {
	t.Helper()
	vs, err := db.Check(nil)
	for _, v := range vs {
		for i := range v.Key {
			v.Key[i] ^= 0xff
			v.Key[i] ^= 0xff
		}
	}
	if cerr := db.Close(); (err != nil && !errors.Is(err, store.ErrCorrupt)) || cerr != nil {
		t.Fatal(err, cerr)
	}
	return vs
}

// sameViolations reports how got differs from want (each want matched by a
// distinct violation, nothing left over); "" when they agree.
func sameViolations(prefix string, got []store.Violation, want []wantV) string {
	used := make([]bool, len(got))
	var miss []string
	for _, w := range want {
		bucket := strings.TrimSuffix(prefix+w.bucket, "/")
		found := false
		for i, v := range got {
			if !used[i] && v.Kind == w.kind && v.Bucket == bucket && bytes.Equal(v.Key, w.key) && strings.Contains(v.Detail, w.detail) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			miss = append(miss, fmt.Sprintf("missing %s at %s key %x mentioning %q", w.kind, bucket, w.key, w.detail))
		}
	}
	for i, v := range got {
		if !used[i] {
			miss = append(miss, "unexpected "+v.String())
		}
	}
	return strings.Join(miss, "\n")
}

func k2(a, b uint64) []byte    { return binary.BigEndian.AppendUint64(beKey(a), b) }
func k3(a, b, c uint64) []byte { return binary.BigEndian.AppendUint64(k2(a, b), c) }

func mustPut(t *testing.T, b *bolt.Bucket, k, v []byte) {
	t.Helper()
	if err := b.Put(k, v); err != nil {
		t.Fatal(err)
	}
}

// logged says which events write a record and how to key their payload,
// so editRecord can make the log agree with the damage.
type logged[T any] struct {
	kinds []model.EventKind
	key   func(*T) []byte
}

var (
	nodeLog   = logged[model.Node]{[]model.EventKind{model.EvNodeAdd, model.EvNodeScore, model.EvNodeRoute, model.EvNodeStatus, model.EvNodeReward, model.EvNodeEnvState}, func(n *model.Node) []byte { return beKey(n.ID) }}
	groupLog  = logged[model.Group]{[]model.EventKind{model.EvGroupOpen, model.EvGroupUpdate, model.EvGroupClose}, func(g *model.Group) []byte { return k2(g.Step, g.ID) }}
	rubricLog = logged[model.Rubric]{[]model.EventKind{model.EvRubricPut, model.EvRubricUpdate, model.EvRubricMove}, func(r *model.Rubric) []byte { return beKey(r.ID) }}
)

// editRecord applies fn to the record at key in bucket name; with lg it
// applies fn to the payload of the last event that wrote the record too.
func editRecord[T any](t *testing.T, tx *bolt.Tx, name string, key []byte, lg *logged[T], fn func(*T)) {
	t.Helper()
	b := runBucket(tx, "r1", name)
	var rec T
	unframeRecord(t, b.Get(key), &rec)
	fn(&rec)
	mustPut(t, b, key, frameRecord(t, &rec))
	if lg == nil {
		return
	}
	events := runBucket(tx, "r1", "events")
	var lastKey []byte
	var last model.Event
	_ = events.ForEach(func(k, v []byte) error {
		var e model.Event
		unframeRecord(t, v, &e)
		if !slices.Contains(lg.kinds, e.Kind) {
			return nil
		}
		var p T
		if msgpack.Unmarshal(e.Payload, &p) == nil && bytes.Equal(lg.key(&p), key) {
			lastKey, last = bytes.Clone(k), e
		}
		return nil
	})
	if lastKey == nil {
		t.Fatalf("no event wrote %s key %x", name, key)
	}
	var p T
	unframeRecord(t, append(make([]byte, 5), last.Payload...), &p)
	fn(&p)
	payload, err := msgpack.Marshal(&p)
	if err != nil {
		t.Fatal(err)
	}
	last.Payload = payload
	mustPut(t, events, lastKey, frameRecord(t, &last))
}

func editNode(t *testing.T, tx *bolt.Tx, id uint64, fn func(*model.Node)) {
	editRecord(t, tx, "nodes", beKey(id), &nodeLog, fn)
}

// readFixture returns the ids buildFixture gave the records of the file at
// path.
func readFixture(t *testing.T, db *store.DB) fixture {
	t.Helper()
	f := fixture{Run: "r1"}
	inRun(t, db, false, "r1", func(r *store.RunTx) error {
		gs, err := r.Groups(fixtureStep)
		if err != nil {
			return err
		}
		f.G1, f.G2 = gs[0], gs[1]
		nodes, err := r.GroupNodes(f.G1)
		if err != nil {
			return err
		}
		// GroupNodes: roots A P C F in order, then B.
		f.A, f.P, f.C, f.F, f.B = nodes[0].ID, nodes[1].ID, nodes[2].ID, nodes[3].ID, nodes[4].ID
		f.X = f.G2.Roots[0]
		rbs, err := r.Rubrics("")
		if err != nil {
			return err
		}
		ids := map[string]*uint64{"cites the file it edits": &f.RPublic, "runs the tests": &f.RRetired, "draft one": &f.RCand1, "draft two": &f.RCand2}
		for _, rb := range rbs {
			*ids[rb.Text] = rb.ID
		}
		return nil
	})
	return f
}

func TestCheckInvariants(t *testing.T) {
	good := goodFile(t)
	db := storetest.OpenPath(t, good, syncOptions())
	f := readFixture(t, db)
	var lastSeq uint64
	inRun(t, db, false, "r1", func(r *store.RunTx) error { lastSeq = r.LastSeq(); return nil })

	setSeq := func(name string, seq uint64) func(*testing.T, *bolt.Tx) {
		return func(t *testing.T, tx *bolt.Tx) {
			if err := runBucket(tx, "r1", name).SetSequence(seq); err != nil {
				t.Fatal(err)
			}
		}
	}
	put := func(name string, k []byte, v func(*testing.T) []byte) func(*testing.T, *bolt.Tx) {
		return func(t *testing.T, tx *bolt.Tx) { mustPut(t, runBucket(tx, "r1", name), k, v(t)) }
	}
	raw := func(v []byte) func(*testing.T) []byte { return func(*testing.T) []byte { return v } }
	framed := func(rec any) func(*testing.T) []byte { return func(t *testing.T) []byte { return frameRecord(t, rec) } }
	node := func(id uint64, fn func(*model.Node)) func(*testing.T, *bolt.Tx) {
		return func(t *testing.T, tx *bolt.Tx) { editNode(t, tx, id, fn) }
	}
	group := func(g model.Group, lg *logged[model.Group], fn func(*model.Group)) func(*testing.T, *bolt.Tx) {
		return func(t *testing.T, tx *bolt.Tx) { editRecord(t, tx, "groups", k2(g.Step, g.ID), lg, fn) }
	}
	rubric := func(id uint64, lg *logged[model.Rubric], fn func(*model.Rubric)) func(*testing.T, *bolt.Tx) {
		return func(t *testing.T, tx *bolt.Tx) { editRecord(t, tx, "rubrics", beKey(id), lg, fn) }
	}
	merge := func(into uint64) func(*model.Rubric) {
		return func(r *model.Rubric) { r.Pool, r.MergedInto = model.PoolMerged, into }
	}
	both := func(a, b func(*testing.T, *bolt.Tx)) func(*testing.T, *bolt.Tx) {
		return func(t *testing.T, tx *bolt.Tx) { a(t, tx); b(t, tx) }
	}
	xKey, aKey := turnKeyOf(t, db, "r1", f.X, 0), turnKeyOf(t, db, "r1", f.A, 0)
	xSeq, aSeq := binary.BigEndian.Uint64(xKey), binary.BigEndian.Uint64(aKey)
	var turnX func(*testing.T) []byte = func(t *testing.T) []byte {
		var v []byte
		_ = db.View(func(tx *store.Tx) error { v = bytes.Clone(rawBucket(t, tx, "r1", "turns").Get(xKey)); return nil })
		return v
	}
	g1 := k2(fixtureStep, f.G1.ID)
	advP := k3(fixtureStep, f.G1.ID, f.P)

	// flip damages the value at key so that its CRC fails.
	flip := func(name string, key []byte) func(*testing.T, *bolt.Tx) {
		return func(t *testing.T, tx *bolt.Tx) {
			b := tx.Bucket([]byte("runs")).Bucket([]byte("r1"))
			if name != "" {
				b = b.Bucket([]byte(name))
			}
			v := bytes.Clone(b.Get(key))
			v[len(v)-1] ^= 0x40
			mustPut(t, b, key, v)
		}
	}
	crc := func(bucket string, key []byte) wantV { return wantV{"corrupt", bucket, key, "CRC32C mismatch"} }
	g2 := k2(fixtureStep, f.G2.ID)

	cases := []struct {
		name   string
		damage func(*testing.T, *bolt.Tx)
		want   []wantV
	}{
		// A value that does not decode is reported once where it is;
		// what depends on it is reported where that is.
		{"run record damaged", flip("", []byte("run")), []wantV{crc("", []byte("run"))}},
		{"group record damaged", flip("groups", g2), []wantV{crc("groups", g2),
			inv("nodes", beKey(f.X), fmt.Sprintf("group %d does not exist", f.G2.ID)),
			inv("nodes", beKey(f.X), fmt.Sprintf("root branch not listed in group %d", f.G2.ID))}},
		{"node record damaged", flip("nodes", beKey(f.X)), []wantV{crc("nodes", beKey(f.X)),
			inv("groups", g2, fmt.Sprintf("root %d does not exist", f.X)),
			inv("turns", xKey, fmt.Sprintf("turn of unknown node %d", f.X)),
			inv("frontier", beKey(f.X), fmt.Sprintf("frontier lists unknown node %d", f.X))}},
		{"turn damaged", flip("turns", xKey), []wantV{crc("turns", xKey)}},
		{"advantage damaged", flip("adv", advP), []wantV{crc("adv", advP)}},
		{"rubric damaged", flip("rubrics", beKey(f.RCand1)), []wantV{crc("rubrics", beKey(f.RCand1))}},
		{"checkpoint damaged", flip("ckpt", beKey(2)), []wantV{crc("ckpt", beKey(2))}},
		{"event damaged", flip("events", beKey(5)), []wantV{crc("events", beKey(5))}},

		// Sequences: equal to the largest id is sound (the fixture), below
		// it a new record would overwrite an old one.
		{"node sequence below the largest id", setSeq("nodes", f.X-1),
			[]wantV{inv("nodes", nil, fmt.Sprintf("sequence %d is below id %d", f.X-1, f.X))}},
		{"group sequence below the largest id", setSeq("groups", f.G2.ID-1),
			[]wantV{inv("groups", nil, fmt.Sprintf("sequence %d is below id %d", f.G2.ID-1, f.G2.ID))}},
		// Group keys sort by step first: the largest id need not be last.
		{"group sequence below an id at an earlier step", put("groups", k2(0, 99), framed(&model.Group{ID: 99})),
			[]wantV{inv("groups", nil, fmt.Sprintf("sequence %d is below id 99", f.G2.ID)), notLogged("groups", k2(0, 99))}},
		{"rubric sequence below the largest id", setSeq("rubrics", f.RCand2-1),
			[]wantV{inv("rubrics", nil, fmt.Sprintf("sequence %d is below id %d", f.RCand2-1, f.RCand2))}},
		{"event sequence ahead of the last event", setSeq("events", lastSeq+1),
			[]wantV{inv("events", nil, fmt.Sprintf("last event is %d but the sequence is at %d", lastSeq, lastSeq+1))}},
		{"event sequence behind the last event", setSeq("events", lastSeq-1),
			[]wantV{inv("events", nil, fmt.Sprintf("last event is %d but the sequence is at %d", lastSeq, lastSeq-1))}},
		{"event record numbered unlike its key", func(t *testing.T, tx *bolt.Tx) {
			b := runBucket(tx, "r1", "events")
			var e model.Event
			unframeRecord(t, b.Get(beKey(lastSeq)), &e)
			e.Seq += 5
			mustPut(t, b, beKey(lastSeq), frameRecord(t, &e))
		}, []wantV{inv("events", beKey(lastSeq), "record does not match its key")}},
		{"event missing from the sequence", func(t *testing.T, tx *bolt.Tx) {
			if err := runBucket(tx, "r1", "events").Delete(beKey(lastSeq - 1)); err != nil {
				t.Fatal(err)
			}
			// That event was the run record's last write.
		}, []wantV{inv("events", beKey(lastSeq), fmt.Sprintf("sequence jumps from %d to %d", lastSeq-2, lastSeq)), logDiffers("", []byte("run"))}},
		{"event key not a sequence number", put("events", []byte("bad"), framed(&model.Event{Seq: 1, Kind: "x"})),
			[]wantV{inv("events", []byte("bad"), "record does not match its key")}},

		// Groups.
		{"duplicate group id", put("groups", k2(0, f.G1.ID), framed(&model.Group{ID: f.G1.ID, Roots: f.G1.Roots})),
			[]wantV{inv("groups", g1, fmt.Sprintf("group id %d appears twice", f.G1.ID)), notLogged("groups", k2(0, f.G1.ID))}},
		{"group key not step|group", put("groups", beKey(9), framed(&model.Group{ID: 9, Step: 1})),
			[]wantV{inv("groups", beKey(9), "key is not step|group"), notLogged("groups", beKey(9))}},
		{"group record at another step than its key", group(f.G2, nil, func(g *model.Group) { g.Step = 5 }),
			[]wantV{inv("groups", k2(fixtureStep, f.G2.ID), fmt.Sprintf("record says step 5 group %d", f.G2.ID)), logDiffers("groups", k2(fixtureStep, f.G2.ID)),
				inv("nodes", beKey(f.X), fmt.Sprintf("step %d differs from its group's 5", fixtureStep))}},
		{"group record with another id than its key", group(f.G2, nil, func(g *model.Group) { g.ID = 7 }),
			[]wantV{inv("groups", k2(fixtureStep, f.G2.ID), fmt.Sprintf("record says step %d group 7", fixtureStep)), logDiffers("groups", k2(fixtureStep, f.G2.ID)),
				inv("nodes", beKey(f.X), fmt.Sprintf("group %d does not exist", f.G2.ID)),
				inv("groups", k2(fixtureStep, 7), fmt.Sprintf("root %d is not a root of this group", f.X))}},
		{"active node in a closed group", group(f.G2, &groupLog, func(g *model.Group) { g.Status = model.GroupClosed }),
			[]wantV{inv("nodes", beKey(f.X), fmt.Sprintf("active in closed group %d", f.G2.ID))}},
		{"root missing from its group", group(f.G1, nil, func(g *model.Group) { g.Roots = slices.DeleteFunc(g.Roots, func(id uint64) bool { return id == f.P }) }),
			[]wantV{inv("nodes", beKey(f.P), fmt.Sprintf("root branch not listed in group %d", f.G1.ID)), logDiffers("groups", g1)}},
		{"root listed in the wrong group", group(f.G2, nil, func(g *model.Group) { g.Roots = append(g.Roots, f.P) }),
			[]wantV{inv("groups", k2(fixtureStep, f.G2.ID), fmt.Sprintf("root %d is not a root of this group", f.P)), logDiffers("groups", k2(fixtureStep, f.G2.ID))}},
		{"child listed as a root", group(f.G1, nil, func(g *model.Group) { g.Roots = append(g.Roots, f.B) }),
			[]wantV{inv("groups", g1, fmt.Sprintf("root %d is not a root of this group", f.B)), logDiffers("groups", g1)}},
		{"root that does not exist", group(f.G1, nil, func(g *model.Group) { g.Roots = append(g.Roots, 99) }),
			[]wantV{inv("groups", g1, "root 99 does not exist"), logDiffers("groups", g1)}},

		// Nodes.
		{"node key not a node id", put("nodes", []byte("nine"), framed(&model.Node{ID: 9})),
			[]wantV{inv("nodes", []byte("nine"), "key is not a node id"), notLogged("nodes", []byte("nine"))}},
		{"node record under another id", put("nodes", beKey(77), func(t *testing.T) []byte {
			var v []byte
			_ = db.View(func(tx *store.Tx) error { v = bytes.Clone(rawBucket(t, tx, "r1", "nodes").Get(beKey(f.B))); return nil })
			return v
		}), []wantV{inv("nodes", beKey(77), fmt.Sprintf("record id %d does not match key", f.B)), notLogged("nodes", beKey(77)),
			inv("nodes", nil, fmt.Sprintf("sequence %d is below id 77", f.X))}},
		{"node of a group that does not exist", node(f.F, func(n *model.Node) { n.Group = 99 }),
			[]wantV{inv("nodes", beKey(f.F), "group 99 does not exist"), inv("groups", g1, fmt.Sprintf("root %d is not a root", f.F))}},
		{"node at another step than its group", node(f.B, func(n *model.Node) { n.Step = 2 }),
			[]wantV{inv("nodes", beKey(f.B), fmt.Sprintf("step 2 differs from its group's %d", fixtureStep))}},
		{"unknown node status", node(f.F, func(n *model.Node) { n.Status = "lost" }),
			[]wantV{inv("nodes", beKey(f.F), `unknown status "lost"`)}},
		{"score above 1", node(f.A, func(n *model.Node) { n.Scores[0].Value = 1.5 }),
			[]wantV{inv("nodes", beKey(f.A), "score 1.5 outside [0,1]")}},
		{"score below 0", node(f.A, func(n *model.Node) { n.Scores[0].Value = -0.25 }),
			[]wantV{inv("nodes", beKey(f.A), "score -0.25 outside [0,1]")}},
		{"scores 0 and 1 are in range", node(f.A, func(n *model.Node) {
			n.Scores = append(n.Scores, model.Score{Interval: 1, Turn: 3, Value: 0}, model.Score{Interval: 2, Turn: 3, Value: 1})
		}), nil},
		{"root with a depth", node(f.P, func(n *model.Node) { n.Depth = 1 }),
			[]wantV{inv("nodes", beKey(f.P), "root with fork 0 base 0 depth 1")}},
		{"root with a fork point", node(f.P, func(n *model.Node) { n.Fork = 1 }),
			[]wantV{inv("nodes", beKey(f.P), "root with fork 1 base 0 depth 0")}},
		{"root with a base", node(f.P, func(n *model.Node) { n.Base = 2 }),
			[]wantV{inv("nodes", beKey(f.P), "root with fork 0 base 2 depth 0")}},
		{"node that is its own parent", node(f.B, func(n *model.Node) { n.Parent = f.B }),
			[]wantV{inv("nodes", beKey(f.B), fmt.Sprintf("parent %d does not precede it", f.B)),
				inv("children", k2(f.A, f.B), fmt.Sprintf("index says %d is a child of %d", f.B, f.A))}},
		{"fork exactly one past the parent's turns", node(f.B, func(n *model.Node) { n.Fork, n.Base = 4, 4 }),
			[]wantV{inv("nodes", beKey(f.B), fmt.Sprintf("fork point 4 outside parent %d's 3 turns", f.A))}},
		{"fork at the parent's last turn is sound", node(f.B, func(n *model.Node) { n.Fork, n.Base = 3, 3 }), nil},
		{"fork at the parent's first turn is sound", node(f.B, func(n *model.Node) { n.Fork, n.Base = 0, 0 }), nil},
		{"negative fork point", node(f.B, func(n *model.Node) { n.Fork, n.Base = -1, -1 }),
			[]wantV{inv("nodes", beKey(f.B), fmt.Sprintf("fork point -1 outside parent %d's 3 turns", f.A))}},
		{"base inconsistent with the parent", node(f.B, func(n *model.Node) { n.Base = 5 }),
			[]wantV{inv("nodes", beKey(f.B), fmt.Sprintf("depth 1 / base 5 inconsistent with parent %d", f.A))}},
		{"depth inconsistent with the parent", node(f.B, func(n *model.Node) { n.Depth = 2 }),
			[]wantV{inv("nodes", beKey(f.B), fmt.Sprintf("depth 2 / base 2 inconsistent with parent %d", f.A))}},
		{"parent in another group", node(f.B, func(n *model.Node) { n.Group = f.G2.ID }),
			[]wantV{inv("nodes", beKey(f.B), fmt.Sprintf("parent %d is in another group", f.A))}},

		// Turns.
		{"turn stored outside the node's ranges", put("turns", k2(aSeq, f.X), turnX),
			[]wantV{inv("turns", k2(aSeq, f.X), fmt.Sprintf("turn %d is outside node %d's turn ranges", aSeq, f.X))}},
		{"turn of an unknown node", put("turns", k2(xSeq, 99), turnX),
			[]wantV{inv("turns", k2(xSeq, 99), "turn of unknown node 99")}},
		{"turn key not seq|node", put("turns", beKey(f.X), turnX),
			[]wantV{inv("turns", beKey(f.X), "key is not seq|node")}},
		{"turn sequence below the last turn", setSeq("turns", xSeq-1),
			[]wantV{inv("turns", nil, fmt.Sprintf("sequence %d is below turn %d", xSeq-1, xSeq))}},
		{"turn ranges that miss the node's turn", node(f.X, func(n *model.Node) {
			if len(n.TurnRanges) > 0 { // the record's, not node.add's payload
				n.TurnRanges[0].Seq = aSeq
			}
		}),
			[]wantV{inv("turns", xKey, fmt.Sprintf("turn %d is outside node %d's turn ranges", xSeq, f.X)),
				inv("nodes", beKey(f.X), "node has 0 turns stored, record says 1"), logDiffers("nodes", beKey(f.X))}},
		{"turn ranges that hold fewer turns than recorded", node(f.X, func(n *model.Node) { n.TurnRanges = nil }),
			[]wantV{inv("turns", xKey, fmt.Sprintf("turn %d is outside node %d's turn ranges", xSeq, f.X)),
				inv("nodes", beKey(f.X), "turn ranges hold 0 turns, record says 1"),
				inv("nodes", beKey(f.X), "node has 0 turns stored, record says 1"), logDiffers("nodes", beKey(f.X))}},
		{"node with fewer turns stored than recorded", node(f.X, func(n *model.Node) { n.Turns = 2 }),
			[]wantV{inv("nodes", beKey(f.X), "turn ranges hold 1 turns, record says 2"),
				inv("nodes", beKey(f.X), "node has 1 turns stored, record says 2"), logDiffers("nodes", beKey(f.X))}},

		// Children index.
		{"children index value not empty", put("children", k2(f.A, f.B), raw([]byte{1})),
			[]wantV{{"corrupt", "children", k2(f.A, f.B), "index value is not empty"}}},
		{"children key not parent|child", put("children", beKey(f.A), raw(nil)),
			[]wantV{inv("children", beKey(f.A), "key is not parent|child")}},
		{"children index entry for another node's child", put("children", k2(f.P, f.B), raw(nil)),
			[]wantV{inv("children", k2(f.P, f.B), fmt.Sprintf("index says %d is a child of %d", f.B, f.P))}},
		{"children index entry for an unknown child", put("children", k2(f.A, 99), raw(nil)),
			[]wantV{inv("children", k2(f.A, 99), fmt.Sprintf("index says 99 is a child of %d", f.A))}},

		// Frontier.
		{"frontier value not empty", put("frontier", beKey(f.X), raw([]byte{1})),
			[]wantV{{"corrupt", "frontier", beKey(f.X), "index value is not empty"}}},
		{"frontier key not a node id", put("frontier", k2(f.X, 0), raw(nil)),
			[]wantV{inv("frontier", k2(f.X, 0), "key is not a node id")}},
		{"frontier entry for an unknown node", put("frontier", beKey(99), raw(nil)),
			[]wantV{inv("frontier", beKey(99), "frontier lists unknown node 99")}},

		// Advantages.
		{"advantage whose leaf is in another group", put("adv", k3(fixtureStep, f.G2.ID, f.P), framed(&model.Advantage{Step: fixtureStep, Group: f.G2.ID, Leaf: f.P})),
			[]wantV{inv("adv", k3(fixtureStep, f.G2.ID, f.P), fmt.Sprintf("node %d is not a leaf of group %d", f.P, f.G2.ID)), notLogged("adv", k3(fixtureStep, f.G2.ID, f.P))}},
		{"advantage of a leaf that does not exist", put("adv", k3(fixtureStep, f.G1.ID, 99), framed(&model.Advantage{Step: fixtureStep, Group: f.G1.ID, Leaf: 99})),
			[]wantV{inv("adv", k3(fixtureStep, f.G1.ID, 99), "leaf 99 does not exist"), notLogged("adv", k3(fixtureStep, f.G1.ID, 99))}},
		{"advantage record unlike its key", func(t *testing.T, tx *bolt.Tx) {
			editRecord(t, tx, "adv", advP, nil, func(a *model.Advantage) { a.Leaf = f.C })
		}, []wantV{inv("adv", advP, "record does not match its key"), logDiffers("adv", advP)}},
		{"advantage at another step than its key", func(t *testing.T, tx *bolt.Tx) {
			editRecord(t, tx, "adv", advP, nil, func(a *model.Advantage) { a.Step = 2 })
		}, []wantV{inv("adv", advP, "record does not match its key"), logDiffers("adv", advP)}},
		{"advantage in another group than its key", func(t *testing.T, tx *bolt.Tx) {
			editRecord(t, tx, "adv", advP, nil, func(a *model.Advantage) { a.Group = f.G2.ID })
		}, []wantV{inv("adv", advP, "record does not match its key"), logDiffers("adv", advP)}},
		{"advantage key not step|group|leaf", put("adv", k2(1, f.P), framed(&model.Advantage{Step: 1, Leaf: f.P})),
			[]wantV{inv("adv", k2(1, f.P), "key is not step|group|leaf"), notLogged("adv", k2(1, f.P))}},

		// Rubrics.
		{"rubric merged into a merged rubric", both(rubric(f.RCand2, &rubricLog, merge(f.RPublic)), rubric(f.RCand1, &rubricLog, merge(f.RCand2))),
			[]wantV{inv("rubrics", beKey(f.RCand1), fmt.Sprintf("merged into %d, which is not a public or retired rubric", f.RCand2))}},
		{"rubric merged into a candidate", rubric(f.RCand1, &rubricLog, merge(f.RCand2)),
			[]wantV{inv("rubrics", beKey(f.RCand1), fmt.Sprintf("merged into %d, which is not", f.RCand2))}},
		{"rubric merged into one that does not exist", rubric(f.RCand1, &rubricLog, merge(99)),
			[]wantV{inv("rubrics", beKey(f.RCand1), "merged into 99, which is not")}},
		{"rubrics merged into a public and a retired rubric are sound", both(rubric(f.RCand1, &rubricLog, merge(f.RPublic)), rubric(f.RCand2, &rubricLog, merge(f.RRetired))), nil},
		{"rubric in an unknown pool", rubric(f.RCand1, &rubricLog, func(r *model.Rubric) { r.Pool = "limbo" }),
			[]wantV{inv("rubrics", beKey(f.RCand1), `unknown pool "limbo"`)}},
		{"rubric record under another id", rubric(f.RCand1, nil, func(r *model.Rubric) { r.ID = 99 }),
			[]wantV{inv("rubrics", beKey(f.RCand1), "record does not match its key"), logDiffers("rubrics", beKey(f.RCand1))}},
		{"rubric key not an id", put("rubrics", []byte("r"), framed(&model.Rubric{Pool: model.PoolCandidate})),
			[]wantV{inv("rubrics", []byte("r"), "record does not match its key"), notLogged("rubrics", []byte("r"))}},

		// Checkpoints.
		{"checkpoint key that disagrees with its record", put("ckpt", beKey(5), framed(&model.Checkpoint{Step: 1})),
			[]wantV{inv("ckpt", beKey(5), "record does not match its key"), notLogged("ckpt", beKey(5))}},
		{"checkpoint key not a step", put("ckpt", []byte("one"), framed(&model.Checkpoint{Step: 1})),
			[]wantV{inv("ckpt", []byte("one"), "record does not match its key"), notLogged("ckpt", []byte("one"))}},

		// The run.
		{"run record under another id", func(t *testing.T, tx *bolt.Tx) {
			b := tx.Bucket([]byte("runs")).Bucket([]byte("r1"))
			var r model.Run
			unframeRecord(t, b.Get([]byte("run")), &r)
			r.ID = "r2"
			mustPut(t, b, []byte("run"), frameRecord(t, &r))
		}, []wantV{inv("", []byte("run"), `run record says id "r2"`), logDiffers("", []byte("run"))}},
		{"missing sub-bucket", func(t *testing.T, tx *bolt.Tx) {
			if err := tx.Bucket([]byte("runs")).Bucket([]byte("r1")).DeleteBucket([]byte("ckpt")); err != nil {
				t.Fatal(err)
			}
		}, []wantV{{"structure", "", nil, "missing sub-bucket ckpt"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vs := checkAfter(t, db, c.damage)
			if diff := sameViolations("runs/r1/", vs, c.want); diff != "" {
				t.Error(diff)
			}
			// The same damage committed to a copy of the file, checked by
			// DB.Check (page walk and meta pages included).
			path := filepath.Join(t.TempDir(), "damaged.db")
			copyFile(t, good, path)
			rawUpdate(t, path, func(tx *bolt.Tx) error { c.damage(t, tx); return nil })
			before := fileDigest(t, path)
			fdb, err := store.Open(path, storetest.Options())
			if err != nil {
				t.Fatal(err)
			}
			if diff := sameViolations("runs/r1/", checkClosed(t, fdb), c.want); diff != "" {
				t.Error("DB.Check:\n" + diff)
			}
			if fileDigest(t, path) != before {
				t.Error("Check changed the file")
			}
			// Once more with every bucket too big to be stored inline, so
			// the keys Check reads point into the file's mapping.
			copyFile(t, good, path)
			rawUpdate(t, path, func(tx *bolt.Tx) error { c.damage(t, tx); inflate(t, tx); return nil })
			if fdb, err = store.Open(path, storetest.Options()); err != nil {
				t.Fatal(err)
			}
			if vs := checkClosed(t, fdb); len(vs) <= len(c.want) {
				t.Errorf("inflated file: %d violations, want the %d above and the fillers'", len(vs), len(c.want))
			}
		})
	}
	if vs, err := db.Check(nil); err != nil || len(vs) != 0 {
		t.Fatalf("the damage was not rolled back: %v %v", vs, err)
	}
}

// TestCheckCapsViolations: a file damaged everywhere yields the first
// 1000 violations, not an unbounded report.
func TestCheckCapsViolations(t *testing.T) {
	db := storetest.OpenPath(t, goodFile(t), syncOptions())
	for _, n := range []int{999, 1000, 1001, 1500} {
		vs := checkAfter(t, db, func(t *testing.T, tx *bolt.Tx) {
			b := runBucket(tx, "r1", "frontier")
			for i := range n {
				mustPut(t, b, beKey(uint64(1000+i)), nil)
			}
		})
		if want := min(n, 1000); len(vs) != want {
			t.Errorf("%d unknown frontier entries: %d violations, want %d", n, len(vs), want)
		}
	}
}

// TestCheckMeta: the meta bucket holds the magic, the format version and
// the writer, nothing else. Open refuses a wrong magic or version, so the
// damage is made and checked inside one write transaction.
func TestCheckMeta(t *testing.T) {
	db := storetest.Open(t)
	meta := func(fn func(*bolt.Bucket) error) func(*testing.T, *bolt.Tx) {
		return func(t *testing.T, tx *bolt.Tx) {
			if err := fn(tx.Bucket([]byte("meta"))); err != nil {
				t.Fatal(err)
			}
		}
	}
	put := func(k string, v []byte) func(*testing.T, *bolt.Tx) {
		return meta(func(b *bolt.Bucket) error { return b.Put([]byte(k), v) })
	}
	format := func(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
	cases := []struct {
		name   string
		damage func(*testing.T, *bolt.Tx)
		want   []wantV
	}{
		{"bad magic", put("magic", []byte("patrdx")), []wantV{{"corrupt", "meta", []byte("magic"), "bad magic"}}},
		{"other format version", put("format", format(store.FormatVersion+1)), []wantV{{"corrupt", "meta", []byte("format"), "format version"}}},
		{"format version of 7 bytes", put("format", format(store.FormatVersion)[1:]), []wantV{{"corrupt", "meta", []byte("format"), "format version"}}},
		{"writer missing", meta(func(b *bolt.Bucket) error { return b.Delete([]byte("writer")) }), []wantV{{"corrupt", "meta", []byte("writer"), "writer missing"}}},
		{"writer of another program", put("writer", []byte("sqlite 3")), []wantV{{"corrupt", "meta", []byte("writer"), "writer missing or unreadable"}}},
		{"unexpected key", put("extra", []byte("x")), []wantV{{"corrupt", "meta", []byte("extra"), "unexpected key"}}},
		{"meta bucket missing", func(t *testing.T, tx *bolt.Tx) {
			if err := tx.DeleteBucket([]byte("meta")); err != nil {
				t.Fatal(err)
			}
		}, []wantV{{"structure", "meta", nil, "meta bucket missing"}}},
	}
	good := goodFile(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if diff := sameViolations("", checkAfter(t, db, c.damage), c.want); diff != "" {
				t.Error(diff)
			}
			// Committed to a file, where Open accepts it.
			path := filepath.Join(t.TempDir(), "meta.db")
			copyFile(t, good, path)
			rawUpdate(t, path, func(tx *bolt.Tx) error { c.damage(t, tx); return nil })
			fdb, err := store.Open(path, storetest.Options())
			if err != nil {
				return // refused at Open, which db_test.go covers
			}
			if diff := sameViolations("", checkClosed(t, fdb), c.want); diff != "" {
				t.Error("DB.Check:\n" + diff)
			}
			copyFile(t, good, path)
			rawUpdate(t, path, func(tx *bolt.Tx) error { c.damage(t, tx); inflate(t, tx); return nil })
			if fdb, err = store.Open(path, storetest.Options()); err != nil {
				t.Fatal(err)
			}
			checkClosed(t, fdb)
		})
	}
}
