//go:build duckdb

package replay_test

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

	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// Every SQL block of docs/lake.md runs against a real DuckDB over a lake of
// two exported runs, and the recipes' figures match the store's.
func TestLakeRecipesInDuckDB(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "lake.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(blocks) < 5 {
		t.Fatalf("docs/lake.md has %d sql blocks", len(blocks))
	}

	db := storetest.Open(t)
	specs := []runSpec{mediumSpec("patr-4x4"), smallSpec("7")} // "7": a run id that looks like a number
	for _, s := range specs {
		buildOneTx(t, db, s)
	}
	dir := t.TempDir()
	for _, s := range specs {
		if _, err := export(t, db, s.id, replay.ExportOptions{Out: filepath.Join(dir, "lake"), Format: replay.Parquet}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]storeTotals{}
	var leaf uint64
	var path []store.PathTurn
	decisions, events := 0, 0
	_ = db.View(func(tx *store.Tx) error {
		for _, s := range specs {
			want[s.id] = readStoreTotals(t, db, s.id)
			r, _ := tx.Run(s.id)
			events += int(r.LastSeq())
			_ = r.ForEachGroup(0, func(g store.Group) error {
				nodes, _ := r.GroupNodes(g)
				for _, n := range nodes {
					decisions += len(n.Decisions)
					if s.id == "patr-4x4" && n.Status.Leaf() && n.Depth > 0 && leaf == 0 {
						leaf = n.ID
					}
				}
				return nil
			})
		}
		r, _ := tx.Run("patr-4x4")
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
			if len(rows) != len(specs) || rows[0]["run"] != "7" || rows[1]["status"] != string(store.RunFinished) {
				t.Errorf("runs as they stand: %v", rows)
			}
		case strings.Contains(sqlText, "mean_reward"):
			var leaves float64
			for _, s := range specs {
				leaves += float64(want[s.id].leaves)
			}
			if got := sum(rows, "leaves"); got != leaves {
				t.Errorf("leaves per step add up to %v, store %v", got, leaves)
			}
			if len(rows) != 6 || rows[0]["run"] != "7" || num(t, rows[0]["step"]) != 1 {
				t.Errorf("leaves per step: %v", rows)
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
			var tokens float64
			for _, s := range specs {
				tokens += float64(want[s.id].actionTokens)
			}
			if got := sum(rows, "action_tokens"); got != tokens {
				t.Errorf("action tokens %v, store %v", got, tokens)
			}
		case strings.Contains(sqlText, "FROM rubrics"):
			var n int
			for _, s := range specs {
				n += want[s.id].rubrics
			}
			if len(rows) != n || rows[0]["pool"] != "public" {
				t.Errorf("%d rubrics as they stand (first %v), store %d", len(rows), rows[0], n)
			}
		case strings.Contains(sqlText, "unnest(decisions)"):
			if got := sum(rows, "decisions"); got != float64(decisions) {
				t.Errorf("decisions %v, store %d", got, decisions)
			}
		case strings.Contains(sqlText, "FROM events"):
			if got := sum(rows, "events"); got != float64(events) {
				t.Errorf("events %v, store %d", got, events)
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
