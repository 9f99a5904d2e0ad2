package batchdb

import "slices"

// plan cuts each group's nodes into segments and gives each segment its
// owner: rows are visited in leaf id order within a group, so the first
// row to reach a segment is the one with the smallest leaf id.
func (rd *reader) plan() {
	rd.rowEnd = make([]int, len(rd.rows))
	rd.tokens = make([]int64, len(rd.rows))
	cuts := map[uint64][]int{}
	for lo := 0; lo < len(rd.rows); {
		hi := lo
		for hi < len(rd.rows) && rd.rows[hi].group == rd.rows[lo].group {
			hi++
		}
		clear(cuts)
		for _, rw := range rd.rows[lo:hi] {
			for _, s := range rw.path {
				if s.Count > 0 {
					cuts[s.Node] = append(cuts[s.Node], s.Count)
				}
			}
		}
		for id, c := range cuts {
			slices.Sort(c)
			cuts[id] = slices.Compact(c)
		}
		g := rd.groups[rd.rows[lo].group]
		prompt := len(rd.segs)
		rd.segs = append(rd.segs, seg{group: rd.rows[lo].group, parent: -1, owner: lo, tokens: len(g.PromptTokens)})
		for ri := lo; ri < hi; ri++ {
			prev := prompt
			rd.rowSegs = append(rd.rowSegs, prompt)
			for _, s := range rd.rows[ri].path {
				from := 0
				for _, c := range cuts[s.Node] {
					if c > s.Count {
						break
					}
					k := segKey{s.Node, c}
					si, ok := rd.segAt[k]
					if !ok {
						si = len(rd.segs)
						p := rd.segs[prev]
						tokens, actions := rd.turnTokens(s.Node, from, c)
						rd.segs = append(rd.segs, seg{group: p.group, node: s.Node, from: from, to: c, parent: prev,
							owner: ri, tokens: tokens, actions: actions, depth: p.depth + p.tokens, turn0: p.turn0 + p.to - p.from})
						rd.segAt[k] = si
					}
					rd.rowSegs = append(rd.rowSegs, si)
					prev, from = si, c
				}
			}
			rd.rowEnd[ri] = len(rd.rowSegs)
			last := rd.segs[prev]
			rd.tokens[ri] = int64(last.depth + last.tokens)
		}
		lo = hi
	}
}

// turnTokens counts the tokens, and the action tokens among them, of
// turns [from, to) of node.
func (rd *reader) turnTokens(node uint64, from, to int) (tokens, actions int) {
	at := rd.turnAt[node]
	for _, t := range rd.refs[at+from : at+to] {
		tokens += (len(t.ActionTokens) + len(t.ObservationTokens)) / 4
		actions += len(t.ActionTokens) / 4
	}
	return tokens, actions
}
