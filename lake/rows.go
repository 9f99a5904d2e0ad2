package lake

// The lake's rows, one type per table. Column names are the json names of
// the store's records, except that a table's own key column is named for
// the record (node in nodes, group in groups, rubric in rubrics) so joins
// read turns.node = nodes.node; ids are int64 (Spark has no unsigned
// 64-bit type).
// run and step are Hive partition columns, carried by the folder names and
// not repeated inside the files (the convention of Spark and DuckDB's
// PARTITION_BY, whose readers add them back). docs/lake.md describes every
// column.

// RunRow is a row of the runs table: the run record as one event left it
// (its creation, every completed step, every status or config change), in
// the partition of the step the trainer was in. The run's current state is
// its row with the highest seq.
type RunRow struct {
	Seq       int64             `parquet:"seq"`
	Status    string            `parquet:"status,dict"`
	LastStep  int64             `parquet:"last_step"`
	Config    string            `parquet:"config"` // the trainer's configuration, JSON
	CreatedAt int64             `parquet:"created_at"`
	UpdatedAt int64             `parquet:"updated_at"`
	Meta      map[string]string `parquet:"meta"`
}

// GroupRow is a row of the groups table: one task's rollout tree as it
// stands at the end of its step.
type GroupRow struct {
	Group        int64             `parquet:"group"`
	Task         string            `parquet:"task,dict"`
	Prompt       string            `parquet:"prompt,zstd"`
	Gold         string            `parquet:"gold"`
	Roots        []int64           `parquet:"roots,list"`
	Status       string            `parquet:"status,dict"`
	Interval     int32             `parquet:"interval"`
	Meta         map[string]string `parquet:"meta"`
	PromptTokens []int32           `parquet:"prompt_tokens,list"`
}

// CheckpointRow is a row of the checkpoints table, in the partition of the
// step it completes.
type CheckpointRow struct {
	Inline    []byte            `parquet:"inline"`
	URI       string            `parquet:"uri"`
	Hash      string            `parquet:"hash"`
	Meta      map[string]string `parquet:"meta"`
	CreatedAt int64             `parquet:"created_at"`
}

// NodeRow is a row of the nodes table.
type NodeRow struct {
	Node             int64         `parquet:"node"`
	Group            int64         `parquet:"group"`
	Parent           int64         `parquet:"parent"` // 0: a root branch
	Ordinal          int32         `parquet:"ordinal"`
	Fork             int32         `parquet:"fork"` // parent's own turns it inherits
	Base             int32         `parquet:"base"` // turns inherited from all ancestors
	Depth            int32         `parquet:"depth"`
	Status           string        `parquet:"status,dict"`
	Leaf             bool          `parquet:"leaf"`
	Turns            int32         `parquet:"turns"` // own turns
	PathLen          int32         `parquet:"path_len"`
	Reward           *float64      `parquet:"reward,optional"` // null when the node has none
	Scores           []ScoreRow    `parquet:"scores,list"`
	Decisions        []DecisionRow `parquet:"decisions,list"`
	Worker           string        `parquet:"worker,dict"`
	Attempt          int32         `parquet:"attempt"`
	Error            string        `parquet:"error"`
	MinPolicyVersion int64         `parquet:"min_policy_version"`
	MaxPolicyVersion int64         `parquet:"max_policy_version"`
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
	PolicyVersion     int64     `parquet:"policy_version"`
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

// RubricRow is a row of the rubrics table: the rubric as one event left it
// (its creation, each usage update, each move between pools), in the
// partition of the step the trainer was in. A rubric's current state is its
// row with the highest seq.
type RubricRow struct {
	Seq          int64           `parquet:"seq"`
	Rubric       int64           `parquet:"rubric"`
	Pool         string          `parquet:"pool,dict"`
	Text         string          `parquet:"text"`
	Feature      string          `parquet:"feature"`
	Origin       RubricOriginRow `parquet:"origin"`
	Parents      []int64         `parquet:"parents,list"`
	MergedInto   int64           `parquet:"merged_into"`
	Support      int32           `parquet:"support"`
	Variance     float64         `parquet:"variance"`
	Rho          float64         `parquet:"rho"`
	Usage        RubricUsageRow  `parquet:"usage"`
	CreatedStep  int64           `parquet:"created_step"`
	RetireStep   int64           `parquet:"retire_step"`
	RetireReason string          `parquet:"retire_reason"`
}

// RubricOriginRow says where a draft rubric was induced.
type RubricOriginRow struct {
	Step    int64   `parquet:"step"`
	Group   int64   `parquet:"group"`
	Anchors []int64 `parquet:"anchors,list"`
}

// RubricUsageRow holds a public rubric's usage statistics.
type RubricUsageRow struct {
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
}

// ScalarRow is a row of the scalars table: one of a trainer's figures of a
// step (model.Scalars) as one write left it, in the log's partition (the
// trainer's step when it logged before the step's checkpoint, the next one
// when after). A figure's value as it stands is its row with the highest
// seq for its scalar_step and name.
type ScalarRow struct {
	Seq        int64   `parquet:"seq"`
	ScalarStep int64   `parquet:"scalar_step"` // the step the figure describes
	Name       string  `parquet:"name,dict"`
	Value      float64 `parquet:"value"`
	UpdatedAt  int64   `parquet:"updated_at"`
}

// EventRow is a row of the events table, in the partition of the step the
// trainer was in when it was written; EventStep is the step the event
// itself names (a rubric's creation step, a run's last completed step).
type EventRow struct {
	Seq       int64  `parquet:"seq"`
	CreatedAt int64  `parquet:"created_at,timestamp(nanosecond)"`
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
