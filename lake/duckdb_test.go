//go:build duckdb

package lake_test

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/patrdb/patrdb/internal/frozenlake"
	"github.com/patrdb/patrdb/lake"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// Every SQL block of docs/lake.md runs against a real DuckDB over a lake
// of exported runs, and the recipes' figures match the store's: once over
// the default demo (PaTR without rubrics: the lake's rubrics table has no
// rows), once with a run with rubrics beside it whose id looks like a
// number.
func TestLakeRecipesInDuckDB(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "lake.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(blocks) < 5 {
		t.Fatalf("docs/lake.md has %d sql blocks", len(blocks))
	}
	demo := frozenlake.DefaultTrainConfig("patr")
	demo.Run, demo.Steps, demo.Batch, demo.EvalEpisodes = "patr-4x4", 4, 4, 10
	withRubrics := trainConfig("7", 3, 2)
	t.Run("default demo", func(t *testing.T) { recipes(t, blocks, demo) })
	t.Run("with rubrics", func(t *testing.T) { recipes(t, blocks, demo, withRubrics) })
}

// storeTotals are a run's figures the recipes compute, read from the store.
type storeTotals struct {
	leaves, actionTokens, rubrics, decisions, events, lossSteps int
	steps                                                       map[uint64]bool // with leaves
}

