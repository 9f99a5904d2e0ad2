package tree_test

import (
	"errors"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	"github.com/patrdb/patrdb/tree"
)

// Leases for long work: bound to their worker, renewed by heartbeats,
// extended by submits, given back by release.

func leaseEnv(t *testing.T) (*store.DB, *tree.Coordinator, *clock) {
	t.Helper()
	db := storetest.Open(t)
	cfg := tree.DefaultConfig()
	cfg.B0, cfg.K, cfg.MaxTurns = 2, 3, 9
	clk := &clock{t: time.Unix(1_000_000, 0)}
	c := coordinator(t, db, "r", cfg, &tree.CoordinatorOptions{LeaseTTL: 30 * time.Second, Now: clk.now})
	openStep(t, c, 1, tasks(1))
	return db, c, clk
}

// TestLeaseIsBoundToItsWorker: a lease's id is 128 random bits, and a
// submit, renewal or release naming it for another worker is refused —
// even with the right id — and writes nothing; its holder goes on.
func TestLeaseIsBoundToItsWorker(t *testing.T) {
	db, c, _ := leaseEnv(t)
	ls := lease(t, c, tree.LeaseRequest{Worker: "alice"})
	if len(ls) != 2 {
		t.Fatalf("leases %+v", ls)
	}
	hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)
	if !hex32.MatchString(ls[0].ID) || !hex32.MatchString(ls[1].ID) || ls[0].ID == ls[1].ID {
		t.Fatalf("lease ids %q %q: want 128 random bits each", ls[0].ID, ls[1].ID)
	}
	a := ls[0]
	before := dumpRun(t, db, "r")
	stolen := rollout.Submission{Lease: a.ID, Worker: "mallory", Node: a.Node, Turns: turnsN("m", 3), Score: ptr(0.9)}
	if _, err := submit(c, stolen); !errors.Is(err, rollout.ErrNotHolder) || !errors.Is(err, rollout.ErrConflict) {
		t.Fatalf("another worker's submit under alice's lease: %v, want ErrNotHolder", err)
	}
	if d := diffDump(dumpRun(t, db, "r"), before); d != "" {
		t.Fatalf("a refused submit wrote: %s", d)
	}
	for _, st := range append(c.Renew("mallory", []string{a.ID}), c.Release("mallory", []string{a.ID})...) {
		if st.Held || st.Reason == "" {
			t.Errorf("mallory renewing or releasing alice's lease: %+v", st)
		}
	}
	if again := lease(t, c, tree.LeaseRequest{Worker: "mallory"}); len(again) != 0 {
		t.Fatalf("alice's branches leased to mallory: %+v", again)
	}
	if _, err := submit(c, rollout.Submission{Lease: a.ID, Worker: "alice", Node: a.Node, Turns: turnsN("a", 3), Score: ptr(0.5)}); err != nil {
		t.Fatalf("alice's own submit: %v", err)
	}
}

// TestLeaseGraceIsATenthOfTheTTL: an expired lease is handed on after a
// grace of a tenth of its TTL, at most LeaseGrace — a 1 s lease 100 ms
// after it expired, not 5 s; an hour's lease LeaseGrace after, not six
// minutes.
func TestLeaseGraceIsATenthOfTheTTL(t *testing.T) {
	for _, c := range []struct {
		ttl, grace time.Duration
	}{
		{time.Second, 100 * time.Millisecond},
		{time.Hour, tree.LeaseGrace},
	} {
		_, co, clk := leaseEnv(t)
		held := lease(t, co, tree.LeaseRequest{Worker: "slow", Max: 1, TTL: c.ttl})
		clk.add(c.ttl + c.grace - time.Millisecond)
		if got := lease(t, co, tree.LeaseRequest{Worker: "other"}); len(got) != 1 || got[0].Node == held[0].Node {
			t.Fatalf("TTL %v: within the grace, another worker leased %+v; want only the other branch", c.ttl, got)
		}
		clk.add(2 * time.Millisecond)
		if got := lease(t, co, tree.LeaseRequest{Worker: "other"}); len(got) != 1 || got[0].Node != held[0].Node {
			t.Fatalf("TTL %v: past the grace, another worker leased %+v; want node %d", c.ttl, got, held[0].Node)
		}
	}
}

