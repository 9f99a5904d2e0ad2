package replay

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/parquet-go/parquet-go"

	"github.com/patrdb/patrdb/store"
)

// pqTable is one table's current file.
type pqTable[T any] struct {
	name   string
	rgRows int64 // rows per row group: bounds the writer's memory
	// lake, when set, places the table's files as
	// <name>/run=<id>/step=<n>/part-<k>.parquet under the lake root, a new
	// part once partRows rows are in the current one; unset, a step has one
	// file, <name>.parquet in the step's folder of the run.
	lake     *lakePlace
	partRows int64
	part     int
	tf       *tableFile
	w        *parquet.GenericWriter[T]
	pending  []T
}

// lakePlace is where a lake export writes: the root its table folders go
// into, and the run.
type lakePlace struct{ root, run string }

func (t *pqTable[T]) at(dir string, step uint64, files *[]ExportFile) error {
	if t.tf != nil && t.tf.step == step {
		if t.lake == nil || t.partRows == 0 || t.tf.rows+int64(len(t.pending)) < t.partRows {
			return nil
		}
		t.part++ // the step continues in a new part
	} else {
		t.part = 0
	}
	if err := t.close(files); err != nil {
		return err
	}
	var tf *tableFile
	var err error
	if t.lake != nil {
		tf, err = t.lake.create(t.name, step, t.part)
	} else {
		tf, err = createTable(dir, step, t.name+".parquet")
	}
	if err != nil {
		return err
	}
	t.tf = tf
	t.w = parquet.NewGenericWriter[T](tf.f, parquet.Compression(&parquet.Zstd), parquet.MaxRowsPerRowGroup(t.rgRows),
		parquet.CreatedBy("patrdb", "", ""))
	return nil
}

