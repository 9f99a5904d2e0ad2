package replay

import (
	"encoding/json"
	"fmt"

	"github.com/parquet-go/parquet-go"

	"github.com/patrdb/patrdb/store"
)

// Parquet rows. Ids are int64 (Spark has no unsigned 64-bit type); run and
// step are Hive partition columns, carried by the folder names and not
// repeated inside the files (the convention of Spark and DuckDB's
// PARTITION_BY, whose readers add them back).

// NodeRow is a row of the nodes table.
type NodeRow struct {
	Group     int64         `parquet:"group"`
	Node      int64         `parquet:"node"`
	Parent    int64         `parquet:"parent"` // 0: a root branch
	Fork      int32         `parquet:"fork"`   // parent's own turns it inherits
	Base      int32         `parquet:"base"`   // turns inherited from all ancestors
	Ordinal   int32         `parquet:"ordinal"`
	Depth     int32         `parquet:"depth"`
	Status    string        `parquet:"status,dict"`
	Leaf      bool          `parquet:"leaf"`
	Turns     int32         `parquet:"turns"` // own turns
	PathLen   int32         `parquet:"path_len"`
	Reward    *float64      `parquet:"reward,optional"` // null when the node has none
	Scores    []ScoreRow    `parquet:"scores,list"`
	Decisions []DecisionRow `parquet:"decisions,list"`
	Worker    string        `parquet:"worker,dict"`
	Attempt   int32         `parquet:"attempt"`
}

// ScoreRow is one process score of a node.
type ScoreRow struct {
	Interval int32   `parquet:"interval"`
	Turn     int32   `parquet:"turn"`
	Value    float64 `parquet:"value"`
}

// DecisionRow is one routing decision of a node.
type DecisionRow struct {
	Interval  int32   `parquet:"interval"`
	Action    string  `parquet:"action"`
	Score     float64 `parquet:"score"`
	Reference float64 `parquet:"reference"`
	Delta     float64 `parquet:"delta"`
	Rule      string  `parquet:"rule"`
	Children  int32   `parquet:"children"`
}

// TurnRow is a row of the turns table: one stored turn (a shared prefix
// appears once, under the node that stores it).
type TurnRow struct {
	Group             int64     `parquet:"group"`
	Node              int64     `parquet:"node"`
	Index             int32     `parquet:"index"`    // among the node's own turns
	Position          int32     `parquet:"position"` // in the path from the root: node base + index
	Action            string    `parquet:"action,zstd"`
	ActionTokens      []int32   `parquet:"action_tokens,list"`
	ActionLogprobs    []float32 `parquet:"action_logprobs,list"`
	Observation       string    `parquet:"observation,zstd"`
	ObservationTokens []int32   `parquet:"observation_tokens,list"`
	Reward            float64   `parquet:"reward"`
	Done              bool      `parquet:"done"`
}

// AdvantageRow is a row of the advantages table.
type AdvantageRow struct {
	Group             int64   `parquet:"group"`
	Leaf              int64   `parquet:"leaf"`
	Outcome           float64 `parquet:"outcome"`
	RubricScore       float64 `parquet:"rubric_score"`
	Lambda            float64 `parquet:"lambda"`
	Total             float64 `parquet:"total"`
	Mean              float64 `parquet:"mean"`
	Std               float64 `parquet:"std"`
	Advantage         float64 `parquet:"advantage"`
	Rubrics           []int64 `parquet:"rubrics,list"`
	ZeroVariance      bool    `parquet:"zero_variance"`
	ZeroVarianceAfter bool    `parquet:"zero_variance_after"`
}

