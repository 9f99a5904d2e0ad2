// Package workload generates seeded PaTR rollout workloads for the
// benchmarks: the "swe-like" trees of the benchmark targets (B0=4, K=13, M=2, top-2
// expansion, paths of up to 50 turns of ~300 action and ~1,200 observation
// tokens) and a small "frozenlake" one (tiny turns, many nodes).
//
// A workload is a sequence of batches. A batch is a fixed number of trees
// grown side by side; its transactions are its intervals: transaction i
// holds interval i of every tree still growing, which is how a trainer that
// commits once per interval of a batch writes. Each tree is simulated with
// its own seeded generator: branches carry a latent quality that their
// process scores track with noise, tree.Route decides expand / survive /
// prune on those scores, branches finish with a quality-dependent hazard or
// hit the turn cap, each leaf's outcome is the engine's (tree.PathReward:
// the env rewards along its path), and the tree closes with the engine's
// GRPO advantages over its leaves (tree.Advantages). The same seed gives the same operations, byte for byte, so every
// contender is handed identical work.
package workload

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/patrdb/patrdb/grpo"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/tree"
)

// Kind names a workload.
type Kind string

const (
	SWE        Kind = "swe-like"
	FrozenLake Kind = "frozenlake"
)

// Config describes a workload. Start from SWEConfig or FrozenLakeConfig.
type Config struct {
	Kind Kind
	// Tree holds the routing parameters passed to tree.Route; Tree.MaxTurns
	// caps a root-to-leaf path.
	Tree tree.Config
	// Trees is the number of trees per batch.
	Trees int
	// Seed makes the workload reproducible.
	Seed uint64

	// Turn size (swe-like only): mean action and observation tokens per
	// turn, and bytes of text per token for both.
	ActionTokens      int
	ObservationTokens int
	BytesPerToken     int
	// PromptBytes is the size of each group's prompt (the task statement).
	PromptBytes int

	// DoneHazard is the per-turn probability that a branch of quality 0.5
	// finishes (scaled by 0.5+quality).
	DoneHazard float64
	// StuckHazard is the per-turn probability that a branch starts repeating
	// its action, which the RepeatPrune rule then catches.
	StuckHazard float64
	// ScoreNoise is the standard deviation of a process score around the
	// branch's latent quality; ChildDrift that of a child's quality around
	// its parent's.
	ScoreNoise float64
	ChildDrift float64
}

// SWEConfig is the swe-like workload of the benchmark targets.
func SWEConfig(seed uint64) Config {
	tc := tree.DefaultConfig()
	tc.K = 13
	tc.MaxTurns = 50
	tc.Seed = int64(seed)
	return Config{
		Kind: SWE, Tree: tc, Trees: 64, Seed: seed,
		ActionTokens: 300, ObservationTokens: 1200, BytesPerToken: 4, PromptBytes: 2048,
		DoneHazard: 0.012, StuckHazard: 0.002, ScoreNoise: 0.12, ChildDrift: 0.12,
	}
}

// FrozenLakeConfig is the small workload: one-token turns, short episodes,
// many nodes. The resume stores are built from it.
func FrozenLakeConfig(seed uint64) Config {
	tc := tree.DefaultConfig()
	tc.K = 5
	tc.MaxTurns = 100
	tc.Seed = int64(seed)
	return Config{
		Kind: FrozenLake, Tree: tc, Trees: 64, Seed: seed, PromptBytes: 32,
		DoneHazard: 0.12, StuckHazard: 0.01, ScoreNoise: 0.12, ChildDrift: 0.12,
	}
}

// ErrConfig reports an unusable Config.
var ErrConfig = errors.New("workload: invalid config")

// Validate reports the first unusable field.
func (c Config) Validate() error {
	if err := c.Tree.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	switch {
	case c.Kind != SWE && c.Kind != FrozenLake:
		return fmt.Errorf("%w: kind %q", ErrConfig, c.Kind)
	case c.Trees < 1:
		return fmt.Errorf("%w: Trees = %d, want >= 1", ErrConfig, c.Trees)
	case c.Tree.MaxTurns < 1:
		return fmt.Errorf("%w: Tree.MaxTurns = %d, want a cap >= 1", ErrConfig, c.Tree.MaxTurns)
	case c.Kind == SWE && (c.ActionTokens < 1 || c.ObservationTokens < 1 || c.BytesPerToken < 1):
		return fmt.Errorf("%w: turn sizes must be positive", ErrConfig)
	case c.DoneHazard < 0 || c.DoneHazard >= 1 || c.StuckHazard < 0 || c.StuckHazard >= 1:
		return fmt.Errorf("%w: hazards must be in [0,1)", ErrConfig)
	case c.ScoreNoise < 0 || c.ChildDrift < 0:
		return fmt.Errorf("%w: noise must be >= 0", ErrConfig)
	}
	return nil
}

