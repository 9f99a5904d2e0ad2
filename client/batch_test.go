package client_test

import (
	"context"
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