// RubricRow is a row of the rubrics table: the rubric as it stands at the
// end of the log, in the partition of the step that created it.
type RubricRow struct {
	Rubric         int64   `parquet:"rubric"`
	Pool           string  `parquet:"pool,dict"`
	Text           string  `parquet:"text"`
	Feature        string  `parquet:"feature"`
	OriginStep     int64   `parquet:"origin_step"`
	OriginGroup    int64   `parquet:"origin_group"`
	Anchors        []int64 `parquet:"anchors,list"`
	Parents        []int64 `parquet:"parents,list"`
	MergedInto     int64   `parquet:"merged_into"`
	Support        int32   `parquet:"support"`
	Variance       float64 `parquet:"variance"`
	Rho            float64 `parquet:"rho"`
	Activations    int32   `parquet:"activations"`
	LastActivation int64   `parquet:"last_activation"` // step; -1 never
	PairsJudged    int32   `parquet:"pairs_judged"`
	LastVariance   float64 `parquet:"last_variance"`
	LowVarStreak   int32   `parquet:"low_var_streak"`
	GroupsUnlocked int32   `parquet:"groups_unlocked"`
	N              float64 `parquet:"n"`
	SumX           float64 `parquet:"sum_x"`
	SumY           float64 `parquet:"sum_y"`
	SumXY          float64 `parquet:"sum_xy"`
	SumXX          float64 `parquet:"sum_xx"`
	SumYY          float64 `parquet:"sum_yy"`
	RetireStep     int64   `parquet:"retire_step"`
	RetireReason   string  `parquet:"retire_reason"`
}

// EventRow is a row of the events table, in the partition of the step the
// trainer was in when it was written; EventStep is the step the event
// itself names (a rubric's creation step, a run's last completed step).
type EventRow struct {
	Seq       int64  `parquet:"seq"`
	Time      int64  `parquet:"time,timestamp(nanosecond)"`
	Kind      string `parquet:"kind,dict"`
	EventStep int64  `parquet:"event_step"`
	Group     int64  `parquet:"group"`
	Node      int64  `parquet:"node"`
	Rubric    int64  `parquet:"rubric"`
	// Payload is the event's msgpack payload as stored; PayloadJSON the same
	// decoded to JSON (store kinds by their record's json names, other kinds
	// schema-less), empty when it cannot be rendered.
	Payload     []byte `parquet:"payload"`
	PayloadJSON string `parquet:"payload_json"`
}

// pqTable is one table's current file.
type pqTable[T any] struct {
	name    string
	rgRows  int64 // rows per row group: bounds the writer's memory
	tf      *tableFile
	w       *parquet.GenericWriter[T]
	pending []T
}

