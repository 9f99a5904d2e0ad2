package export

import (
	"path"
	"strconv"
	"strings"

	"github.com/patrdb/patrdb/batch"
	"github.com/patrdb/patrdb/batch/batchdb"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// RLRow is one row of the rl export: a leaf's training row as package
// batch builds it (rows layout, default options: credit repeat, every leaf
// trains its whole path). Parquet takes run and step from the folder names.
type RLRow struct {
	Run              string    `json:"run" parquet:"-"`
	Step             uint64    `json:"step" parquet:"-"`
	Group            uint64    `json:"group" parquet:"group"`
	Leaf             uint64    `json:"leaf" parquet:"leaf"`
	Status           string    `json:"status" parquet:"status,dict"`
	Reward           RLFloat   `json:"reward" parquet:"reward"`
	Advantage        RLFloat   `json:"advantage" parquet:"advantage"`
	PolicyVersionMin int64     `json:"policy_version_min" parquet:"policy_version_min"`
	PolicyVersionMax int64     `json:"policy_version_max" parquet:"policy_version_max"`
	InputIDs         []int32   `json:"input_ids" parquet:"input_ids,list"`
	LossMask         []int32   `json:"loss_mask" parquet:"loss_mask,list"`
	OldLogprobs      []float32 `json:"old_logprobs" parquet:"old_logprobs,list"`
	Advantages       []float32 `json:"advantages" parquet:"advantages,list"`
	Positions        []int32   `json:"positions" parquet:"positions,list"`
}

// RLFloat is a float64 that JSON always writes as a float (1.0, not 1), so
// a reader that infers column types from the first rows never makes the
// reward an integer column.
type RLFloat float64

func (f RLFloat) MarshalJSON() ([]byte, error) {
	b := strconv.AppendFloat(nil, float64(f), 'g', -1, 64)
	if !strings.ContainsAny(string(b), ".eEn") { // n: NaN and Inf cannot occur in the store
		b = append(b, '.', '0')
	}
	return b, nil
}

var rlStatus = map[uint8]string{batch.StatusCompleted: "completed", batch.StatusPruned: "pruned",
	batch.StatusTruncated: "truncated", batch.StatusFailed: "failed"}

// rlSink writes rl.jsonl and rl.parquet per step, the same rows in both.
type rlSink struct {
	dir   string
	r     *store.RunTx
	js    jsonlTable
	pq    pqTable[RLRow]
	files []ExportFile
}

func newRLSink(dir string, r *store.RunTx) *rlSink {
	return &rlSink{dir: dir, r: r, js: jsonlTable{name: "rl"}, pq: pqTable[RLRow]{name: "rl", rgRows: 1 << 10}}
}

func (s *rlSink) group(step uint64, g model.Group, _ []model.Node, _ map[uint64][]model.Turn, _ []model.Advantage) error {
	b, err := batchdb.Read(s.r, step, batch.Options{Groups: []uint64{g.ID}})
	if err != nil || b.Len() == 0 {
		return err
	}
	if err := s.js.at(s.dir, step, &s.files); err != nil {
		return err
	}
	if err := s.pq.at(s.dir, step, &s.files); err != nil {
		return err
	}
	for i := range b.Len() {
		lo, hi := b.RowOffsets[i], b.RowOffsets[i+1]
		mask := make([]int32, hi-lo)
		for j, m := range b.LossMask[lo:hi] {
			mask[j] = int32(m)
		}
		row := RLRow{Run: s.r.ID(), Step: step, Group: g.ID, Leaf: uint64(b.RowLeaf[i]), Status: rlStatus[b.RowStatus[i]],
			Reward: RLFloat(b.RowReward[i]), Advantage: RLFloat(b.RowAdvantage[i]),
			PolicyVersionMin: b.RowPolicyMin[i], PolicyVersionMax: b.RowPolicyMax[i],
			InputIDs: b.InputIDs[lo:hi], LossMask: mask, OldLogprobs: b.OldLogprobs[lo:hi],
			Advantages: b.Advantages[lo:hi], Positions: b.Positions[lo:hi]}
		if err := s.js.write(row); err != nil {
			return err
		}
		if err := s.pq.write(row); err != nil {
			return err
		}
	}
	return nil
}

// close names each file's table by its format ("rl.jsonl", "rl.parquet"),
// so the export's row counts per table are each the number of rows.
func (s *rlSink) close() ([]ExportFile, error) {
	err := s.js.close(&s.files)
	if err2 := s.pq.close(&s.files); err == nil {
		err = err2
	}
	for i := range s.files {
		s.files[i].Table = path.Base(s.files[i].Path)
	}
	return s.files, err
}

func (s *rlSink) abort() {
	if s.js.tf != nil {
		_ = s.js.tf.f.Close()
		s.js.tf = nil
	}
	s.pq.abort()
}
