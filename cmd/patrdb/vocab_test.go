package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay/export"
	"github.com/patrdb/patrdb/replay/view"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/internal/vocab"
	"github.com/patrdb/patrdb/lake"
	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/rubricpool"
	"github.com/patrdb/patrdb/server"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/tree"
)

// schemaPath is the vocabulary's machine-readable form; docs/json.md
// describes it for people.
const schemaPath = "../../docs/json-schema.json"

// vocabDefs are the objects of the vocabulary: the library's records and
// results, the HTTP API's replies (named as the Python client names them)
// and each command's --json document (cli.<command>).
var vocabDefs = []vocab.Def{
	// Records, as the store holds them and every interface shows them.
	vocab.DefOf("Run", api.RunJSON{}),
	vocab.DefOf("Group", model.Group{}),
	vocab.DefOf("Node", model.Node{}),
	vocab.DefOf("Score", model.Score{}),
	vocab.DefOf("Decision", model.Decision{}),
	vocab.DefOf("Turn", model.Turn{}),
	vocab.DefOf("PathTurn", model.PathTurn{}),
	vocab.DefOf("Segment", model.Segment{}),
	vocab.DefOf("Advantage", model.Advantage{}),
	vocab.DefOf("Rubric", model.Rubric{}),
	vocab.DefOf("RubricOrigin", model.RubricOrigin{}),
	vocab.DefOf("RubricUsage", model.RubricUsage{}),
	vocab.DefOf("Checkpoint", model.Checkpoint{}),
	vocab.DefOf("Scalars", model.Scalars{}),
	vocab.DefOf("Event", api.EventJSON{}),
	vocab.DefOf("BucketSize", model.BucketSize{}),
	vocab.DefOf("TurnsPayload", model.TurnsPayload{}),
	// HTTP API replies.
	vocab.DefOf("Health", api.Health{}),
	vocab.DefOf("RunSummary", api.RunSummary{}),
	vocab.DefOf("StepMetrics", model.StepMetrics{}),
	vocab.DefOf("GroupTree", api.GroupTree{}),
	vocab.DefOf("NodeInfo", api.NodeInfo{}),
	vocab.DefOf("Trajectory", api.Trajectory{}),
	vocab.DefOf("EventPage", api.EventPage{}),
	vocab.DefOf("RunStats", api.RunStats{}),
	vocab.DefOf("Stats", api.Stats{}),
	vocab.DefOf("Task", rollout.Task{}),
	vocab.DefOf("TurnKey", rollout.TurnKey{}),
	vocab.DefOf("Lease", api.LeaseGrant{}),
	vocab.DefOf("LeaseResponse", api.LeaseResponse{}),
	vocab.DefOf("Submission", rollout.Submission{}),
	vocab.DefOf("SubmitResult", rollout.SubmitResult{}),
	vocab.DefOf("RoutedDecision", rollout.RoutedDecision{}),
	vocab.DefOf("Routing", rollout.Routing{}),
	vocab.DefOf("Submitted", rollout.Submitted{}),
	vocab.DefOf("LeaseState", rollout.LeaseState{}),
	vocab.DefOf("LeasesResult", api.LeasesResponse{}),
	vocab.DefOf("PendingWork", api.PendingItem{}),
	vocab.DefOf("PendingResult", api.PendingResponse{}),
	vocab.DefOf("OpenStepResult", api.OpenStepResponse{}),
	vocab.DefOf("StepStatus", rollout.StepStatus{}),
	vocab.DefOf("CloseGroupResult", api.CloseGroupResponse{}),
	vocab.DefOf("CreateRunResult", api.CreateRunResponse{}),
	vocab.DefOf("CheckpointResult", api.CheckpointResponse{}),
	vocab.DefOf("ScalarsResult", api.ScalarsResponse{}),
	vocab.DefOf("ScalarsPage", api.ScalarsPage{}),
	vocab.DefOf("ActiveRubrics", api.ActiveRubrics{}),
	vocab.DefOf("JudgeNeed", api.JudgeNeed{}),
	vocab.DefOf("InduceNeed", api.InduceNeed{}),
	vocab.DefOf("ConsolidateNeed", api.ConsolidateNeed{}),
	vocab.DefOf("ShapeNeeds", api.ShapeNeeds{}),
	vocab.DefOf("LeafScore", api.LeafScore{}),
	vocab.DefOf("ShapeResult", api.ShapeResponse{}),
	vocab.DefOf("Index", api.Index{}),
	// The API's request bodies.
	vocab.DefOf("CreateRunRequest", api.CreateRunRequest{}),
	vocab.DefOf("RunStatusRequest", api.RunStatusRequest{}),
	vocab.DefOf("CheckpointRequest", api.CheckpointRequest{}),
	vocab.DefOf("ScalarsRequest", api.ScalarsRequest{}),
	vocab.DefOf("OpenStepRequest", api.OpenStepRequest{}),
	vocab.DefOf("LeaseRequest", api.LeaseRequest{}),
	vocab.DefOf("SubmitRequest", api.SubmitRequest{}),
	vocab.DefOf("LeasesRequest", api.LeasesRequest{}),
	vocab.DefOf("PublishRequest", api.PublishRequest{}),
	vocab.DefOf("RewardSubmission", rollout.RewardSubmission{}),
	vocab.DefOf("RewardsRequest", api.RewardsRequest{}),
	vocab.DefOf("ScoreSubmission", rollout.ScoreSubmission{}),
	vocab.DefOf("ScoresRequest", api.ScoresRequest{}),
	vocab.DefOf("AbandonRequest", api.AbandonRequest{}),
	vocab.DefOf("CloseGroupRequest", api.CloseGroupRequest{}),
	vocab.DefOf("ShapeRequest", api.ShapeRequest{}),
	vocab.DefOf("ActivateRequest", api.ActivateRequest{}),
	// The viewer's replies.
	vocab.DefOf("EnvSteps", server.EnvSteps{}),
	vocab.DefOf("GroupView", view.GroupView{}),
	vocab.DefOf("TrajectoryView", view.TrajectoryView{}),
	vocab.DefOf("SearchResult", view.SearchResult{}),
	vocab.DefOf("BranchesView", view.BranchesView{}),
	vocab.DefOf("RubricPage", server.RubricPage{}),
	vocab.DefOf("RubricView", rubricpool.RubricView{}),
	// Library results the CLI prints as they are.
	vocab.DefOf("StepStats", replay.StepStats{}),
	vocab.DefOf("LeafStats", replay.LeafStats{}),
	vocab.DefOf("PoolSizes", replay.PoolSizes{}),
	vocab.DefOf("ReplayRunStats", replay.RunStats{}),
	vocab.DefOf("WhatIfReport", replay.WhatIfReport{}),
	vocab.DefOf("TreeConfig", tree.Config{}),
	vocab.DefOf("ExportResult", export.ExportResult{}),
	vocab.DefOf("LakeExportResult", lake.ExportResult{}),
	vocab.DefOf("RetainResult", lake.RetainResult{}),
	vocab.DefOf("RestoreResult", lake.RestoreResult{}),
	vocab.DefOf("LakeManifest", lake.Manifest{}),
	vocab.DefOf("Violation", store.Violation{}),
	// The commands' --json documents.
	vocab.DefOf("cli.adv", advOutput{}),
	vocab.DefOf("cli.backup", backupOutput{}),
	vocab.DefOf("cli.mark", markOutput{}),
	vocab.DefOf("cli.batch", batchOutput{}),
	vocab.DefOf("cli.check", checkOutput{}),
	vocab.DefOf("cli.compact", compactOutput{}),
	vocab.DefOf("cli.demo", demoOutput{}),
	vocab.DefOf("cli.frontier", frontierOutput{}),
	vocab.DefOf("cli.plot", plotOutput{}),
	vocab.DefOf("cli.replay", replayOutput{}),
	vocab.DefOf("cli.rubrics", rubricsOutput{}),
	vocab.DefOf("cli.rubrics_lineage", lineageOutput{}),
	vocab.DefOf("cli.runs", runsOutput{}),
	vocab.DefOf("cli.serve", serveStarted{}),
	vocab.DefOf("cli.show", showOutput{}),
	vocab.DefOf("cli.stats", statsOutput{}),
	vocab.DefOf("cli.traj", trajOutput{}),
	vocab.DefOf("cli.tree", treeOutput{}),
	vocab.DefOf("cli.GroupTree", groupTree{}),
	vocab.DefOf("cli.TreeNode", treeNode{}),
	vocab.DefOf("cli.ReplayEvent", replayEventJSON{}),
}

