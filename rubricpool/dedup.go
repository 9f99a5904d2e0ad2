package rubricpool

import (
	"strings"
	"unicode"
)

// NormalizeRubric is the text form near-duplicate detection compares:
// lower-case, every punctuation rune turned into a space, white space
// collapsed. Unlike NormalizeAnswer, punctuation becomes a space rather than
// vanishing, so "multi-hop" and "multi hop" compare equal; articles are kept
// because in a short rubric they are part of its wording, and dropping them
// would only inflate similarity.
func NormalizeRubric(text string) string {
	return strings.Join(rubricWords(text), " ")
}

func rubricWords(text string) []string {
	text = strings.Map(func(r rune) rune {
		if unicode.IsPunct(r) {
			return ' '
		}
		return unicode.ToLower(r)
	}, text)
	return strings.Fields(text)
}

// Shingles returns the word 3-shingles of the normalised text, each shingle
// its three words joined by single spaces. A text of one or two words yields
// one shingle, the whole normalised text, so short rubrics still compare; a
// text that normalises to nothing yields the empty set.
func Shingles(text string) map[string]struct{} {
	words := rubricWords(text)
	set := make(map[string]struct{})
	switch {
	case len(words) == 0:
	case len(words) < 3:
		set[strings.Join(words, " ")] = struct{}{}
	default:
		for i := 0; i+3 <= len(words); i++ {
			set[words[i]+" "+words[i+1]+" "+words[i+2]] = struct{}{}
		}
	}
	return set
}

// Jaccard is |A∩B| / |A∪B| over the word 3-shingles of a and b. Two texts
// that both normalise to nothing are identical (1); one empty text against a
// non-empty one shares nothing (0).
func Jaccard(a, b string) float64 {
	sa, sb := Shingles(a), Shingles(b)
	if len(sa) == 0 && len(sb) == 0 {
		return 1
	}
	if len(sa) > len(sb) {
		sa, sb = sb, sa
	}
	inter := 0
	for s := range sa {
		if _, ok := sb[s]; ok {
			inter++
		}
	}
	return float64(inter) / float64(len(sa)+len(sb)-inter)
}

// NearDuplicate reports whether a and b are near-duplicates: Jaccard(a, b) >=
// threshold. The comparison is inclusive so a threshold of 1 means "same
// shingle set", not "never".
func NearDuplicate(a, b string, threshold float64) bool {
	return Jaccard(a, b) >= threshold
}
