package batch

// The loss coefficients of the package documentation, computed once for
// the reader and Expand.

// RowWeight is w_r, the factor of every token loss of a row that trains n of
// the batch's tokens (tokens in all rows, rows training any): 1/tokens
// for token-mean, 1/(rows·n) for seq-mean-token-mean, 0 when there is
// nothing to divide.
func RowWeight(norm Norm, tokens, rows, n int64) float64 {
	switch {
	case n == 0:
		return 0
	case norm == SeqMeanTokenMean:
		return 1 / (float64(rows) * float64(n))
	}
	return 1 / float64(tokens)
}

// SplitAdvantage is A⁺ = max(a, 0) and A⁻ = max(−a, 0) of an advantage (never a
// negative zero).
func SplitAdvantage(a float32) (pos, neg float64) {
	switch {
	case a > 0:
		return float64(a), 0
	case a < 0:
		return 0, -float64(a)
	}
	return 0, 0
}

// Coefs are coef_pos and coef_neg of one row's token trained with advantage a
// at weight w.
func Coefs(w float64, a float32) (pos, neg float32) {
	p, n := SplitAdvantage(a)
	return float32(w * p), float32(w * n)
}