// TestHeartbeatsOutliveATool: a lease renewed every 0.4 TTL stays its
// holder's through a tool call of three TTLs, and the interval then
// commits; a lease nobody renews is handed on after its TTL and grace.
func TestHeartbeatsOutliveATool(t *testing.T) {
	_, c, clk := leaseEnv(t)
	ls := lease(t, c, tree.LeaseRequest{Worker: "slow"})
	kept, dropped := ls[0], ls[1]
	every := rollout.HeartbeatEvery(30 * time.Second)
	for elapsed := time.Duration(0); elapsed < 90*time.Second; elapsed += every {
		clk.add(every)
		if st := c.Renew("slow", []string{kept.ID}); !st[0].Held || st[0].ExpiresAt != clk.now().Add(30*time.Second).UnixNano() {
			t.Fatalf("renewal at +%v: %+v", elapsed+every, st[0])
		}
	}
	// 96 s in: the unrenewed lease is long gone, the renewed one held.
	got := lease(t, c, tree.LeaseRequest{Worker: "other"})
	if len(got) != 1 || got[0].Node != dropped.Node {
		t.Fatalf("after 96 s another worker leased %+v, want only node %d", got, dropped.Node)
	}
	if st := c.Renew("slow", []string{dropped.ID}); st[0].Held {
		t.Fatalf("a lease handed on renewed: %+v", st[0])
	}
	if _, err := submit(c, rollout.Submission{Lease: kept.ID, Worker: "slow", Node: kept.Node, Turns: turnsN("k", 3), Score: ptr(0.5)}); err != nil {
		t.Fatalf("the interval under a renewed lease: %v", err)
	}
	if _, err := submit(c, rollout.Submission{Lease: dropped.ID, Worker: "slow", Node: dropped.Node, Turns: turnsN("d", 3), Score: ptr(0.5)}); !errors.Is(err, rollout.ErrLeaseLost) {
		t.Fatalf("a submit under the lease handed on: %v, want ErrLeaseLost", err)
	}
}

// TestPartialSubmitsExtendTheLease: turns submitted inside an interval are
// durable at once and count as a sign of life.
func TestPartialSubmitsExtendTheLease(t *testing.T) {
	db, c, clk := leaseEnv(t)
	l := lease(t, c, tree.LeaseRequest{Worker: "w", Max: 1})[0]
	for i := range 3 {
		clk.add(25 * time.Second) // under the TTL each time, 75 s in all
		s := rollout.Submission{Lease: l.ID, Worker: "w", Node: l.Node, From: i, Turns: turnsN("p", 1)}
		if _, err := submit(c, s); err != nil {
			t.Fatalf("partial submit %d at +%ds: %v", i, 25*(i+1), err)
		}
		var n model.Node
		if err := db.View(func(tx *store.Tx) error {
			r, _ := tx.Run("r")
			n, _ = r.Node(l.Node)
			return nil
		}); err != nil || n.Turns != i+1 {
			t.Fatalf("after partial submit %d the node stores %d turns", i, n.Turns)
		}
	}
	if _, err := submit(c, rollout.Submission{Lease: l.ID, Worker: "w", Node: l.Node, From: 3, Score: ptr(0.5)}); err != nil {
		t.Fatalf("the score 75 s after the lease, under a 30 s TTL: %v", err)
	}
}

