package client_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/patrdb/patrdb/batch"
)

// Batch fetches the step's batch file with the options asked for: a rows
// batch by default, a tree batch when asked, both of the step's rows.
func TestBatchFetchesTheStepsFile(t *testing.T) {
	s := serve(t, nil)
	s.createRun("r", workerTree)
	s.openStep("r", 1, 2)
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	if _, err := s.worker("r", "w", 4).Work(ctx, 1); err != nil {
		t.Fatal(err)
	}
	s.closeDone("r", 1)
	var rows int
	for _, layout := range []batch.Layout{"", batch.Tree} {
		raw, err := s.c.Batch(bg, "r", 1, batch.Options{Layout: layout})
		if err != nil {
			t.Fatal(err)
		}
		b, err := batch.Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		want := layout
		if want == "" {
			want, rows = batch.Rows, b.Len()
		}
		if b.Layout != want || b.Run != "r" || b.Step != 1 || b.Len() == 0 || b.Len() != rows {
			t.Errorf("asked for layout %q: a %s batch of run %q step %d, %d rows (rows layout: %d)", layout, b.Layout, b.Run, b.Step, b.Len(), rows)
		}
	}
}

// ReadBatch builds the batch the server's file holds, byte for byte: from
// the step's source, and from a server that ignores the Accept asking for
// the source (one before API 1.8), from the file.
func TestReadBatchBuildsTheServersFile(t *testing.T) {
	forgetful := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Header.Del("Accept")
			h.ServeHTTP(w, r)
		})
	}
	for name, wrap := range map[string]func(http.Handler) http.Handler{"source": nil, "older server": forgetful} {
		s := serve(t, wrap)
		s.createRun("r", workerTree)
		s.openStep("r", 1, 2)
		ctx, cancel := context.WithTimeout(bg, time.Minute)
		if _, err := s.worker("r", "w", 4).Work(ctx, 1); err != nil {
			t.Fatal(err)
		}
		cancel()
		s.closeDone("r", 1)
		var reused batch.Batch
		for _, opts := range []batch.Options{{Layout: batch.Tree, Credit: batch.Mean}, {}, {Norm: batch.SeqMeanTokenMean, ExcludePruned: true}} {
			file, err := s.c.Batch(bg, "r", 1, opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.c.BatchInto(bg, &reused, "r", 1, opts); err != nil {
				t.Fatalf("%s %+v: %v", name, opts, err)
			}
			var built bytes.Buffer
			if _, err := reused.WriteTo(&built); err != nil {
				t.Fatal(err)
			}
			if reused.Len() == 0 || !bytes.Equal(built.Bytes(), file) {
				t.Errorf("%s %+v: built a file of %d bytes (%d rows), the server's has %d", name, opts, built.Len(), reused.Len(), len(file))
			}
		}
	}
}
