package batchmeasure

import (
	"path/filepath"
	"testing"
)

// TestMeasureTimesEverySide builds a smoke-sized step (Build checks that
// the by-hand path reads the batch's tokens) and times it: every side has
// one positive figure per repetition.
func TestMeasureTimesEverySide(t *testing.T) {
	s, err := Build(Smoke(), filepath.Join(t.TempDir(), "step.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Rows.Len() == 0 || ArrayBytes(s.Rows) == 0 {
		t.Fatalf("empty rows batch: %d rows, %d bytes", s.Rows.Len(), ArrayBytes(s.Rows))
	}
	tm, err := s.Measure(2, 1)
	if err != nil {
		t.Fatal(err)
	}
	for side := range nSides {
		if len(tm.Wall[side]) != 2 || len(tm.CPU[side]) != 2 {
			t.Fatalf("side %d: %d wall and %d CPU figures, want 2 each", side, len(tm.Wall[side]), len(tm.CPU[side]))
		}
		for _, x := range tm.Wall[side] {
			if !(x > 0) {
				t.Errorf("side %d: wall %v", side, x)
			}
		}
	}
}
