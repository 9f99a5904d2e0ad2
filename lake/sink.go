package lake

import (
	"encoding/json"
	"github.com/patrdb/patrdb/model"
	"maps"
	"slices"

	"github.com/patrdb/patrdb/replay"
)

// sink writes the lake's tables of one run into the staging folder.
// Groups, nodes, turns, advantages and checkpoints come from the records
// of each step; runs, rubrics, events and scalars from the event log,
// whose payloads are those records as each event left them.
type sink struct {
	runs    table[RunRow]
	groups  table[GroupRow]
	ckpts   table[CheckpointRow]
	nodes   table[NodeRow]
	turns   table[TurnRow]
	advs    table[AdvantageRow]
	rubrics table[RubricRow]
	events  table[EventRow]
	scalars table[ScalarRow]
	files   []File
}

func newSink(stage, name string) *sink {
	s := &sink{}
	f := &s.files
	s.runs = newTable[RunRow]("runs", name, stage, 1<<16, 0, f)
	s.groups = newTable[GroupRow]("groups", name, stage, 1<<14, 1<<20, f)
	s.ckpts = newTable[CheckpointRow]("checkpoints", name, stage, 1<<10, 0, f)
	s.nodes = newTable[NodeRow]("nodes", name, stage, 1<<16, 1<<22, f)
	// ~6 KB a turn in the swe-like workload: parts of a few hundred MB.
	s.turns = newTable[TurnRow]("turns", name, stage, 1<<12, 1<<16, f)
	s.advs = newTable[AdvantageRow]("advantages", name, stage, 1<<16, 1<<22, f)
	s.rubrics = newTable[RubricRow]("rubrics", name, stage, 1<<16, 0, f)
	s.events = newTable[EventRow]("events", name, stage, 1<<16, 1<<22, f)
	s.scalars = newTable[ScalarRow]("scalars", name, stage, 1<<16, 0, f)
	return s
}

// group writes one group of step with its nodes, their own turns and the
// group's advantages.
func (s *sink) group(step uint64, g model.Group, nodes []model.Node, turns map[uint64][]model.Turn, advs []model.Advantage) error {
	for _, at := range []func(uint64) error{s.groups.at, s.nodes.at, s.turns.at} {
		if err := at(step); err != nil {
			return err
		}
	}
	err := s.groups.write(GroupRow{Group: int64(g.ID), Task: g.Task, Prompt: g.Prompt, Gold: g.Gold, Roots: int64s(g.Roots),
		Status: string(g.Status), Interval: int32(g.Interval), Meta: g.Meta, PromptTokens: int32s(g.PromptTokens)})
	if err != nil {
		return err
	}
	for i := range nodes {
		n := &nodes[i]
		if err := s.nodes.write(nodeRow(n)); err != nil {
			return err
		}
		for k, t := range turns[n.ID] {
			tr := TurnRow{Group: int64(n.Group), Node: int64(n.ID), Index: int32(k), Position: int32(n.Base + k),
				Action: t.Action, ActionTokens: int32s(t.ActionTokens), ActionLogprobs: t.ActionLogprobs,
				Observation: t.Observation, ObservationTokens: int32s(t.ObservationTokens), Reward: t.Reward, Done: t.Done,
				PolicyVersion: int64(t.PolicyVersion)}
			if err := s.turns.write(tr); err != nil {
				return err
			}
		}
	}
	if len(advs) == 0 {
		return nil
	}
	if err := s.advs.at(step); err != nil {
		return err
	}
	for _, a := range advs {
		row := AdvantageRow{Group: int64(a.Group), Leaf: int64(a.Leaf), Outcome: a.Outcome, RubricScore: a.RubricScore,
			Lambda: a.Lambda, Total: a.Total, Mean: a.Mean, Std: a.Std, Advantage: a.Advantage, Rubrics: int64s(a.Rubrics),
			ZeroVariance: a.ZeroVariance, ZeroVarianceAfter: a.ZeroVarianceAfter}
		if err := s.advs.write(row); err != nil {
			return err
		}
	}
	return nil
}

// checkpoint writes the checkpoint that completes its step.
func (s *sink) checkpoint(c model.Checkpoint) error {
	if err := s.ckpts.at(c.Step); err != nil {
		return err
	}
	return s.ckpts.write(CheckpointRow{Inline: c.Inline, URI: c.URI, Hash: c.Hash, Meta: c.Meta, CreatedAt: c.CreatedAt})
}

func nodeRow(n *model.Node) NodeRow {
	row := NodeRow{Node: int64(n.ID), Group: int64(n.Group), Parent: int64(n.Parent), Fork: int32(n.Fork),
		Base: int32(n.Base), Ordinal: int32(n.Ordinal), Depth: int32(n.Depth), Status: string(n.Status),
		Leaf: n.Status.Leaf(), Turns: int32(n.Turns), PathLen: int32(n.PathLen()), Reward: rewardOf(n),
		Worker: n.Worker, Attempt: int32(n.Attempt), Error: n.Error,
		MinPolicyVersion: int64(n.MinVersion), MaxPolicyVersion: int64(n.MaxVersion),
		Scores: make([]ScoreRow, len(n.Scores)), Decisions: make([]DecisionRow, len(n.Decisions))}
	for k, sc := range n.Scores {
		row.Scores[k] = ScoreRow{Interval: int32(sc.Interval), Turn: int32(sc.Turn), Value: sc.Value}
	}
	for k, d := range n.Decisions {
		row.Decisions[k] = DecisionRow{Interval: int32(d.Interval), Action: string(d.Action), Score: d.Score,
			Reference: d.Reference, Delta: d.Delta, Rule: d.Rule, Children: int32(d.Children)}
	}
	return row
}