func readTotals(t *testing.T, db *store.DB, run string) storeTotals {
	t.Helper()
	st := storeTotals{steps: map[uint64]bool{}}
	err := db.ViewRun(run, func(r *store.RunTx) error {
		st.events = int(r.LastSeq())
		rbs, _ := r.Rubrics("")
		st.rubrics = len(rbs)
		return r.ForEachGroup(0, func(g model.Group) error {
			ns, err := r.GroupNodes(g)
			for _, n := range ns {
				st.decisions += len(n.Decisions)
				if n.Status.Leaf() {
					st.leaves++
					st.steps[n.Step] = true
				}
				ts, _ := r.Turns(n.ID)
				for _, tr := range ts {
					st.actionTokens += len(tr.ActionTokens)
				}
			}
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func recipes(t *testing.T, blocks [][]string, cfgs ...frozenlake.TrainConfig) {
	db := storetest.Open(t)
	dir := t.TempDir()
	lk := openLake(t, filepath.Join(dir, "lake"))
	var want storeTotals
	want.steps = map[uint64]bool{}
	stepRows := 0
	for _, c := range cfgs {
		tr, err := frozenlake.NewTrainer(db, c, nil)
		if err != nil {
			t.Fatal(err)
		}
		tr.ShaperFor = frozenlake.RubricShaper
		if _, err := tr.Train(context.Background(), false); err != nil {
			t.Fatal(err)
		}
		// The trainer's figures: a loss per step, logged once with a
		// wrong value and again with the right one.
		var logged int
		err = db.UpdateRun(c.Run, func(r *store.RunTx) error {
			info, err := r.Info()
			for s := uint64(1); err == nil && s <= info.LastStep; s++ {
				if err = r.PutScalars(s, map[string]float64{"loss": -1, "kl": 0.5}); err == nil {
					err = r.PutScalars(s, map[string]float64{"loss": 1 / float64(s)})
				}
				logged++
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		want.lossSteps += logged
		if _, err := lk.Export(context.Background(), db, c.Run, lake.ExportOptions{}); err != nil {
			t.Fatal(err)
		}
		st := readTotals(t, db, c.Run)
		want.leaves += st.leaves
		want.actionTokens += st.actionTokens
		want.rubrics += st.rubrics
		want.decisions += st.decisions
		want.events += st.events
		stepRows += len(st.steps)
	}
	var leaf uint64
	var path []model.PathTurn
	err := db.View(func(tx *store.Tx) error {
		r, _ := tx.Run("patr-4x4")
		_ = r.ForEachGroup(0, func(g model.Group) error {
			nodes, _ := r.GroupNodes(g)
			for _, n := range nodes {
				if n.Status.Leaf() && n.Depth > 0 && leaf == 0 {
					leaf = n.ID
				}
			}
			return nil
		})
		var err error
		path, err = r.Trajectory(leaf)
		return err
	})
	if err != nil || leaf == 0 {
		t.Fatalf("no forked leaf to follow: %v", err)
	}

	t.Chdir(dir) // the recipes name the lake relative to it
	conn, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetMaxOpenConns(1) // views live in the connection's catalog
	ctx := context.Background()

	sum := func(rows []map[string]any, col string) float64 {
		var s float64
		for _, r := range rows {
			s += num(t, r[col])
		}
		return s
	}
	checked := 0
	for i, b := range blocks {
		sqlText := b[1]
		sqlText = regexp.MustCompile(`SET VARIABLE leaf = \d+`).ReplaceAllString(sqlText, fmt.Sprintf("SET VARIABLE leaf = %d", leaf))
		rows, err := runSQL(ctx, conn, sqlText)
		if err != nil {
			t.Fatalf("block %d:\n%s\n%v", i, sqlText, err)
		}
		switch {
		case strings.Contains(sqlText, "CREATE VIEW"):
			continue
		case strings.Contains(sqlText, "FROM runs"):
			if len(rows) != len(cfgs) || rows[len(rows)-1]["status"] != string(model.RunFinished) {
				t.Errorf("runs as they stand: %v", rows)
			}
		case strings.Contains(sqlText, "mean_reward"):
			if got := sum(rows, "leaves"); got != float64(want.leaves) {
				t.Errorf("leaves per step add up to %v, store %v", got, want.leaves)
			}
			if len(rows) != stepRows || num(t, rows[0]["step"]) != 1 {
				t.Errorf("leaves per step: %v, want %d rows", rows, stepRows)
			}
		case strings.Contains(sqlText, "LIMIT 10"):
			if len(rows) != 10 || rows[0]["task"] == "" || num(t, rows[0]["advantage"]) < num(t, rows[9]["advantage"]) {
				t.Errorf("best leaves: %v", rows)
			}
		case strings.Contains(sqlText, "WITH RECURSIVE"):
			if len(rows) != len(path) {
				t.Fatalf("trajectory of leaf %d: %d turns, store %d", leaf, len(rows), len(path))
			}
			for k, p := range path {
				if rows[k]["action"] != p.Action || uint64(num(t, rows[k]["node"])) != p.Node || int(num(t, rows[k]["action_tokens"])) != len(p.ActionTokens) {
					t.Errorf("turn %d: %v, store node %d %q", k, rows[k], p.Node, p.Action)
				}
			}
		case strings.Contains(sqlText, "mean_logprob"):
			if got := sum(rows, "action_tokens"); got != float64(want.actionTokens) {
				t.Errorf("action tokens %v, store %v", got, want.actionTokens)
			}
		case strings.Contains(sqlText, "FROM rubrics"):
			if len(rows) != want.rubrics || (len(rows) > 0 && rows[0]["pool"] != "public") {
				t.Errorf("%d rubrics as they stand (%v), store %d", len(rows), rows, want.rubrics)
			}
		case strings.Contains(sqlText, "unnest(decisions)"):
			if got := sum(rows, "decisions"); got != float64(want.decisions) {
				t.Errorf("decisions %v, store %d", got, want.decisions)
			}
		case strings.Contains(sqlText, "FROM scalars"):
			if len(rows) != want.lossSteps {
				t.Errorf("%d steps with a loss, %d logged", len(rows), want.lossSteps)
			}
			for _, r := range rows {
				if num(t, r["loss"]) != 1/num(t, r["step"]) || math.IsNaN(num(t, r["rollout_reward"])) {
					t.Errorf("loss per step: %v, want the last value logged (1/step) beside the mean reward", r)
				}
			}
		case strings.Contains(sqlText, "FROM events"):
			if got := sum(rows, "events"); got != float64(want.events) {
				t.Errorf("events %v, store %d", got, want.events)
			}
		default:
			t.Errorf("block %d has no check:\n%s", i, sqlText)
			continue
		}
		checked++
	}
	if checked != len(blocks)-1 {
		t.Errorf("%d of %d query blocks checked", checked, len(blocks)-1)
	}
}

// runSQL runs a block's statements in order and returns the last one's
// rows.
func runSQL(ctx context.Context, conn *sql.DB, text string) ([]map[string]any, error) {
	stmts := strings.SplitAfter(strings.TrimSpace(text), ";\n")
	for _, s := range stmts[:len(stmts)-1] {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			return nil, err
		}
	}
	rows, err := conn.QueryContext(ctx, stmts[len(stmts)-1])
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []map[string]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		m := map[string]any{}
		for i, c := range cols {
			m[c] = vals[i]
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

func num(t *testing.T, v any) float64 {
	t.Helper()
	switch x := v.(type) {
	case int64:
		return float64(x)
	case int32:
		return float64(x)
	case uint64:
		return float64(x)
	case float64:
		return x
	case *big.Int:
		f, _ := new(big.Float).SetInt(x).Float64()
		return f
	case nil:
		return math.NaN()
	}
	t.Fatalf("not a number: %T %v", v, v)
	return 0
}
