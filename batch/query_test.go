package batch_test

import (
	"errors"
	"net/url"
	"reflect"
	"testing"

	"github.com/patrdb/patrdb/batch"
)

// Options travel as query parameters and back unchanged; a parameter or
// value the package does not know is ErrInvalidOptions.
func TestQuery(t *testing.T) {
	for _, o := range []batch.Options{
		{},
		{Layout: batch.Tree, Credit: batch.Mean, Norm: batch.SeqMeanTokenMean, Groups: []uint64{3, 1},
			ExcludePruned: true, ExcludeTruncated: true, IncludeFailed: true, MinPolicyVersion: 2, MaxPolicyVersion: 9},
		{Credit: batch.Owner},
		{Groups: []uint64{12, 1 << 40}, MinPolicyVersion: 1, MaxPolicyVersion: 11},
		{MinPolicyVersion: 13},
	} {
		back, err := batch.ParseQuery(o.Query())
		if err != nil || !reflect.DeepEqual(back, o) {
			t.Errorf("%+v: back as %+v, %v", o, back, err)
		}
	}
	// The defaults are left out of the query: a batch's URL names only
	// what differs.
	if q := (batch.Options{}).Query().Encode(); q != "" {
		t.Errorf("the zero options as a query: %q, want none", q)
	}
	for _, q := range []string{"credit=sum", "norm=token", "layout=packed", "colour=blue", "groups=x", "min_policy_version=-1"} {
		v, _ := url.ParseQuery(q)
		if _, err := batch.ParseQuery(v); !errors.Is(err, batch.ErrInvalidOptions) {
			t.Errorf("%s: %v", q, err)
		}
	}
}
