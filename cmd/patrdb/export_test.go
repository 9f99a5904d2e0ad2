package main

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/patrdb/patrdb/lake"
	"github.com/patrdb/patrdb/replay/export"
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
	dir := filepath.Join(t.TempDir(), "lake")
	var out lake.ExportResult
	if err := json.Unmarshal([]byte(cli(t, "--db", path, "export", "patr-4x4", "--format", "parquet", "--out", dir, "--json").ok(t).stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out.Lake != dir || len(out.Files) == 0 {
		t.Fatalf("export: %+v", out)
	}
	turns := 0
	for _, f := range out.Files {
		fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(f.Key)))
		if err != nil || fi.Size() != f.Bytes {
			t.Errorf("%s: %v, %d bytes listed", f.Key, err, f.Bytes)
		}
		if f.Table == "turns" {
			rows, err := parquet.ReadFile[lake.TurnRow](filepath.Join(dir, filepath.FromSlash(f.Key)))
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
	// The fixture's run is running at step 2: the lake takes step 1 only.
	if int64(turns) != out.Rows["turns"] || turns == 0 || turns >= stored || len(out.HeldBack) != 1 || out.HeldBack[0] != 2 || out.Through != 1 {
		t.Errorf("turns read back %d, listed %d, stored %d; held back %v, through %d", turns, out.Rows["turns"], stored, out.HeldBack, out.Through)
	}
	// Another run joins the lake; run patr-4x4 stays; exporting it again
	// adds nothing.
	cli(t, "--db", path, "export", "grpo-4x4", "--format", "parquet", "--out", dir).ok(t)
	entries, _ := os.ReadDir(filepath.Join(dir, "nodes"))
	if len(entries) != 2 || entries[0].Name() != "run=grpo-4x4" || entries[1].Name() != "run=patr-4x4" {
		t.Errorf("lake: %v", entries)
	}
	again := cli(t, "--db", path, "export", "patr-4x4", "--format", "parquet", "--out", dir).ok(t).stdout
	if !strings.Contains(again, "nothing to add") || !strings.Contains(again, "held back step 2") {
		t.Errorf("export again:\n%s", again)
	}
	// Another run under the same name is refused in one line with the way
	// out; --as exports it beside.
	other := filepath.Join(t.TempDir(), "other")
	cli(t, "--db", path, "export", "grpo-4x4", "--format", "parquet", "--out", other, "--as", "patr-4x4").ok(t)
	held := treeHash(t, other)
	cli(t, "--db", path, "export", "patr-4x4", "--format", "parquet", "--out", other).fails(t, 2, "another file", "--as NAME", "--replace")
	if treeHash(t, other) != held {
		t.Error("a refused export changed the lake")
	}
	cli(t, "--db", path, "export", "patr-4x4", "--format", "parquet", "--out", other, "--as", "patr-again").ok(t)
	cli(t, "--db", path, "export", "patr-4x4", "--format", "parquet", "--out", other, "--force").fails(t, 2, "--force is for jsonl and rl")
	if fileHash(t, path) != before {
		t.Error("export changed the file")
	}
}

// treeHash digests every file under dir, with its path.
func treeHash(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		fmt.Fprintf(h, "%s %x\n", p, sha256.Sum256(b))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
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
	var out export.ExportResult
	if err := json.Unmarshal([]byte(cli(t, "--db", path, "export", "patr-4x4", "--format", "rl", "--out", lake, "--json").ok(t).stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out.Rows["rl.jsonl"] == 0 || out.Rows["rl.jsonl"] != out.Rows["rl.parquet"] {
		t.Fatalf("export rl: %+v", out)
	}
	rows, err := parquet.ReadFile[export.RLRow](filepath.Join(lake, "run=patr-4x4", "step=1", "rl.parquet"))
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
