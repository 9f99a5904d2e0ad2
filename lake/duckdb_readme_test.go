//go:build duckdb

package lake_test

import (
	"context"
	"database/sql"
	"os"
	"regexp"
	"testing"
)

// TestReadmeQuery runs the README's DuckDB query in the folder
// scripts/readme.sh exported the demo's lake into (PATRDB_README_LAKE):
// one row per step, each with leaves.
func TestReadmeQuery(t *testing.T) {
	dir := os.Getenv("PATRDB_README_LAKE")
	if dir == "" {
		t.Skip("PATRDB_README_LAKE is not set: scripts/readme.sh runs this test")
	}
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```sql\n(.*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatal("the README has no sql block")
	}
	t.Chdir(dir)
	conn, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := runSQL(context.Background(), conn, string(m[1]))
	if err != nil {
		t.Fatalf("%s\n%v", m[1], err)
	}
	if len(rows) == 0 || num(t, rows[0]["step"]) != 1 || num(t, rows[0]["leaves"]) == 0 {
		t.Fatalf("the README's query gave %v", rows)
	}
	t.Logf("%d steps; step 1: %v", len(rows), rows[0])
}