// OpKind is the store call an Op stands for.
type OpKind uint8

const (
	OpOpenGroup  OpKind = iota // RunTx.OpenGroup: Group, Step, Task, Prompt
	OpAddNode                  // RunTx.AddNode: Node, Parent (0 = root), Fork, Ordinal
	OpTurns                    // RunTx.AppendTurns: Node, From, Turns
	OpStatus                   // RunTx.SetNodeStatus: Node, Status
	OpReward                   // RunTx.SetReward: Node, Value
	OpScore                    // RunTx.Score: Node, Score
	OpRoute                    // RunTx.Route: Node, Decision
	OpInterval                 // RunTx.SetGroupInterval: Group, Interval
	OpAdvantage                // RunTx.PutAdvantage: Adv
	OpCloseGroup               // RunTx.CloseGroup: Group
)

// Op is one store call. Node and group ids are the ones a fresh run
// assigns (both sequences start at 1 and count in creation order), so a
// contender can check that the store agrees.
type Op struct {
	Kind     OpKind
	Tree     int // tree index within the workload
	Step     uint64
	Group    uint64
	Node     uint64
	Parent   uint64
	Fork     int
	Ordinal  int
	From     int
	Turns    []model.Turn
	Status   model.NodeStatus
	Value    float64
	Score    model.Score
	Decision model.Decision
	Adv      model.Advantage
	Interval int
	Task     string
	Prompt   string
}

// Batch is a set of trees grown side by side; Txns[i] is interval i of
// every tree still growing.
type Batch struct {
	Index int
	Step  uint64
	Txns  [][]Op
	Stats Stats
}

// Stats summarise what a batch writes.
type Stats struct {
	Trees     int
	Nodes     int
	Leaves    int
	Turns     int   // turns generated (each stored once by a prefix-sharing store)
	TurnBytes int64 // their logical bytes (TurnBytes)
	PathTurns int   // turns in all leaves' full trajectories (what a per-leaf dump writes)
	Pruned    int   // leaves pruned by routing
	Full      int   // leaves whose path reached Tree.MaxTurns
}

// Add accumulates o into s.
func (s *Stats) Add(o Stats) {
	s.Trees += o.Trees
	s.Nodes += o.Nodes
	s.Leaves += o.Leaves
	s.Turns += o.Turns
	s.TurnBytes += o.TurnBytes
	s.PathTurns += o.PathTurns
	s.Pruned += o.Pruned
	s.Full += o.Full
}

// Generator yields the batches of a workload in order.
type Generator struct {
	cfg       Config
	pool      *pool
	nextNode  uint64
	nextGroup uint64
	batch     int
}

// NewGenerator validates cfg and prepares the content pool.
func NewGenerator(cfg Config) (*Generator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Generator{cfg: cfg, nextNode: 1, nextGroup: 1}
	if cfg.Kind == SWE {
		rng := rand.New(rand.NewPCG(cfg.Seed, 0x9e3779b97f4a7c15))
		maxTok := 4 * max(cfg.ActionTokens, cfg.ObservationTokens)
		g.pool = newPool(rng, 4*maxTok*cfg.BytesPerToken, 8*maxTok)
	}
	return g, nil
}

// Config returns the generator's configuration.
func (g *Generator) Config() Config { return g.cfg }

// Next generates the next batch.
func (g *Generator) Next() Batch { return g.next(g.cfg.Seed, uint64(g.batch)) }

// NextWithSeed generates the next batch (ids and step continue from the
// previous one) from trees seeded by seed alone, so the same trees can end
// workloads of different lengths; the resume benchmark uses it to give
// stores of every size the same frontier.
func (g *Generator) NextWithSeed(seed uint64) Batch { return g.next(seed, 1<<31) }