// TestReleaseHandsOnAtOnce: a released branch is leased again without
// waiting for the TTL, and the releaser's submit is refused.
func TestReleaseHandsOnAtOnce(t *testing.T) {
	_, c, _ := leaseEnv(t)
	all := lease(t, c, tree.LeaseRequest{Worker: "quitter", Max: 2})
	if got := lease(t, c, tree.LeaseRequest{Worker: "next", Max: 1}); len(got) != 0 {
		t.Fatalf("held branches leased: %+v", got)
	}
	l := all[0]
	if st := c.Release("quitter", []string{l.ID, "no-such-lease"}); st[0].Held || st[0].Reason != "released" || st[1].Held {
		t.Fatalf("release: %+v", st)
	}
	got := lease(t, c, tree.LeaseRequest{Worker: "next", Max: 1})
	if len(got) != 1 || got[0].Node != l.Node {
		t.Fatalf("after the release: %+v, want node %d", got, l.Node)
	}
	if _, err := submit(c, rollout.Submission{Lease: l.ID, Worker: "quitter", Node: l.Node, Turns: turnsN("q", 1)}); !errors.Is(err, rollout.ErrLeaseLost) {
		t.Fatalf("a submit under a released lease: %v, want ErrLeaseLost", err)
	}
}

// TestLeaseRequestBounds: a lease names its worker and a TTL up to
// MaxLeaseTTL; nothing is granted otherwise.
func TestLeaseRequestBounds(t *testing.T) {
	_, c, _ := leaseEnv(t)
	for name, req := range map[string]tree.LeaseRequest{
		"no worker":    {},
		"negative max": {Worker: "w", Max: -1},
		"TTL too long": {Worker: "w", TTL: tree.MaxLeaseTTL + time.Millisecond},
		"negative TTL": {Worker: "w", TTL: -time.Second},
	} {
		if ls, err := c.Lease(req, nil); !errors.Is(err, model.ErrInvalid) || len(ls) != 0 {
			t.Errorf("%s: %v %v, want ErrInvalid", name, ls, err)
		}
	}
	if got := lease(t, c, tree.LeaseRequest{Worker: "w"}); len(got) != 2 {
		t.Fatalf("a valid request after the refused ones: %+v", got)
	}
}

// TestLeasePrefersTheWorkersPaths: a worker that names the paths it holds
// is offered their children before any other branch, so a routed child
// goes on with the worker that grew its parent; without Prefer the
// round starts where the last one stopped.
func TestLeasePrefersTheWorkersPaths(t *testing.T) {
	db := storetest.Open(t)
	cfg := tree.DefaultConfig()
	cfg.B0, cfg.K, cfg.TopExpand, cfg.MaxTurns = 2, 1, 1, 9
	c := coordinator(t, db, "r", cfg, nil)
	groups := openStep(t, c, 1, tasks(3))
	ls := lease(t, c, tree.LeaseRequest{Worker: "w"})
	if len(ls) != 6 {
		t.Fatalf("leases %+v", ls)
	}
	for i, l := range ls { // the first root of each group scores higher: it is expanded
		if _, err := submit(c, rollout.Submission{Lease: l.ID, Worker: "w", Node: l.Node, Turns: turnsN("t", 1), Score: ptr(float64(1 - i%2))}); err != nil {
			t.Fatal(err)
		}
	}
	last := groups[2].Roots[0] // the last group's expanded root: its children come last in node order
	var kids []uint64
	if err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run("r")
		if err == nil {
			kids, err = r.Children(last)
		}
		return err
	}); err != nil || len(kids) != cfg.M {
		t.Fatalf("children of %d: %v %v", last, kids, err)
	}
	got := lease(t, c, tree.LeaseRequest{Worker: "holder", Max: cfg.M, Prefer: []uint64{groups[0].Roots[1], last}})
	var nodes []uint64
	for _, l := range got {
		nodes = append(nodes, l.Node)
	}
	if !slices.Equal(nodes, kids) {
		t.Fatalf("a worker holding node %d's path was granted %v, want its children %v", last, nodes, kids)
	}
	if other := lease(t, c, tree.LeaseRequest{Worker: "other", Max: 1}); len(other) != 1 || slices.Contains(kids, other[0].Node) || other[0].Node > kids[0] {
		t.Fatalf("without Prefer: %+v, want the first free branch in node order", other)
	}
}

