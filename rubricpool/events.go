package rubricpool

import "github.com/patrdb/patrdb/model"

// Event kinds the pool writes beside the store's own rubric.put,
// rubric.update and rubric.move (whose payloads are the rubric after the
// change, retirements with their step and reason included). Payloads are
// the msgpack of the types below; decode them with store.DecodePayload.
const (
	// EvActivate: a step's activation (ActivatePayload), written once per
	// step by BeginStep when at least one rubric is activated.
	EvActivate model.EventKind = "rubric.activate"
	// EvJudge: one active rubric scored over one group (JudgePayload).
	EvJudge model.EventKind = "rubric.judge"
	// EvScore: a group's shaping (ScorePayload).
	EvScore model.EventKind = "rubric.score"
	// EvInduce: the anchors of a group and the drafts the inducer wrote
	// (InducePayload).
	EvInduce model.EventKind = "rubric.induce"
	// EvAdmit and EvReject: a draft's admission figures (AdmissionPayload).
	// EvAdmit's rubric is the new candidate's id.
	EvAdmit  model.EventKind = "rubric.admit"
	EvReject model.EventKind = "rubric.reject"
	// EvSupport: a draft that near-duplicated a candidate or public rubric
	// and added to its support (SupportPayload).
	EvSupport model.EventKind = "rubric.support"
	// EvConsolidate: a consolidation's inputs, outputs and lineage
	// (ConsolidatePayload).
	EvConsolidate model.EventKind = "rubric.consolidate"
)

// ActivatePayload records a step's selection.
type ActivatePayload struct {
	// Rubrics in selection order: the exploit pick (highest running
	// correlation) first, then least-recently-activated rotation.
	Rubrics []uint64 `msgpack:"rubrics" json:"rubrics"`
	// Rho and RhoDefined: each selected rubric's running correlation at
	// selection time; LastActivation: the step it was last activated before
	// this one (-1 never). The inputs SelectActive decided on.
	Rho            []float64 `msgpack:"rho" json:"rho"`
	RhoDefined     []bool    `msgpack:"rho_defined" json:"rho_defined"`
	LastActivation []int64   `msgpack:"last_activation" json:"last_activation"`
	// Eligible is every public rubric that could have been chosen.
	Eligible []uint64 `msgpack:"eligible" json:"eligible"`
}

// Verdict is one pairwise judgement as recorded: A and B are node ids in
// pair-set order (A has the lower base reward), Result is in terms of A and
// B, Swapped says the judge was shown B first.
type Verdict struct {
	A       uint64  `msgpack:"a" json:"a"`
	B       uint64  `msgpack:"b" json:"b"`
	Result  Outcome `msgpack:"result" json:"result"`
	Swapped bool    `msgpack:"swapped" json:"swapped"`
}

// JudgePayload records one active rubric's pass over a group and the usage
// statistics that came out of it. WinRates and Outcomes are aligned with
// Nodes; each (win rate, outcome) pair was added to the running sums.
type JudgePayload struct {
	Nodes      []uint64  `msgpack:"nodes" json:"nodes"`
	Outcomes   []float64 `msgpack:"outcomes" json:"outcomes"`
	Verdicts   []Verdict `msgpack:"verdicts" json:"verdicts"`
	WinRates   []float64 `msgpack:"win_rates" json:"win_rates"`
	Variance   float64   `msgpack:"variance" json:"variance"`
	Streak     int       `msgpack:"streak" json:"streak"`
	Rho        float64   `msgpack:"rho" json:"rho"` // running, after this group
	RhoDefined bool      `msgpack:"rho_defined" json:"rho_defined"`
	Unlocked   bool      `msgpack:"unlocked" json:"unlocked"` // credited with unlocking the group
}

// ScorePayload records a group's shaping: Scores (centred, aligned with
// Nodes) enter R = Reward + Lambda·Score.
type ScorePayload struct {
	Nodes             []uint64  `msgpack:"nodes" json:"nodes"`
	Rewards           []float64 `msgpack:"rewards" json:"rewards"`
	Rubrics           []uint64  `msgpack:"rubrics" json:"rubrics"`
	Scores            []float64 `msgpack:"scores" json:"scores"`
	Lambda            float64   `msgpack:"lambda" json:"lambda"`
	ZeroVariance      bool      `msgpack:"zero_variance" json:"zero_variance"`
	ZeroVarianceAfter bool      `msgpack:"zero_variance_after" json:"zero_variance_after"`
}

// InducePayload records contrastive induction over a group.
type InducePayload struct {
	Best   uint64        `msgpack:"best" json:"best"`
	Worst  uint64        `msgpack:"worst" json:"worst"`
	Hard   uint64        `msgpack:"hard" json:"hard"`
	Drafts []model.Draft `msgpack:"drafts" json:"drafts"`
}

// AdmissionPayload records a draft's admission test. Reason is empty for an
// admitted draft and says which threshold failed otherwise.
type AdmissionPayload struct {
	Draft      int       `msgpack:"draft" json:"draft"` // index in the inducer's output
	Text       string    `msgpack:"text" json:"text"`
	Feature    string    `msgpack:"feature,omitempty" json:"feature,omitempty"`
	Nodes      []uint64  `msgpack:"nodes" json:"nodes"`
	Outcomes   []float64 `msgpack:"outcomes" json:"outcomes"`
	Verdicts   []Verdict `msgpack:"verdicts" json:"verdicts"`
	WinRates   []float64 `msgpack:"win_rates" json:"win_rates"`
	Variance   float64   `msgpack:"variance" json:"variance"`
	Rho        float64   `msgpack:"rho" json:"rho"`
	RhoDefined bool      `msgpack:"rho_defined" json:"rho_defined"`
	Reason     string    `msgpack:"reason,omitempty" json:"reason,omitempty"`
}

// SupportPayload records a near-duplicate draft that added support to an
// existing rubric instead of becoming one.
type SupportPayload struct {
	Draft   int     `msgpack:"draft" json:"draft"`
	Text    string  `msgpack:"text" json:"text"`
	Jaccard float64 `msgpack:"jaccard" json:"jaccard"`
	Support int     `msgpack:"support" json:"support"` // the rubric's support after
}

// ConsolidatePayload records a consolidation: the candidate and public
// pools it was given, what the consolidator wrote, where each output went,
// and the drafts no output absorbed (retired).
type ConsolidatePayload struct {
	Drafts  []uint64              `msgpack:"drafts" json:"drafts"`
	Public  []uint64              `msgpack:"public" json:"public"`
	Outputs []ConsolidationResult `msgpack:"outputs" json:"outputs"`
	Dropped []uint64              `msgpack:"dropped" json:"dropped"`
}

// ConsolidationResult is one consolidator output and its fate: a new public
// rubric Into, or, when it near-duplicated public rubric Into (Duplicate),
// its drafts merged into that one.
type ConsolidationResult struct {
	Text      string   `msgpack:"text" json:"text"`
	Feature   string   `msgpack:"feature,omitempty" json:"feature,omitempty"`
	Absorbs   []uint64 `msgpack:"absorbs" json:"absorbs"`
	Into      uint64   `msgpack:"into" json:"into"`
	Duplicate bool     `msgpack:"duplicate" json:"duplicate"`
	Jaccard   float64  `msgpack:"jaccard,omitempty" json:"jaccard,omitempty"`
}