func (g *Generator) next(seed, stream uint64) Batch {
	b := Batch{Index: g.batch, Step: uint64(g.batch) + 1}
	perTree := make([][][]Op, g.cfg.Trees)
	for t := range perTree {
		rng := rand.New(rand.NewPCG(seed, stream<<32|uint64(t)))
		s := &sim{cfg: &g.cfg, pool: g.pool, rng: rng, tree: g.batch*g.cfg.Trees + t, step: b.Step}
		perTree[t] = s.run()
		b.Stats.Add(s.stats)
	}
	// Assemble interval i of every tree, in tree order, and hand out ids in
	// the order a store would allocate them.
	locals := make([][]uint64, g.cfg.Trees)
	groups := make([]uint64, g.cfg.Trees)
	for iv := 0; ; iv++ {
		var txn []Op
		for t, ivs := range perTree {
			if iv >= len(ivs) {
				continue
			}
			for _, op := range ivs[iv] {
				if op.Kind == OpOpenGroup {
					groups[t] = g.nextGroup
					g.nextGroup++
				}
				op.Group = groups[t]
				op.Adv.Group = groups[t]
				if op.Kind == OpAddNode {
					locals[t] = append(locals[t], g.nextNode)
					g.nextNode++
				}
				op.Node = resolve(locals[t], op.Node)
				op.Parent = resolve(locals[t], op.Parent)
				op.Adv.Leaf = resolve(locals[t], op.Adv.Leaf)
				txn = append(txn, op)
			}
		}
		if len(txn) == 0 {
			break
		}
		b.Txns = append(b.Txns, txn)
	}
	g.batch++
	return b
}

// resolve maps a 1-based local node number to its global id; 0 stays 0.
func resolve(ids []uint64, local uint64) uint64 {
	if local == 0 {
		return 0
	}
	return ids[local-1]
}

// sim grows one tree. Node numbers in its ops are 1-based local indexes
// until Next resolves them.
type sim struct {
	cfg   *Config
	pool  *pool
	rng   *rand.Rand
	tree  int
	step  uint64
	nodes []*simNode
	stats Stats
}

type simNode struct {
	local   uint64
	fork    int
	base    int
	turns   int
	quality float64
	repeat  int
	status  model.NodeStatus
	reward  float64
	path    []float64 // the env rewards along its path, root first
}

func (s *sim) add(ops []Op, parent *simNode, ordinal int, quality float64) ([]Op, *simNode) {
	n := &simNode{local: uint64(len(s.nodes)) + 1, quality: clamp01(quality), status: model.NodeActive}
	op := Op{Kind: OpAddNode, Tree: s.tree, Step: s.step, Node: n.local, Ordinal: ordinal}
	if parent != nil {
		n.fork = parent.turns
		n.base = parent.base + parent.turns
		n.path = slices.Clone(parent.path) // children fork at the parent's last turn
		op.Parent, op.Fork = parent.local, n.fork
	}
	s.nodes = append(s.nodes, n)
	s.stats.Nodes++
	return append(ops, op), n
}

func (s *sim) turn() model.Turn {
	if s.cfg.Kind == SWE {
		return s.pool.sweTurn(s.rng, s.cfg.ActionTokens, s.cfg.ObservationTokens, s.cfg.BytesPerToken)
	}
	return lakeTurn(s.rng)
}

func (s *sim) prompt() string {
	if s.pool != nil {
		return s.pool.cutText(s.rng, s.cfg.PromptBytes)
	}
	return fmt.Sprintf("4x4 map, seed %d", s.rng.IntN(1<<20))
}

