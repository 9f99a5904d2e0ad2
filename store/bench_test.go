package store_test

// Benchmarks of the store's hot paths, for benchstat comparisons between
// commits (go test -bench . -count 10 ./store/ | tee new.txt). The turn is
// the benchmarks' swe-like one: ~300 action tokens with logprobs, ~1,200
// observation tokens, and the text of both at ~4 bytes a token.

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

const (
	benchActionTokens = 300
	benchObsTokens    = 1200
	benchBytesPerTok  = 4
)

var benchVocab = strings.Fields("the of to and a in is it you that he was for on are with as I his they be at one have this from or had by hot word but what some we can out other were all there when up use your how said an each she which do their time if will way about many then them write would like so these her long make thing see him two has look more day could go come did number sound no most people my over know water than call first who may down side been now find")

// benchSink keeps the copy baseline from being optimised away.
var benchSink []byte

func benchText(rng *rand.Rand, n int) string {
	var sb strings.Builder
	sb.Grow(n + 16)
	for sb.Len() < n {
		sb.WriteString(benchVocab[rng.IntN(len(benchVocab))])
		sb.WriteByte(' ')
	}
	return sb.String()[:n]
}

// benchTurn is one swe-like turn drawn from rng.
func benchTurn(rng *rand.Rand) model.Turn {
	t := model.Turn{
		Action:            benchText(rng, benchActionTokens*benchBytesPerTok),
		ActionTokens:      make([]uint32, benchActionTokens),
		ActionLogprobs:    make([]float32, benchActionTokens),
		Observation:       benchText(rng, benchObsTokens*benchBytesPerTok),
		ObservationTokens: make([]uint32, benchObsTokens),
		Reward:            rng.Float64(),
	}
	for i := range t.ActionTokens {
		t.ActionTokens[i] = rng.Uint32N(151_000)
		t.ActionLogprobs[i] = -rng.Float32() * 4
	}
	for i := range t.ObservationTokens {
		t.ObservationTokens[i] = rng.Uint32N(151_000)
	}
	return t
}

// benchTurns is a pool of distinct turns, so the benchmarks do not write
// the very same bytes over and over.
func benchTurns(n int) []model.Turn {
	rng := rand.New(rand.NewPCG(1, 2))
	out := make([]model.Turn, n)
	for i := range out {
		out[i] = benchTurn(rng)
	}
	return out
}

func BenchmarkTurnEncode(b *testing.B) {
	t := benchTurns(1)[0]
	raw, err := store.EncodeTurn(&t)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := store.EncodeTurn(&t); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTurnDecode(b *testing.B) {
	t := benchTurns(1)[0]
	raw, err := store.EncodeTurn(&t)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := store.DecodeTurn(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendTurnsInterval commits one interval of a batch: 64 trees of
// 4 active branches, K=13 turns each, in one transaction (NoSync, so it
// measures the store and not the disk's fsync).
func BenchmarkAppendTurnsInterval(b *testing.B) {
	const trees, branches, k = 64, 4, 13
	db := storetest.Open(b) // NoSync
	pool := benchTurns(64)
	var nodes []uint64
	update(b, db, func(tx *store.Tx) error {
		r, err := tx.CreateRun("bench", nil, nil)
		if err != nil {
			return err
		}
		for range trees {
			g, err := r.OpenGroup(store.GroupSpec{Step: 1, Task: "swe"})
			if err != nil {
				return err
			}
			for o := range branches {
				n, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Ordinal: o})
				if err != nil {
					return err
				}
				nodes = append(nodes, n.ID)
			}
		}
		return nil
	})
	var perInterval int64
	for i := range len(nodes) * k {
		raw, err := store.EncodeTurn(&pool[i%len(pool)])
		if err != nil {
			b.Fatal(err)
		}
		perInterval += int64(len(raw))
	}
	b.SetBytes(perInterval)
	b.ReportAllocs()
	interval := 0
	for b.Loop() {
		err := db.UpdateRun("bench", func(r *store.RunTx) error {
			turns := make([]model.Turn, k)
			for j, id := range nodes {
				for t := range turns {
					turns[t] = pool[(j*k+t)%len(pool)]
				}
				if err := r.AppendTurns(id, interval*k, turns...); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		interval++
	}
	b.ReportMetric(float64(b.N*len(nodes)*k)/b.Elapsed().Seconds(), "turns/s")
}

// BenchmarkTrajectoryWarm materialises a 50-turn leaf whose path crosses
// 4 forks (5 nodes of 10 own turns, each forking at its parent's last
// turn), with every node in the LRU. The copy sub-benchmark is the anchor
// of bench/RESULTS.md: copying the same encoded bytes out of one slice.
func BenchmarkTrajectoryWarm(b *testing.B) {
	const depth, own = 5, 10
	db := storetest.Open(b)
	pool := benchTurns(depth * own)
	var leaf uint64
	update(b, db, func(tx *store.Tx) error {
		r, err := tx.CreateRun("bench", nil, nil)
		if err != nil {
			return err
		}
		g, err := r.OpenGroup(store.GroupSpec{Step: 1})
		if err != nil {
			return err
		}
		parent, fork := uint64(0), 0
		for d := range depth {
			n, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Parent: parent, Fork: fork})
			if err != nil {
				return err
			}
			if err := r.AppendTurns(n.ID, 0, pool[d*own:(d+1)*own]...); err != nil {
				return err
			}
			// A sibling that prunes early, as in a real tree.
			if _, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Parent: parent, Fork: fork, Ordinal: 1}); err != nil {
				return err
			}
			if d < depth-1 {
				if err := r.Route(n.ID, model.Decision{Action: model.ActionExpand}); err != nil {
					return err
				}
			}
			parent, fork, leaf = n.ID, own, n.ID
		}
		return nil
	})
	var encoded [][]byte
	var total int64
	for i := range pool {
		raw, err := store.EncodeTurn(&pool[i])
		if err != nil {
			b.Fatal(err)
		}
		encoded = append(encoded, raw)
		total += int64(len(raw))
	}
	read := func() int {
		var n int
		err := db.ViewRun("bench", func(r *store.RunTx) error {
			traj, err := r.Trajectory(leaf)
			n = len(traj)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		return n
	}
	if n := read(); n != depth*own { // warms the LRU
		b.Fatalf("trajectory has %d turns, want %d", n, depth*own)
	}
	b.Run("store", func(b *testing.B) {
		b.SetBytes(total)
		b.ReportAllocs()
		for b.Loop() {
			read()
		}
	})
	b.Run("copy", func(b *testing.B) {
		flat := make([]byte, 0, total)
		for _, e := range encoded {
			flat = append(flat, e...)
		}
		b.SetBytes(total)
		b.ReportAllocs()
		for b.Loop() {
			benchSink = append([]byte(nil), flat...)
		}
	})
}
