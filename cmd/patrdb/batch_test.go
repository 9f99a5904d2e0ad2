package main

import (
	"bytes"
	"encoding/json"
	"github.com/patrdb/patrdb/batch/batchdb"
	"os"
	"path/filepath"
	"testing"

	"github.com/patrdb/patrdb/batch"
	"github.com/patrdb/patrdb/server"
	"github.com/patrdb/patrdb/store"
)

// The file patrdb batch writes is the batch package's file, byte for
// byte, from the file and through the owner's server alike.
func TestBatchWritesTheStepsBatch(t *testing.T) {
	path := fixture(t)
	dir := t.TempDir()
	for _, layout := range []string{"rows", "tree"} {
		out := filepath.Join(dir, layout+".safetensors")
		var res batchOutput
		stdout := cli(t, "--db", path, "batch", "patr-4x4", "--step", "1", "--layout", layout, "--out", out, "--json").ok(t).stdout
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		want, wantBytes := packageBatch(t, path, batch.Options{Layout: batch.Layout(layout)})
		if !bytes.Equal(got, wantBytes) || res.Bytes != int64(len(got)) || res.Rows != want.Len() || res.Rows == 0 || res.Layout != layout {
			t.Errorf("%s: wrote %d bytes (%+v), batchdb.ReadDB gives %d", layout, len(got), res, len(wantBytes))
		}
		if layout == "tree" && res.TreeTokenRatio <= 1 {
			t.Errorf("tree token ratio %v: the fixture's leaves share prefixes", res.TreeTokenRatio)
		}
		// Through the owner's server: the same bytes.
		_, stop := serveInProcess(t, path, server.Options{}, true)
		remote := filepath.Join(dir, layout+"-remote.safetensors")
		cli(t, "--db", path, "--timeout", "5s", "batch", "patr-4x4", "--step", "1", "--layout", layout, "--out", remote).ok(t)
		stop()
		if r, err := os.ReadFile(remote); err != nil || !bytes.Equal(r, got) {
			t.Errorf("%s: through the server the file differs (%v)", layout, err)
		}
	}
	// Each credit rule and normalisation: the package's file, which names them.
	for _, credit := range []string{"repeat", "mean", "owner"} {
		for _, norm := range []string{"token-mean", "seq-mean-token-mean"} {
			out := filepath.Join(dir, credit+norm+".safetensors")
			cli(t, "--db", path, "batch", "patr-4x4", "--step", "1", "--layout", "tree", "--credit", credit, "--norm", norm, "--out", out).ok(t)
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			b, err := batch.Decode(got)
			if err != nil || string(b.Credit) != credit || string(b.Norm) != norm {
				t.Fatalf("--credit %s --norm %s: file says %q %q (%v)", credit, norm, b.Credit, b.Norm, err)
			}
			_, want := packageBatch(t, path, batch.Options{Layout: batch.Tree, Credit: batch.Credit(credit), Norm: batch.Norm(norm)})
			if !bytes.Equal(got, want) {
				t.Errorf("--credit %s --norm %s: the file is not the package's", credit, norm)
			}
		}
	}
	text := cli(t, "--db", path, "batch", "patr-4x4", "--step", "2", "--out", filepath.Join(dir, "open.safetensors")).ok(t).stdout
	if !bytes.Contains([]byte(text), []byte("credit repeat, token-mean")) {
		t.Errorf("the output does not name the credit rule and normalisation:\n%s", text)
	}
	if !bytes.Contains([]byte(text), []byte("still open")) {
		t.Errorf("step 2 has open groups, output does not say so:\n%s", text)
	}
}

// packageBatch is step 1 of the fixture's run as package batch reads and
// writes it.
func packageBatch(t *testing.T, path string, opts batch.Options) (*batch.Batch, []byte) {
	t.Helper()
	db, err := store.Open(path, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b, err := batchdb.ReadDB(db, "patr-4x4", 1, opts)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := b.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return b, buf.Bytes()
}

func TestBatchErrors(t *testing.T) {
	path := fixture(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "b.safetensors")
	cli(t, "--db", path, "batch", "patr-4x4", "--out", out).fails(t, 2, "--step")
	cli(t, "--db", path, "batch", "patr-4x4", "--step", "1").fails(t, 2, "--out")
	cli(t, "--db", path, "batch", "patr-4x4", "--step", "x", "--out", out).fails(t, 2, `--step "x"`)
	cli(t, "--db", path, "batch", "patr-4x4", "--step", "1", "--layout", "packed", "--out", out).fails(t, 2, `--layout "packed"`)
	cli(t, "--db", path, "batch", "patr-4x4", "--step", "1", "--credit", "sum", "--out", out).fails(t, 2, `--credit "sum"`, "repeat, mean or owner")
	cli(t, "--db", path, "batch", "patr-4x4", "--step", "1", "--norm", "seq-mean", "--out", out).fails(t, 2, `--norm "seq-mean"`)
	cli(t, "--db", path, "batch", "patr-4x4", "--step", "1", "--min-policy-version", "3", "--max-policy-version", "2", "--out", out).fails(t, 2, "--min-policy-version")
	cli(t, "--db", path, "batch", "patr-4x4", "--step", "9", "--out", out).fails(t, 1, "step 9", "no groups")
	cli(t, "--db", path, "batch", "patr-4x4", "--step", "1", "--groups", "99", "--out", out).fails(t, 1, "group 99")
	cli(t, "--db", path, "batch", "nope", "--step", "1", "--out", out).fails(t, 1, `run "nope" not found`)
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed runs left %d files behind", len(entries))
	}
	cli(t, "--db", path, "batch", "patr-4x4", "--step", "1", "--out", out).ok(t)
	cli(t, "--db", path, "batch", "patr-4x4", "--step", "1", "--out", out).fails(t, 2, "exists", "--force")
	cli(t, "--db", path, "batch", "patr-4x4", "--step", "1", "--layout", "tree", "--out", out, "--force").ok(t)
}