func (t *pqTable[T]) at(dir string, step uint64, files *[]ExportFile) error {
	if t.tf != nil && t.tf.step == step {
		return nil
	}
	if err := t.close(files); err != nil {
		return err
	}
	tf, err := createTable(dir, step, t.name+".parquet")
	if err != nil {
		return err
	}
	t.tf = tf
	t.w = parquet.NewGenericWriter[T](tf.f, parquet.Compression(&parquet.Zstd), parquet.MaxRowsPerRowGroup(t.rgRows),
		parquet.CreatedBy("patrdb", "", ""))
	return nil
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

type parquetSink struct {
	dir     string
	nodes   pqTable[NodeRow]
	turns   pqTable[TurnRow]
	advs    pqTable[AdvantageRow]
	rubricT pqTable[RubricRow]
	events  pqTable[EventRow]
	files   []ExportFile
}

func newParquetSink(dir string) *parquetSink {
	return &parquetSink{dir: dir,
		nodes:   pqTable[NodeRow]{name: "nodes", rgRows: 1 << 16},
		turns:   pqTable[TurnRow]{name: "turns", rgRows: 1 << 12}, // ~6 KB a turn in the swe-like workload
		advs:    pqTable[AdvantageRow]{name: "advantages", rgRows: 1 << 16},
		rubricT: pqTable[RubricRow]{name: "rubrics", rgRows: 1 << 16},
		events:  pqTable[EventRow]{name: "events", rgRows: 1 << 16},
	}
}

func (s *parquetSink) wantsLog() bool { return true }

func (s *parquetSink) group(step uint64, g store.Group, nodes []store.Node, turns map[uint64][]store.Turn, advs []store.Advantage) error {
	if err := s.nodes.at(s.dir, step, &s.files); err != nil {
		return err
	}
	if err := s.turns.at(s.dir, step, &s.files); err != nil {
		return err
	}
	for i := range nodes {
		n := &nodes[i]
		row := NodeRow{Group: int64(n.Group), Node: int64(n.ID), Parent: int64(n.Parent), Fork: int32(n.Fork),
			Base: int32(n.Base), Ordinal: int32(n.Ordinal), Depth: int32(n.Depth), Status: string(n.Status),
			Leaf: n.Status.Leaf(), Turns: int32(n.Turns), PathLen: int32(n.PathLen()), Reward: rewardOf(n),
			Worker: n.Worker, Attempt: int32(n.Attempt),
			Scores: make([]ScoreRow, len(n.Scores)), Decisions: make([]DecisionRow, len(n.Decisions))}
		for k, sc := range n.Scores {
			row.Scores[k] = ScoreRow{Interval: int32(sc.Interval), Turn: int32(sc.Turn), Value: sc.Value}
		}
		for k, d := range n.Decisions {
			row.Decisions[k] = DecisionRow{Interval: int32(d.Interval), Action: d.Action, Score: d.Score,
				Reference: d.Reference, Delta: d.Delta, Rule: d.Rule, Children: int32(d.Children)}
		}
		if err := s.nodes.write(row); err != nil {
			return err
		}
		for k, t := range turns[n.ID] {
			tr := TurnRow{Group: int64(n.Group), Node: int64(n.ID), Index: int32(k), Position: int32(n.Base + k),
				Action: t.Action, ActionTokens: int32s(t.ActionTokens), ActionLogprobs: t.ActionLogprobs,
				Observation: t.Observation, ObservationTokens: int32s(t.ObservationTokens), Reward: t.Reward, Done: t.Done}
			if err := s.turns.write(tr); err != nil {
				return err
			}
		}
	}
	if len(advs) == 0 {
		return nil
	}
	if err := s.advs.at(s.dir, step, &s.files); err != nil {
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

func (s *parquetSink) rubrics(step uint64, rbs []store.Rubric) error {
	if err := s.rubricT.at(s.dir, step, &s.files); err != nil {
		return err
	}
	for _, rb := range rbs {
		u := rb.Usage
		row := RubricRow{Rubric: int64(rb.ID), Pool: string(rb.Pool), Text: rb.Text, Feature: rb.Feature,
			OriginStep: int64(rb.Origin.Step), OriginGroup: int64(rb.Origin.Group), Anchors: int64s(rb.Origin.Anchors),
			Parents: int64s(rb.Parents), MergedInto: int64(rb.MergedInto), Support: int32(rb.Support),
			Variance: rb.Variance, Rho: rb.Rho, Activations: int32(u.Activations), LastActivation: u.LastActivation,
			PairsJudged: int32(u.PairsJudged), LastVariance: u.LastVariance, LowVarStreak: int32(u.LowVarStreak),
			GroupsUnlocked: int32(u.GroupsUnlocked), N: u.N, SumX: u.SumX, SumY: u.SumY, SumXY: u.SumXY,
			SumXX: u.SumXX, SumYY: u.SumYY, RetireStep: int64(rb.RetireStep), RetireReason: rb.RetireReason}
		if err := s.rubricT.write(row); err != nil {
			return err
		}
	}
	return nil
}

func (s *parquetSink) event(step uint64, e store.Event) error {
	if err := s.events.at(s.dir, step, &s.files); err != nil {
		return err
	}
	de, err := Decode(e) // a store kind that does not decode is corruption
	if err != nil {
		return err
	}
	row := EventRow{Seq: int64(e.Seq), Time: e.Time, Kind: string(e.Kind), EventStep: int64(e.Step),
		Group: int64(e.Group), Node: int64(e.Node), Rubric: int64(e.Rubric), Payload: e.Payload,
		PayloadJSON: payloadJSON(de)}
	return s.events.write(row)
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

func (s *parquetSink) close() ([]ExportFile, error) {
	var first error
	for _, c := range []func(*[]ExportFile) error{s.nodes.close, s.turns.close, s.advs.close, s.rubricT.close, s.events.close} {
		if err := c(&s.files); err != nil && first == nil {
			first = err
		}
	}
	return s.files, first
}

func (s *parquetSink) abort() {
	s.nodes.abort()
	s.turns.abort()
	s.advs.abort()
	s.rubricT.abort()
	s.events.abort()
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