// create opens a part file of one table's partition in the lake layout.
func (p *lakePlace) create(table string, step uint64, part int) (*tableFile, error) {
	rel := table + "/run=" + p.run + "/step=" + strconv.FormatUint(step, 10)
	if err := os.MkdirAll(filepath.Join(p.root, filepath.FromSlash(rel)), 0o755); err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	rel += fmt.Sprintf("/part-%05d.parquet", part)
	f, err := os.OpenFile(filepath.Join(p.root, filepath.FromSlash(rel)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	return &tableFile{f: f, rel: rel, step: step}, nil
}

func (t *pqTable[T]) write(rows ...T) error {
	t.pending = append(t.pending, rows...)
	if len(t.pending) < 256 {
		return nil
	}
	return t.flushPending()
}

func (t *pqTable[T]) flushPending() error {
	if len(t.pending) == 0 {
		return nil
	}
	if _, err := t.w.Write(t.pending); err != nil {
		return fmt.Errorf("export %s: %w", t.name, err)
	}
	t.tf.rows += int64(len(t.pending))
	clear(t.pending)
	t.pending = t.pending[:0]
	return nil
}

func (t *pqTable[T]) close(files *[]ExportFile) error {
	if t.tf == nil {
		return nil
	}
	tf := t.tf
	err := t.flushPending()
	if err == nil {
		err = t.w.Close()
	}
	t.tf, t.w = nil, nil
	if err != nil {
		_ = tf.f.Close()
		return fmt.Errorf("export %s: %w", t.name, err)
	}
	ef, err := tf.finish(t.name)
	if err != nil {
		return err
	}
	*files = append(*files, ef)
	return nil
}

func (t *pqTable[T]) abort() {
	if t.tf != nil {
		_ = t.tf.f.Close()
		t.tf, t.w, t.pending = nil, nil, nil
	}
}

// lakeSink writes the Parquet lake's tables. Groups, nodes, turns and
// advantages come from the walk over the groups; runs, rubrics and
// checkpoints from the event log, whose payloads are those records as each
// event left them.
type lakeSink struct {
	place   *lakePlace
	runs    pqTable[RunRow]
	groups  pqTable[GroupRow]
	ckpts   pqTable[CheckpointRow]
	nodes   pqTable[NodeRow]
	turns   pqTable[TurnRow]
	advs    pqTable[AdvantageRow]
	rubricT pqTable[RubricRow]
	events  pqTable[EventRow]
	files   []ExportFile
	// lastEventStep is the partition of the last event: the step the
	// trainer was in at the end of the log.
	lastEventStep uint64
}

func newLakeSink(root, run string) *lakeSink {
	p := &lakePlace{root: root, run: run}
	return &lakeSink{place: p,
		runs:    pqTable[RunRow]{name: "runs", rgRows: 1 << 16, lake: p},
		groups:  pqTable[GroupRow]{name: "groups", rgRows: 1 << 14, lake: p, partRows: 1 << 20},
		ckpts:   pqTable[CheckpointRow]{name: "checkpoints", rgRows: 1 << 10, lake: p},
		nodes:   pqTable[NodeRow]{name: "nodes", rgRows: 1 << 16, lake: p, partRows: 1 << 22},
		turns:   pqTable[TurnRow]{name: "turns", rgRows: 1 << 12, lake: p, partRows: 1 << 16}, // ~6 KB a turn in the swe-like workload: parts of a few hundred MB
		advs:    pqTable[AdvantageRow]{name: "advantages", rgRows: 1 << 16, lake: p, partRows: 1 << 22},
		rubricT: pqTable[RubricRow]{name: "rubrics", rgRows: 1 << 16, lake: p},
		events:  pqTable[EventRow]{name: "events", rgRows: 1 << 16, lake: p, partRows: 1 << 22},
	}
}

func (s *lakeSink) wantsLog() bool { return true }

func (s *lakeSink) group(step uint64, g store.Group, nodes []store.Node, turns map[uint64][]store.Turn, advs []store.Advantage) error {
	for _, t := range []interface {
		at(string, uint64, *[]ExportFile) error
	}{&s.groups, &s.nodes, &s.turns} {
		if err := t.at("", step, &s.files); err != nil {
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
	if err := s.advs.at("", step, &s.files); err != nil {
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

func nodeRow(n *store.Node) NodeRow {
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
		row.Decisions[k] = DecisionRow{Interval: int32(d.Interval), Action: d.Action, Score: d.Score,
			Reference: d.Reference, Delta: d.Delta, Rule: d.Rule, Children: int32(d.Children)}
	}
	return row
}

// rubrics: the lake keeps every version of a rubric from the event log
// instead of only the last one, so nothing it wrote ever changes.
func (s *lakeSink) rubrics(uint64, []store.Rubric) error { return nil }

func (s *lakeSink) event(step uint64, e store.Event) error {
	s.lastEventStep = step
	if err := s.events.at("", step, &s.files); err != nil {
		return err
	}
	de, err := Decode(e) // a store kind that does not decode is corruption
	if err != nil {
		return err
	}
	row := EventRow{Seq: int64(e.Seq), CreatedAt: e.Time, Kind: string(e.Kind), EventStep: int64(e.Step),
		Group: int64(e.Group), Node: int64(e.Node), Rubric: int64(e.Rubric), Payload: e.Payload,
		PayloadJSON: payloadJSON(de)}
	if err := s.events.write(row); err != nil {
		return err
	}
	switch rec := de.Record.(type) {
	case *store.Run:
		if err := s.runs.at("", step, &s.files); err != nil {
			return err
		}
		return s.runs.write(RunRow{Seq: int64(e.Seq), Status: string(rec.Status), LastStep: int64(rec.LastStep),
			Config: string(rec.Config), CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt, Meta: rec.Meta})
	case *store.Rubric:
		if err := s.rubricT.at("", step, &s.files); err != nil {
			return err
		}
		return s.rubricT.write(rubricRow(e.Seq, rec))
	case *store.Checkpoint:
		// A checkpoint is written once, for the step it completes.
		if err := s.ckpts.at("", rec.Step, &s.files); err != nil {
			return err
		}
		return s.ckpts.write(CheckpointRow{Inline: rec.Inline, URI: rec.URI, Hash: rec.Hash, Meta: rec.Meta, CreatedAt: rec.CreatedAt})
	}
	return nil
}

func rubricRow(seq uint64, rb *store.Rubric) RubricRow {
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
func payloadJSON(e Event) string {
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

func (s *lakeSink) tables() []interface {
	close(*[]ExportFile) error
	abort()
} {
	return []interface {
		close(*[]ExportFile) error
		abort()
	}{&s.runs, &s.groups, &s.ckpts, &s.nodes, &s.turns, &s.advs, &s.rubricT, &s.events}
}

func (s *lakeSink) close() ([]ExportFile, error) {
	var first error
	for _, t := range s.tables() {
		if err := t.close(&s.files); err != nil && first == nil {
			first = err
		}
	}
	return s.files, first
}

func (s *lakeSink) abort() {
	for _, t := range s.tables() {
		t.abort()
	}
}

// int32s converts token ids (uint32 in the store) to the list<int32> the
// export promises; vocabularies stay far below 2^31.
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