// run returns the tree's ops, one slice per interval.
func (s *sim) run() [][]Op {
	cfg := s.cfg
	var out [][]Op
	ops := []Op{{Kind: OpOpenGroup, Tree: s.tree, Step: s.step, Task: fmt.Sprintf("task-%d", s.tree), Prompt: s.prompt()}}
	var active []*simNode
	for i := range cfg.Tree.B0 {
		var n *simNode
		ops, n = s.add(ops, nil, i, s.rng.Float64())
		active = append(active, n)
	}
	s.stats.Trees++
	for iv := 0; len(active) > 0; iv++ {
		var still []*simNode
		for _, n := range active {
			var turns []model.Turn
			done := false
			for len(turns) < cfg.Tree.K && n.base+n.turns+len(turns) < cfg.Tree.MaxTurns && !done {
				t := s.turn()
				done = s.rng.Float64() < cfg.DoneHazard*(0.5+n.quality)
				if n.repeat > 0 || s.rng.Float64() < cfg.StuckHazard {
					n.repeat++
				}
				if done {
					t.Done = true
					if s.rng.Float64() < n.quality {
						t.Reward = 1
					}
				}
				s.stats.Turns++
				s.stats.TurnBytes += int64(TurnBytes(&t))
				turns = append(turns, t)
				n.path = append(n.path, t.Reward)
			}
			ops = append(ops, Op{Kind: OpTurns, Tree: s.tree, Step: s.step, Node: n.local, From: n.turns, Turns: turns})
			n.turns += len(turns)
			// A branch that ends has no reward of its own: the engine's
			// (tree.PathReward) is its outcome, as for a pruned one.
			switch {
			case done:
				n.status, n.reward = model.NodeCompleted, tree.PathReward(n.path)
			case n.base+n.turns >= cfg.Tree.MaxTurns:
				n.status, n.reward = model.NodeTruncated, tree.PathReward(n.path)
				s.stats.Full++
			default:
				still = append(still, n)
				continue
			}
			ops = append(ops,
				Op{Kind: OpStatus, Tree: s.tree, Step: s.step, Node: n.local, Status: n.status},
				Op{Kind: OpReward, Tree: s.tree, Step: s.step, Node: n.local, Value: n.reward})
		}
		var next []*simNode
		if len(still) > 0 {
			branches := make([]tree.Branch, len(still))
			for i, n := range still {
				sc := clamp01(n.quality + s.rng.NormFloat64()*cfg.ScoreNoise)
				branches[i] = tree.Branch{Node: n.local, Score: sc, RepeatRun: n.repeat}
				ops = append(ops, Op{Kind: OpScore, Tree: s.tree, Step: s.step, Node: n.local,
					Score: model.Score{Interval: iv, Turn: n.base + n.turns, Value: sc}})
			}
			for i, d := range tree.Route(branches, cfg.Tree) {
				n := still[i]
				ops = append(ops, Op{Kind: OpRoute, Tree: s.tree, Step: s.step, Node: n.local, Decision: d.Record(iv)})
				switch d.Action {
				case model.ActionPrune:
					n.status, n.reward = model.NodePruned, tree.PathReward(n.path)
					s.stats.Pruned++
					ops = append(ops, Op{Kind: OpReward, Tree: s.tree, Step: s.step, Node: n.local, Value: n.reward})
				case model.ActionExpand:
					n.status = model.NodeExpanded
					for c := range d.Children {
						var child *simNode
						ops, child = s.add(ops, n, c, n.quality+s.rng.NormFloat64()*cfg.ChildDrift)
						next = append(next, child)
					}
				default:
					next = append(next, n)
				}
			}
		}
		ops = append(ops, Op{Kind: OpInterval, Tree: s.tree, Step: s.step, Interval: iv + 1})
		if len(next) == 0 {
			ops = s.close(ops)
		}
		out = append(out, ops)
		ops = nil
		active = next
	}
	return out
}

// close appends the advantages of every leaf, as the engine computes them
// (tree.Advantages: GRPO, package grpo), and the group's close.
func (s *sim) close(ops []Op) []Op {
	var leaves []tree.Leaf
	for _, n := range s.nodes {
		if n.status.Leaf() {
			leaves = append(leaves, tree.Leaf{Node: model.Node{ID: n.local}, Reward: n.reward})
			s.stats.Leaves++
			s.stats.PathTurns += n.base + n.turns
		}
	}
	for _, a := range tree.Advantages(model.Group{Step: s.step}, leaves, nil, grpo.DefaultEps) {
		ops = append(ops, Op{Kind: OpAdvantage, Tree: s.tree, Step: s.step, Adv: a})
	}
	return append(ops, Op{Kind: OpCloseGroup, Tree: s.tree, Step: s.step})
}

// Materialize returns a copy of txn whose turns live in fresh memory, as a
// trainer's would; the generator's ops share one pool.
func Materialize(txn []Op) []Op {
	out := make([]Op, len(txn))
	copy(out, txn)
	for i := range out {
		if len(out[i].Turns) == 0 {
			continue
		}
		ts := make([]model.Turn, len(out[i].Turns))
		for j := range ts {
			ts[j] = MaterializeTurn(out[i].Turns[j])
		}
		out[i].Turns = ts
	}
	return out
}
