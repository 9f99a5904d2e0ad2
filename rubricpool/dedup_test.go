package rubricpool

import (
	"maps"
	"slices"
	"testing"
)

func TestNormalizeRubric(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"  ...  ", ""},
		{"Checks the SOURCE, before answering!", "checks the source before answering"},
		{"multi-hop\treasoning\n", "multi hop reasoning"},
		{"Cites (at least) two sources.", "cites at least two sources"},
		{"don't guess", "don t guess"},
		{"«Verifies» the date", "verifies the date"},
	}
	for _, tt := range tests {
		if got := NormalizeRubric(tt.in); got != tt.want {
			t.Errorf("NormalizeRubric(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestShingles(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"!!", nil},
		{"Verify", []string{"verify"}},
		{"Verify dates.", []string{"verify dates"}},
		{"verify the dates", []string{"verify the dates"}},
		{"Verify the dates, then cite.", []string{"verify the dates", "the dates then", "dates then cite"}},
		// Repeated shingles collapse into a set.
		{"a b c a b c", []string{"a b c", "b c a", "c a b"}},
	}
	for _, tt := range tests {
		got := slices.Sorted(maps.Keys(Shingles(tt.in)))
		want := slices.Sorted(slices.Values(tt.want))
		if !slices.Equal(got, want) {
			t.Errorf("Shingles(%q) = %q, want %q", tt.in, got, want)
		}
	}
}

func TestJaccard(t *testing.T) {
	tests := []struct {
		a, b string
		want float64
	}{
		{"", "", 1},
		{"", "verify the dates", 0},
		{"Verify the dates.", "verify THE dates", 1},
		{"verify dates", "verify dates", 1},
		{"verify dates", "verify sources", 0},
		// {abc, bcd} vs {abc, bce}: 1 shared of 3.
		{"a b c d", "a b c e", 1.0 / 3},
		// {abc,bcd,cde,def} vs {abc,bcd,cde}: 3/4.
		{"a b c d e f", "a b c d e", 0.75},
		// A short text's single shingle never matches a long text's 3-shingles
		// unless it is three words.
		{"a b", "a b c", 0},
	}
	for _, tt := range tests {
		if got := Jaccard(tt.a, tt.b); got != tt.want {
			t.Errorf("Jaccard(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if got := Jaccard(tt.b, tt.a); got != tt.want {
			t.Errorf("Jaccard(%q, %q) = %v, want %v (symmetry)", tt.b, tt.a, got, tt.want)
		}
	}
}

func TestNearDuplicate(t *testing.T) {
	const base = "the answer cites a retrieved passage that contains the final entity"
	tests := []struct {
		a, b      string
		threshold float64
		want      bool
	}{
		{base, base, 1, true},
		{base, "The answer cites a retrieved passage, that contains the final entity!", 0.8, true},
		// 11 words, 9 shingles; changing the last word keeps 8: J = 8/10,
		// exactly at the default threshold.
		{base, "the answer cites a retrieved passage that contains the final name", 0.8, true},
		{base, "the answer cites a retrieved passage that contains the final name", 0.82, false},
		// Exactly at the threshold counts as a duplicate.
		{"a b c d", "a b c e", 1.0 / 3, true},
		{base, "search before you answer", 0.8, false},
	}
	for _, tt := range tests {
		if got := NearDuplicate(tt.a, tt.b, tt.threshold); got != tt.want {
			t.Errorf("NearDuplicate(%q, %q, %v) = %v (J=%v), want %v",
				tt.a, tt.b, tt.threshold, got, Jaccard(tt.a, tt.b), tt.want)
		}
	}
}
