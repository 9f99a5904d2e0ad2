package rubricpool

import (
	"strings"
	"unicode"
)

// squadPunct is Python's string.punctuation, the set the SQuAD evaluation
// script deletes. It is ASCII only on purpose: scores must match the
// reference script (and the papers' numbers), which keeps curly quotes and
// other Unicode punctuation as part of the tokens.
const squadPunct = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"

// NormalizeAnswer applies the SQuAD normalisation: lower-case, delete ASCII
// punctuation, replace the articles a/an/the with a space, and collapse
// white space to single spaces with none at either end.
func NormalizeAnswer(s string) string {
	return strings.Join(answerTokens(s), " ")
}

// answerTokens returns the tokens of the normalised answer.
func answerTokens(s string) []string {
	s = strings.ToLower(s)
	// Punctuation is deleted, not replaced by a space, as in SQuAD:
	// "don't" becomes "dont" and "u.s." becomes "us".
	s = strings.Map(func(r rune) rune {
		if r < 0x80 && strings.ContainsRune(squadPunct, r) {
			return -1
		}
		return r
	}, s)
	s = removeArticles(s)
	return strings.Fields(s)
}

// isWordRune approximates Python's Unicode \w (str.isalnum() or '_'), which
// is what the \b in SQuAD's article regex tests. '_' is already deleted as
// punctuation by the time this runs, but keeping it makes the intent exact.
func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsNumber(r) || r == '_'
}

// removeArticles is re.sub(r'\b(a|an|the)\b', ' ', s): a maximal run of word
// runes equal to a, an or the becomes a single space. Working on word runs
// rather than whitespace tokens keeps the reference behaviour for text such
// as "the’s" (the curly apostrophe is not punctuation to SQuAD, but it is a
// word boundary, so "the" is removed).
func removeArticles(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	rs := []rune(s)
	for i := 0; i < len(rs); {
		if !isWordRune(rs[i]) {
			b.WriteRune(rs[i])
			i++
			continue
		}
		j := i
		for j < len(rs) && isWordRune(rs[j]) {
			j++
		}
		switch w := string(rs[i:j]); w {
		case "a", "an", "the":
			b.WriteByte(' ')
		default:
			b.WriteString(w)
		}
		i = j
	}
	return b.String()
}

// TokenF1 is the SQuAD token-level F1 of prediction against gold: precision
// and recall over the multiset of tokens the two normalised answers share,
// F1 = 2PR/(P+R). If both normalise to nothing the answers agree (1); if
// exactly one does, or they share no token, the score is 0.
func TokenF1(prediction, gold string) float64 {
	pred := answerTokens(prediction)
	ref := answerTokens(gold)
	if len(pred) == 0 || len(ref) == 0 {
		if len(pred) == len(ref) {
			return 1
		}
		return 0
	}
	counts := make(map[string]int, len(ref))
	for _, t := range ref {
		counts[t]++
	}
	common := 0
	for _, t := range pred {
		if counts[t] > 0 {
			counts[t]--
			common++
		}
	}
	if common == 0 {
		return 0
	}
	p := float64(common) / float64(len(pred))
	r := float64(common) / float64(len(ref))
	return 2 * p * r / (p + r)
}
