package rubricpool

// PairSet is ARBOR's sparse comparison plan for one group. Given trajectory
// indices sorted by base reward, it returns each neighbour pair (order[i],
// order[i+1]) — the comparisons that resolve near-ties the outcome cannot —
// followed by the diameter pair (order[0], order[n-1]), which anchors the two
// ends of the ranking to each other. The diameter is omitted when it already
// is a neighbour pair, so a group of two gets one pair and a group of n ≥ 3
// exactly n: O(|G|) judge calls instead of O(|G|²).
// Fewer than two trajectories give no pairs (nil).
func PairSet(order []int) [][2]int {
	n := len(order)
	if n < 2 {
		return nil
	}
	pairs := make([][2]int, 0, n)
	for i := 0; i+1 < n; i++ {
		pairs = append(pairs, [2]int{order[i], order[i+1]})
	}
	if n > 2 {
		pairs = append(pairs, [2]int{order[0], order[n-1]})
	}
	return pairs
}
