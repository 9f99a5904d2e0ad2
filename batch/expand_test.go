package batch_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/patrdb/patrdb/batch"
)

// Expand turns a tree batch into the rows batch of the same options: each
// row's segments from its prompt to its leaf, trained as the credit rule
// says (Repeat: every action token with the row's advantage; Mean and
// Owner: only the segments the row owns, the others masked with logprob
// and advantage 0), and the coefficients recomputed per row.
func TestExpandIsTheRowsBatch(t *testing.T) {
	for _, credit := range credits {
		for _, norm := range norms {
			t.Run(fmt.Sprint(credit, "/", norm), func(t *testing.T) {
				got := forkTree(credit, norm).Expand()
				want := forkRows(credit, norm)
				if !reflect.DeepEqual(got, want) {
					v, w := reflect.ValueOf(*got), reflect.ValueOf(*want)
					for i := range v.NumField() {
						if !reflect.DeepEqual(v.Field(i).Interface(), w.Field(i).Interface()) {
							t.Errorf("%s = %v, want %v", v.Type().Field(i).Name, v.Field(i), w.Field(i))
						}
					}
				}
			})
		}
	}
}

// A rows batch is already expanded: Expand gives it back as it is.
func TestExpandOfRowsIsTheSameBatch(t *testing.T) {
	b := forkRows(batch.Repeat, batch.TokenMean)
	if got := b.Expand(); got != b {
		t.Errorf("Expand of a rows batch made a new batch")
	}
}

// A step with no closed group expands to a rows batch with no row.
func TestExpandOfAnEmptyTree(t *testing.T) {
	b := &batch.Batch{Layout: batch.Tree, Credit: batch.Mean, Norm: batch.TokenMean, SegOffsets: []int64{0}}
	got := b.Expand()
	if got.Layout != batch.Rows || got.Len() != 0 || !reflect.DeepEqual(got.RowOffsets, []int64{0}) || len(got.InputIDs) != 0 {
		t.Errorf("an empty tree expanded: %+v", got)
	}
}
