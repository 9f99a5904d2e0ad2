package server

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/batch/batchdb"
	"github.com/patrdb/patrdb/batch/sourcewire"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/batch"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// A group opened over HTTP with prompt token ids, grown and closed, is
// served as the same safetensors bytes batchdb.ReadDB writes, in both
// layouts; the prompt leads every row.
func TestTrainBatch(t *testing.T) {
	e := newEnv(t, Options{})
	e.post("/api/v1/runs", map[string]any{"id": "r", "tree": map[string]any{"b0": 2}, "client_key": "k1"}, http.StatusCreated, nil)
	var opened api.OpenStepResponse
	e.post("/api/v1/runs/r/steps", map[string]any{"step": 1, "tasks": []map[string]any{{"id": "t", "prompt_tokens": []uint32{7, 8, 9}}}, "client_key": "k2"}, http.StatusOK, &opened)
	if len(opened.Groups) != 1 || !slices.Equal(opened.Groups[0].PromptTokens, model.TokenIDs{7, 8, 9}) || len(opened.Groups[0].Roots) != 2 {
		t.Fatalf("open step: %+v", opened)
	}
	og := struct {
		Group model.Group
		Roots []uint64
	}{opened.Groups[0], opened.Groups[0].Roots}
	err := e.db.Update(func(tx *store.Tx) error {
		r, err := tx.Run("r")
		if err != nil {
			return err
		}
		for i, id := range og.Roots {
			if err := r.AppendTurns(id, 0, turn("a", 0), turn("b", 1)); err != nil {
				return err
			}
			if err := r.SetReward(id, float64(i)); err != nil {
				return err
			}
			if err := r.SetNodeStatus(id, model.NodeCompleted); err != nil {
				return err
			}
			if err := r.PutAdvantage(model.Advantage{Step: 1, Group: og.Group.ID, Leaf: id, Advantage: float64(2*i - 1)}); err != nil {
				return err
			}
		}
		return r.CloseGroup(1, og.Group.ID)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, opts := range []batch.Options{{}, {Layout: batch.Tree}, {Layout: batch.Tree, Groups: []uint64{og.Group.ID}, MinPolicyVersion: 0, ExcludePruned: true},
		{Layout: batch.Tree, Credit: batch.Mean, Norm: batch.SeqMeanTokenMean}, {Credit: batch.Owner}} {
		got, err := e.c.Batch(bg, "r", 1, opts)
		if err != nil {
			t.Fatal(err)
		}
		want, err := batchdb.ReadDB(e.db, "r", 1, opts)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := want.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, buf.Bytes()) {
			t.Fatalf("%+v: served %d bytes, batchdb.ReadDB writes %d", opts, len(got), buf.Len())
		}
		// The batch the client builds from the step's source: the same file.
		built, err := e.c.ReadBatch(bg, "r", 1, opts)
		if err != nil {
			t.Fatal(err)
		}
		var fromSource bytes.Buffer
		if _, err := built.WriteTo(&fromSource); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fromSource.Bytes(), buf.Bytes()) {
			t.Fatalf("%+v: built from the source, a file of %d bytes; batchdb.ReadDB writes %d", opts, fromSource.Len(), buf.Len())
		}
		b, err := batch.Decode(got)
		if err != nil {
			t.Fatal(err)
		}
		if b.Len() != 2 || !slices.Equal(b.InputIDs[:3], []int32{7, 8, 9}) || b.Credit != want.Credit || b.Norm != want.Norm {
			t.Errorf("%+v: %d rows, tokens %v, credit %q %q", opts, b.Len(), b.InputIDs, b.Credit, b.Norm)
		}
	}
	st, h, body := e.call(http.MethodGet, "/api/v1/runs/r/steps/1/batch?layout=tree&credit=mean", nil)
	if st != http.StatusOK || h.Get("Content-Type") != "application/octet-stream" || h.Get("Content-Length") == "" || len(body) == 0 ||
		!strings.Contains(h.Get("Content-Disposition"), "r-step1-tree-mean.safetensors") {
		t.Errorf("GET batch: %d %v", st, h)
	}
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/api/v1/runs/r/steps/1/batch", nil)
	req.Header.Set("Accept", "application/json, "+sourcewire.MediaType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	source, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if src, err := sourcewire.Decode(source); resp.Header.Get("Content-Type") != sourcewire.MediaType || err != nil || len(src.Leaves) != 2 ||
		resp.Header.Get("Content-Length") != strconv.Itoa(len(source)) || len(source) >= len(body) {
		t.Errorf("GET batch, Accept: %s: %s, %d bytes (Content-Length %s; the tree file: %d): %v", sourcewire.MediaType, resp.Header.Get("Content-Type"),
			len(source), resp.Header.Get("Content-Length"), len(body), err)
	}
	if _, err := e.c.ReadBatch(bg, "r", 2, batch.Options{}); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("client, built from a step without groups: %v", err)
	}
	if _, err := e.c.ReadBatch(bg, "r", 1, batch.Options{Layout: "packed"}); !errors.Is(err, model.ErrInvalid) {
		t.Errorf("client, built with a bad layout: %v", err)
	}
	for path, want := range map[string]int{
		"/api/v1/runs/r/steps/2/batch":               http.StatusNotFound,
		"/api/v1/runs/nope/steps/1/batch":            http.StatusNotFound,
		"/api/v1/runs/r/steps/0/batch":               http.StatusBadRequest,
		"/api/v1/runs/r/steps/1/batch?layout=packed": http.StatusBadRequest,
		"/api/v1/runs/r/steps/1/batch?groups=x":      http.StatusBadRequest,
		"/api/v1/runs/r/steps/1/batch?colour=blue":   http.StatusBadRequest,
		"/api/v1/runs/r/steps/1/batch?credit=sum":    http.StatusBadRequest,
		"/api/v1/runs/r/steps/1/batch?norm=seq-mean": http.StatusBadRequest,
		"/api/v1/runs/r/steps/1/batch?groups=99":     http.StatusNotFound,
	} {
		if st, _, body := e.call(http.MethodGet, path, nil); st != want {
			t.Errorf("GET %s: %d %s, want %d", path, st, body, want)
		}
	}
	if _, err := e.c.Batch(bg, "r", 1, batch.Options{Layout: "packed"}); !errors.Is(err, api.ErrBadRequest) {
		t.Errorf("client, bad layout: %v", err)
	}
}
