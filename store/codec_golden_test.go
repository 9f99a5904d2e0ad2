package store

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"
)

// Golden bytes: one fixed record of every kind, framed as the file holds
// it, against testdata/codec/<kind>.hex. The bytes are the format: a
// change here is a format change (records only ever grow at their end,
// with FormatVersion bumped), never a refactoring's side effect.
// Regenerate, after such a change only, with
// PATRDB_WRITE_GOLDEN=1 go test -run TestCodecGolden ./store/

func goldenRecords() map[string]struct {
	val  []byte
	want any
	dec  func([]byte) (any, error)
} {
	turn := model.Turn{Action: "move left", ActionTokens: []uint32{17, 70000}, ActionLogprobs: []float32{-0.5, -1.25},
		Observation: "you are at 3,1", ObservationTokens: []uint32{5, 6, 7}, Reward: 0.5, Done: true, PolicyVersion: 12}
	node := model.Node{ID: 42, Step: 3, Group: 7, Parent: 40, Ordinal: 1, Fork: 2, Base: 7, Depth: 2, Status: model.NodePruned, Turns: 5,
		Scores:    []model.Score{{Interval: 0, Turn: 5, Value: 0.25}, {Interval: 1, Turn: 10, Value: 0.125}},
		Decisions: []model.Decision{{Interval: 1, Action: model.ActionPrune, Score: 0.125, Reference: 0.75, Delta: 0.5, Rule: "max"}},
		HasReward: true, Reward: -1, EnvState: []byte{1, 2, 3}, Worker: "gpu-0", Attempt: 1, Error: "timeout",
		MinVersion: 11, MaxVersion: 12, TurnRanges: model.TurnRanges{{Seq: 100, Count: 3}, {Seq: 300, Count: 2}}}
	group := model.Group{ID: 7, Step: 3, Task: "t-7", Prompt: "find the goal", Gold: "G", Roots: []uint64{40, 41},
		Status: model.GroupClosed, Interval: 4, Meta: map[string]string{"split": "train", "map": "8x8"}, PromptTokens: model.TokenIDs{1, 2, 70000}}
	event := model.Event{Seq: 1000, Time: 1767322800000000000, Kind: model.EvNodeRoute, Step: 3, Group: 7, Node: 42, Payload: []byte{0x91, 0x01}}
	run := model.Run{ID: "demo", Config: []byte(`{"b0":4}`), Status: model.RunRunning, LastStep: 2, CreatedAt: 1767322800000000000,
		UpdatedAt: 1767322900000000000, Meta: map[string]string{"owner": "lab"}}
	adv := model.Advantage{Step: 3, Group: 7, Leaf: 42, Outcome: 1, RubricScore: -0.25, Lambda: 0.1, Total: 0.975, Mean: 0.5,
		Std: 0.5, Advantage: 0.95, Rubrics: []uint64{2, 5}, ZeroVariance: false, ZeroVarianceAfter: true}
	rubric := model.Rubric{ID: 5, Pool: model.PoolPublic, Text: "cites the file it edits", Feature: "cite",
		Origin: model.RubricOrigin{Step: 2, Group: 6, Anchors: []uint64{30, 31, 32}}, Parents: []uint64{3, 4}, Support: 2,
		Variance: 0.2, Rho: 0.5, Usage: model.RubricUsage{Activations: 3, LastActivation: 2, PairsJudged: 9, LastVariance: 0.1,
			LowVarStreak: 1, GroupsUnlocked: 2, N: 9, SumX: 4.5, SumY: 3, SumXY: 2, SumXX: 3, SumYY: 2}, CreatedStep: 2}
	ckpt := model.Checkpoint{Step: 2, Inline: []byte("policy"), URI: "file:///w/2", Hash: "sha256:00ff",
		Meta: map[string]string{"lr": "0.1"}, CreatedAt: 1767322800000000000}
	tp := model.TurnsPayload{From: 3, Count: 2, Turns: 5, MinVersion: 11, MaxVersion: 12, Seq: 300, Oldest: 11}
	scalars := model.Scalars{Step: 4, Values: map[string]float64{"loss": 0.75, "kl": 0.0125, "train/lr": 1e-6}, UpdatedAt: 1767322800000000000}

	type entry = struct {
		val  []byte
		want any
		dec  func([]byte) (any, error)
	}
	generic := func(v any) func([]byte) (any, error) {
		return func(raw []byte) (any, error) {
			p := reflect.New(reflect.TypeOf(v).Elem()).Interface()
			err := decodeValue("golden", nil, raw, p)
			return p, err
		}
	}
	must := func(b []byte, err error) []byte {
		if err != nil {
			panic(err)
		}
		return b
	}
	turnVal, _ := encodeTurn(&turn)
	var meta []byte
	for _, kv := range [][2][]byte{{metaMagic, magicString}, {metaFormat, u64key(FormatVersion)}, {metaWriter, []byte("patrdb " + Version)}} {
		meta = append(append(append(meta, kv[0]...), '='), kv[1]...)
		meta = append(meta, '\n')
	}
	return map[string]entry{
		"turn": {turnVal, &turn, func(raw []byte) (any, error) {
			var t model.Turn
			err := decodeTurn("golden", nil, raw, &t)
			return &t, err
		}},
		"node":          {encodeNode(&node), &node, generic(&node)},
		"group":         {encodeGroup(&group), &group, generic(&group)},
		"event":         {encodeEvent(&event), &event, generic(&event)},
		"turns-payload": {encodeTurnsPayload(&tp), &tp, generic(&tp)},
		"run":           {must(encodeValue(&run)), &run, generic(&run)},
		"advantage":     {must(encodeValue(&adv)), &adv, generic(&adv)},
		"rubric":        {must(encodeValue(&rubric)), &rubric, generic(&rubric)},
		"checkpoint":    {must(encodeValue(&ckpt)), &ckpt, generic(&ckpt)},
		"scalars":       {must(encodeValue(&scalars)), &scalars, generic(&scalars)},
		// The meta bucket's keys and values (not framed), key=value per line.
		"meta": {meta, nil, nil},
	}
}

func TestCodecGolden(t *testing.T) {
	write := os.Getenv("PATRDB_WRITE_GOLDEN") != ""
	for kind, r := range goldenRecords() {
		path := filepath.Join("testdata", "codec", kind+".hex")
		if write {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(hex.EncodeToString(r.val)+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		want, err := hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if string(r.val) != string(want) {
			t.Errorf("%s encodes to\n%x\nthe format says\n%x", kind, r.val, want)
		}
		if r.dec == nil {
			continue
		}
		got, err := r.dec(want)
		if err != nil {
			t.Errorf("%s: the golden bytes do not decode: %v", kind, err)
		} else if !reflect.DeepEqual(got, r.want) {
			t.Errorf("%s: the golden bytes decode to\n%+v\nwant\n%+v", kind, got, r.want)
		}
	}
}