// rewardOf is a node's outcome reward, nil when it has none.
func rewardOf(n *model.Node) *float64 {
	if !n.HasReward {
		return nil
	}
	r := n.Reward
	return &r
}

// event writes one event of the log into partition step, and the run or
// rubric version it carries. de is e decoded (replay.Decode).
func (s *sink) event(step uint64, e model.Event, de replay.Event) error {
	if err := s.events.at(step); err != nil {
		return err
	}
	row := EventRow{Seq: int64(e.Seq), CreatedAt: e.Time, Kind: string(e.Kind), EventStep: int64(e.Step),
		Group: int64(e.Group), Node: int64(e.Node), Rubric: int64(e.Rubric), Payload: e.Payload,
		PayloadJSON: payloadJSON(de)}
	if err := s.events.write(row); err != nil {
		return err
	}
	switch rec := de.Record.(type) {
	case *model.Run:
		if err := s.runs.at(step); err != nil {
			return err
		}
		return s.runs.write(RunRow{Seq: int64(e.Seq), Status: string(rec.Status), LastStep: int64(rec.LastStep),
			Config: string(rec.Config), CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt, Meta: rec.Meta})
	case *model.Rubric:
		if err := s.rubrics.at(step); err != nil {
			return err
		}
		return s.rubrics.write(rubricRow(e.Seq, rec))
	case *model.Scalars:
		if err := s.scalars.at(step); err != nil {
			return err
		}
		for _, name := range slices.Sorted(maps.Keys(rec.Values)) {
			err := s.scalars.write(ScalarRow{Seq: int64(e.Seq), ScalarStep: int64(rec.Step), Name: name,
				Value: rec.Values[name], UpdatedAt: rec.UpdatedAt})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func rubricRow(seq uint64, rb *model.Rubric) RubricRow {
	u := rb.Usage
	return RubricRow{Seq: int64(seq), Rubric: int64(rb.ID), Pool: string(rb.Pool), Text: rb.Text, Feature: rb.Feature,
		Origin:  RubricOriginRow{Step: int64(rb.Origin.Step), Group: int64(rb.Origin.Group), Anchors: int64s(rb.Origin.Anchors)},
		Parents: int64s(rb.Parents), MergedInto: int64(rb.MergedInto), Support: int32(rb.Support),
		Variance: rb.Variance, Rho: rb.Rho,
		Usage: RubricUsageRow{Activations: int32(u.Activations), LastActivation: u.LastActivation,
			PairsJudged: int32(u.PairsJudged), LastVariance: u.LastVariance, LowVarStreak: int32(u.LowVarStreak),
			GroupsUnlocked: int32(u.GroupsUnlocked), N: u.N, SumX: u.SumX, SumY: u.SumY, SumXY: u.SumXY,
			SumXX: u.SumXX, SumYY: u.SumYY},
		CreatedStep: int64(rb.CreatedStep), RetireStep: int64(rb.RetireStep), RetireReason: rb.RetireReason}
}

// payloadJSON renders an event's payload as JSON: a store kind's record by
// its json names, another kind schema-less; "" when that is impossible (a
// custom payload that is not msgpack, or whose maps have non-string keys).
func payloadJSON(e replay.Event) string {
	var v any = e.Record
	if v == nil {
		g, err := e.Generic()
		if err != nil || g == nil {
			return ""
		}
		v = g
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// empty writes each table's step=0 partition, with no rows.
func (s *sink) empty() error {
	for _, at := range []func(uint64) error{s.runs.at, s.groups.at, s.ckpts.at, s.nodes.at, s.turns.at,
		s.advs.at, s.rubrics.at, s.events.at, s.scalars.at} {
		if err := at(0); err != nil {
			return err
		}
	}
	return nil
}

// close finishes every table's open file.
func (s *sink) close() ([]File, error) {
	var first error
	for _, c := range []func() error{s.runs.close, s.groups.close, s.ckpts.close, s.nodes.close, s.turns.close,
		s.advs.close, s.rubrics.close, s.events.close, s.scalars.close} {
		if err := c(); err != nil && first == nil {
			first = err
		}
	}
	return s.files, first
}

func (s *sink) abort() {
	for _, a := range []func(){s.runs.abort, s.groups.abort, s.ckpts.abort, s.nodes.abort, s.turns.abort,
		s.advs.abort, s.rubrics.abort, s.events.abort, s.scalars.abort} {
		a()
	}
}

// int32s converts token ids (uint32 in the store) to the list<int32> the
// lake promises; vocabularies stay far below 2^31.
func int32s(xs []uint32) []int32 {
	out := make([]int32, len(xs))
	for i, x := range xs {
		out[i] = int32(x)
	}
	return out
}

func int64s(xs []uint64) []int64 {
	out := make([]int64, len(xs))
	for i, x := range xs {
		out[i] = int64(x)
	}
	return out
}
