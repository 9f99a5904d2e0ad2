package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/patrdb/patrdb/replay"
)

func TestExportGolden(t *testing.T) {
	checkGoldens(t, []goldenCase{
		{name: "export_parquet", args: []string{"export", "patr-4x4", "--format", "parquet", "--out", "$OUT/lake"}},
		{name: "export_jsonl_json", args: []string{"export", "patr-4x4", "--format", "jsonl", "--out", "$OUT/lake", "--json"}},
	})
}

func TestExportWritesReadableFiles(t *testing.T) {
	path := fixture(t)
	before := fileHash(t, path)
	lake := filepath.Join(t.TempDir(), "lake")
	var out replay.ExportResult
	if err := json.Unmarshal([]byte(cli(t, "--db", path, "export", "patr-4x4", "--format", "parquet", "--out", lake, "--json").ok(t).stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out.Dir != filepath.Join(lake, "run=patr-4x4") || len(out.Files) == 0 {
		t.Fatalf("export: %+v", out)
	}
	turns := 0
	for _, f := range out.Files {
		fi, err := os.Stat(filepath.Join(lake, filepath.FromSlash(f.Path)))
		if err != nil || fi.Size() != f.Bytes {
			t.Errorf("%s: %v, %d bytes listed", f.Path, err, f.Bytes)
		}
		if f.Table == "turns" {
			rows, err := parquet.ReadFile[replay.TurnRow](filepath.Join(lake, filepath.FromSlash(f.Path)))
			if err != nil {
				t.Fatal(err)
			}
			turns += len(rows)
		}
	}
	var runs runsOutput
	if err := json.Unmarshal([]byte(cli(t, "--db", path, "runs", "--json").ok(t).stdout), &runs); err != nil {
		t.Fatal(err)
	}
	stored := -1
	for _, r := range runs.Runs {
		if r.Run == "patr-4x4" {
			stored = r.Turns
		}
	}
	if int64(turns) != out.Rows["turns"] || turns != stored {
		t.Errorf("turns read back %d, listed %d, stored %d", turns, out.Rows["turns"], stored)
	}
	// Another run joins the lake with --force; run patr-4x4 stays.
	cli(t, "--db", path, "export", "grpo-4x4", "--format", "parquet", "--out", lake).fails(t, 2, "not empty", "--force")
	cli(t, "--db", path, "export", "grpo-4x4", "--format", "parquet", "--out", lake, "--force").ok(t)
	entries, _ := os.ReadDir(lake)
	if len(entries) != 2 || entries[0].Name() != "run=grpo-4x4" || entries[1].Name() != "run=patr-4x4" {
		t.Errorf("lake: %v", entries)
	}
	if fileHash(t, path) != before {
		t.Error("export changed the file")
	}
}

func TestExportProgressOnlyOnATerminal(t *testing.T) {
	path := fixture(t)
	r := cliEnv(t, testEnv{terminal: true}, "--db", path, "export", "patr-4x4", "--format", "jsonl", "--out", filepath.Join(t.TempDir(), "a"))
	if r.code != 0 || !strings.Contains(r.stderr, "export patr-4x4") {
		t.Errorf("terminal: exit %d, stderr %q; want a progress bar", r.code, r.stderr)
	}
	cli(t, "--db", path, "export", "patr-4x4", "--format", "jsonl", "--out", filepath.Join(t.TempDir(), "b")).ok(t) // ok: nothing on stderr
}

func TestExportBadInput(t *testing.T) {
	path := fixture(t)
	dir := t.TempDir()
	cli(t, "--db", path, "export", "patr-4x4", "--out", filepath.Join(dir, "x")).fails(t, 2, "--format")
	cli(t, "--db", path, "export", "patr-4x4", "--format", "csv", "--out", filepath.Join(dir, "x")).fails(t, 2, `--format "csv"`)
	cli(t, "--db", path, "export", "patr-4x4", "--format", "jsonl").fails(t, 2, "--out")
	cli(t, "--db", path, "export", "nope", "--format", "jsonl", "--out", filepath.Join(dir, "x")).fails(t, 1, `run "nope" not found`)
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cli(t, "--db", path, "export", "patr-4x4", "--format", "jsonl", "--out", file).fails(t, 2, "file")
	cli(t, "--db", path, "export", "patr-4x4", "--format", "jsonl", "--out", filepath.Join(file, "sub")).fails(t, 2)
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "file" {
		t.Errorf("failed exports left %v", entries)
	}
}

// --format rl writes the batch rows of every step, in JSONL and Parquet.
func TestExportRL(t *testing.T) {
	path := fixture(t)
	lake := filepath.Join(t.TempDir(), "lake")
	var out replay.ExportResult
	if err := json.Unmarshal([]byte(cli(t, "--db", path, "export", "patr-4x4", "--format", "rl", "--out", lake, "--json").ok(t).stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out.Rows["rl.jsonl"] == 0 || out.Rows["rl.jsonl"] != out.Rows["rl.parquet"] {
		t.Fatalf("export rl: %+v", out)
	}
	rows, err := parquet.ReadFile[replay.RLRow](filepath.Join(lake, "run=patr-4x4", "step=1", "rl.parquet"))
	if err != nil || len(rows) == 0 || len(rows[0].InputIDs) == 0 {
		t.Fatalf("rl.parquet: %d rows, %v", len(rows), err)
	}
	text := cli(t, "--db", path, "export", "patr-4x4", "--format", "rl", "--out", lake, "--force").ok(t).stdout
	if !strings.Contains(text, "rl.parquet") {
		t.Errorf("text output lists no rl table:\n%s", text)
	}
}

// --out may name folders that do not exist yet; export creates them, and a
// failed export removes the ones it created.
func TestExportCreatesOut(t *testing.T) {
	path := fixture(t)
	dir := t.TempDir()
	lake := filepath.Join(dir, "a", "b", "lake")
	cli(t, "--db", path, "export", "patr-4x4", "--format", "jsonl", "--out", lake).ok(t)
	if _, err := os.Stat(filepath.Join(lake, "run=patr-4x4")); err != nil {
		t.Fatalf("export into a missing folder: %v", err)
	}
	cli(t, "--db", path, "export", "nope", "--format", "jsonl", "--out", filepath.Join(dir, "c", "d")).fails(t, 1, `run "nope" not found`)
	if _, err := os.Stat(filepath.Join(dir, "c")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a failed export left the folder it created: %v", err)
	}
}