// cliPrefix names the command's own objects cli.<Type>.
var cliPrefix = map[string]string{"github.com/patrdb/patrdb/cmd/patrdb": "cli"}

// jsonGoldens names the schema object of each --json golden file.
var jsonGoldens = map[string]string{
	"adv_json": "cli.adv", "check_json": "cli.check", "compact_json": "cli.compact",
	"export_jsonl_json": "ExportResult", "frontier_json": "cli.frontier", "replay_json": "cli.replay",
	"replay_whatif_json": "WhatIfReport", "rubrics_json": "cli.rubrics", "rubrics_lineage_json": "cli.rubrics_lineage",
	"runs_json": "cli.runs", "show_json": "cli.show", "stats_json": "cli.stats", "traj_json": "cli.traj", "tree_json": "cli.tree",
}

func vocabSchema(t *testing.T) []byte {
	t.Helper()
	doc, err := vocab.Schema("https://patrdb.dev/schema/json-schema.json", vocabDefs, cliPrefix)
	if err != nil {
		t.Fatal(err)
	}
	b, err := vocab.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The committed schema is what the types say: a renamed, added or dropped
// field fails here until the schema (and docs/json.md) are updated with
// go test -update, so no interface changes its vocabulary unreviewed.
func TestSchemaIsCurrent(t *testing.T) {
	got := vocabSchema(t)
	if *update {
		if err := os.WriteFile(schemaPath, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs from the types (go test -update rewrites it; then update docs/json.md):\n%s", schemaPath, firstDiff(string(want), string(got)))
	}
}

// Every --json golden is valid against its object: no field the schema
// lacks, none it requires missing, every value of its type.
func TestJSONGoldensMatchSchema(t *testing.T) {
	v, err := vocab.Load(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("testdata/*_json.golden")
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".golden")
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		def, ok := jsonGoldens[name]
		if !ok && strings.HasPrefix(name, "check_corrupt_") {
			// stdout, then what the command said on stderr
			def, ok = "cli.check", true
			b, _, _ = bytes.Cut(b, []byte("--- stderr\n"))
			if len(b) == 0 {
				continue // the file could not be opened: nothing on stdout
			}
		}
		if !ok {
			t.Errorf("%s: no schema object named for it in jsonGoldens", f)
			continue
		}
		if err := v.Validate(def, b); err != nil {
			t.Errorf("%s against %s: %v", f, def, err)
		}
	}
}

// The vocabulary's rules, checked over every object: times are integer
// Unix nanoseconds named *_at; a statistic has one name and one meaning.
func TestVocabularyRules(t *testing.T) {
	doc, err := vocab.Schema("x", vocabDefs, cliPrefix)
	if err != nil {
		t.Fatal(err)
	}
	defs := doc["$defs"].(map[string]any)
	names := make([]string, 0, len(defs))
	for n := range defs {
		names = append(names, n)
	}
	sort.Strings(names)
	// Outputs another change is moving to the vocabulary.
	pending := map[string]bool{"cli.show.created_at": true, "cli.show.updated_at": true, "cli.checkpointJSON.created_at": true}
	rubric := defs["Rubric"].(map[string]any)["properties"].(map[string]any)
	retired := map[string]string{
		"time": "created_at", "fork_turn": "base", "path_turns": "base + turns",
		"zero_var_before": "zero_variance_groups", "admission_rho": "rho",
	}
	for _, n := range names {
		props, _ := defs[n].(map[string]any)["properties"].(map[string]any)
		for p, s := range props {
			where := fmt.Sprintf("%s.%s", n, p)
			if to, ok := retired[p]; ok {
				t.Errorf("%s: the vocabulary says %s", where, to)
			}
			if strings.HasSuffix(p, "_at") && !isInteger(s) && !pending[where] {
				t.Errorf("%s: a time is integer Unix nanoseconds, the schema says %v", where, s)
			}
			if strings.Contains(p, "time") || strings.HasSuffix(p, "expires") {
				t.Errorf("%s: a time field ends in _at", where)
			}
			if p == "rho" && !hasAll(props, rubric) {
				t.Errorf("%s: rho is a rubric's admission correlation; name another correlation for what it is", where)
			}
		}
	}
}

// hasAll reports whether props holds every property of want: an object
// that extends a record (a rubric with figures of its own) keeps its names.
func hasAll(props, want map[string]any) bool {
	for p := range want {
		if _, ok := props[p]; !ok {
			return false
		}
	}
	return true
}

func isInteger(s any) bool {
	m, _ := s.(map[string]any)
	return m["type"] == "integer"
}
