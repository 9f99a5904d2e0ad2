package rubricpool

import (
	"math"
	"testing"
)

func TestNormalizeAnswer(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"", ""},
		{"   ", ""},
		{"The Eiffel Tower", "eiffel tower"},
		{"an apple a day", "apple day"},
		{"A", ""},
		{"the the the", ""},
		// Articles only as whole words.
		{"Theater anarchy abandon", "theater anarchy abandon"},
		// Punctuation is deleted, not turned into a space.
		{"don't", "dont"},
		{"U.S.A.", "usa"},
		{"New-York, (NY)!", "newyork ny"},
		// Deleting punctuation can expose an article: "(the)" -> "the" -> "".
		{"(the) end", "end"},
		// Tabs and newlines collapse.
		{"  Paris\t\n France  ", "paris france"},
		// Unicode punctuation is kept, as in the reference script, but is a
		// word boundary for the article rule.
		{"“Hamlet”", "“hamlet”"},
		{"the’s", "’s"},
		{"Ünïcödé ÉTÉ", "ünïcödé été"},
		{"1,000 km", "1000 km"},
	}
	for _, tt := range tests {
		if got := NormalizeAnswer(tt.in); got != tt.want {
			t.Errorf("NormalizeAnswer(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestTokenF1(t *testing.T) {
	tests := []struct {
		name       string
		pred, gold string
		want       float64
	}{
		{"exact", "Barack Obama", "Barack Obama", 1},
		{"case and article", "the barack obama", "Barack Obama.", 1},
		{"both empty", "", "", 1},
		{"both only articles", "the", "a an", 1},
		{"empty prediction", "", "Paris", 0},
		{"empty gold", "Paris", "", 0},
		{"prediction normalises to empty", "the!", "Paris", 0},
		{"no overlap", "London", "Paris", 0},
		// P = 1/2, R = 1: F1 = 2/3.
		{"extra token", "Paris France", "Paris", 2.0 / 3},
		// P = 1, R = 1/3: F1 = 0.5.
		{"missing tokens", "obama", "barack hussein obama", 0.5},
		// Multiset: the prediction's second x has no partner in gold.
		// pred {x, x, y} gold {x, z}: common 1, P=1/3, R=1/2, F1=0.4.
		{"multiset overlap", "x x y", "x z", 0.4},
		// Repeated tokens matched up to the smaller count: common 2 of 3/2.
		{"repeats", "new new york", "new new", 0.8},
		{"order does not matter", "york new", "new york", 1},
		{"punctuation inside", "1,000", "1000", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := TokenF1(tt.pred, tt.gold)
			if math.Abs(got-tt.want) > 1e-15 {
				t.Errorf("TokenF1(%q, %q) = %v, want %v", tt.pred, tt.gold, got, tt.want)
			}
		})
	}
}

func TestTokenF1Symmetric(t *testing.T) {
	pairs := [][2]string{
		{"Paris France", "Paris"},
		{"x x y", "x z"},
		{"", "a"},
		{"the cat sat on the mat", "a cat on a hat"},
	}
	for _, p := range pairs {
		if a, b := TokenF1(p[0], p[1]), TokenF1(p[1], p[0]); a != b {
			t.Errorf("TokenF1 not symmetric for %q: %v vs %v", p, a, b)
		}
	}
}