// TestLeasePreferLooksAtTheNewestPaths: of a worker's held paths a grant
// looks at the newest tree.MaxPrefer (the end of Prefer); ids it does not
// know (dropped, or another run's) are passed over, not an error; a
// preferred branch of another step than the one asked is not granted.
func TestLeasePreferLooksAtTheNewestPaths(t *testing.T) {
	db := storetest.Open(t)
	cfg := tree.DefaultConfig()
	cfg.B0, cfg.K, cfg.TopExpand, cfg.MaxTurns = 2, 1, 1, 9
	c := coordinator(t, db, "r", cfg, nil)
	groups := openStep(t, c, 1, tasks(3))
	for i, l := range lease(t, c, tree.LeaseRequest{Worker: "w"}) {
		if _, err := submit(c, rollout.Submission{Lease: l.ID, Worker: "w", Node: l.Node, Turns: turnsN("t", 1), Score: ptr(float64(1 - i%2))}); err != nil {
			t.Fatal(err)
		}
	}
	last := groups[2].Roots[0]
	var kids []uint64
	if err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run("r")
		if err == nil {
			kids, err = r.Children(last)
		}
		return err
	}); err != nil || len(kids) != cfg.M {
		t.Fatalf("children of %d: %v %v", last, kids, err)
	}
	granted := func(req tree.LeaseRequest) []uint64 {
		t.Helper()
		ls := lease(t, c, req)
		var ids []string
		var nodes []uint64
		for _, l := range ls {
			ids = append(ids, l.ID)
			nodes = append(nodes, l.Node)
		}
		c.Release(req.Worker, ids)
		return nodes
	}
	unknown := uint64(1 << 40)
	if got := granted(tree.LeaseRequest{Worker: "h", Max: cfg.M, Prefer: []uint64{last, unknown}}); !slices.Equal(got, kids) {
		t.Errorf("an unknown id after the held path: granted %v, want the children %v", got, kids)
	}
	old := []uint64{last}
	for i := range tree.MaxPrefer {
		old = append(old, unknown+uint64(i))
	}
	if got := granted(tree.LeaseRequest{Worker: "h", Max: 1, Prefer: old}); len(got) != 1 || slices.Contains(kids, got[0]) {
		t.Errorf("a held path older than the newest %d: granted %v, want the first free branch in node order, not a child of it", tree.MaxPrefer, got)
	}
	if got := granted(tree.LeaseRequest{Worker: "h", Max: 1, Prefer: old[1:]}); len(got) != 1 || slices.Contains(kids, got[0]) {
		t.Errorf("only unknown ids: granted %v", got)
	}
	if got := granted(tree.LeaseRequest{Worker: "h", Max: 1, Prefer: old[:tree.MaxPrefer]}); !slices.Equal(got, kids[:1]) {
		t.Errorf("the held path among the newest %d: granted %v, want its first child %d", tree.MaxPrefer, got, kids[0])
	}
	step2 := openStep(t, c, 2, tasks(1))
	if got := granted(tree.LeaseRequest{Worker: "h", Max: 1, Step: 2, Prefer: []uint64{last}}); len(got) != 1 || got[0] != step2[0].Roots[0] {
		t.Errorf("step 2 asked, a step-1 path held: granted %v, want step 2's first root %d", got, step2[0].Roots[0])
	}
}

// TestALeaseThatFailsToReachItsWorkerIsReleased: when reading what a grant
// carries fails (a damaged history, say), the worker never learns of its
// leases, so the branches are handed back at once instead of staying held
// for the TTL.
func TestALeaseThatFailsToReachItsWorkerIsReleased(t *testing.T) {
	_, c, _ := leaseEnv(t)
	boom := errors.New("history unreadable")
	if _, err := c.Lease(tree.LeaseRequest{Worker: "w", Step: 1}, func(*store.Tx, []rollout.Lease) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("lease with a failing callback: %v", err)
	}
	if ls := lease(t, c, tree.LeaseRequest{Worker: "other", Step: 1}); len(ls) != 2 {
		t.Fatalf("after a failed grant another worker got %d branches, want both", len(ls))
	}
}
