package batch

import "slices"

// plan cuts each group's nodes into segments and gives each segment its
// owner: rows are visited in leaf id order within a group, so the first
// row to reach a segment is the one with the smallest leaf id.
func (bd *builder) plan() {
	bd.rowEnd = make([]int, len(bd.rows))
	bd.tokens = make([]int64, len(bd.rows))
	cuts := map[uint64][]int{}
	for lo := 0; lo < len(bd.rows); {
		hi := lo
		for hi < len(bd.rows) && bd.rows[hi].leaf.Group == bd.rows[lo].leaf.Group {
			hi++
		}
		clear(cuts)
		for _, rw := range bd.rows[lo:hi] {
			for _, s := range rw.leaf.Path {
				if s.Count > 0 {
					cuts[s.Node] = append(cuts[s.Node], s.Count)
				}
			}
		}
		for id, c := range cuts {
			slices.Sort(c)
			cuts[id] = slices.Compact(c)
		}
		g := bd.src.Groups[bd.rows[lo].leaf.Group]
		prompt := len(bd.segs)
		bd.segs = append(bd.segs, seg{group: bd.rows[lo].leaf.Group, parent: -1, owner: lo, tokens: len(g.PromptTokens)})
		for ri := lo; ri < hi; ri++ {
			prev := prompt
			bd.rowSegs = append(bd.rowSegs, prompt)
			for _, s := range bd.rows[ri].leaf.Path {
				from := 0
				for _, c := range cuts[s.Node] {
					if c > s.Count {
						break
					}
					k := segKey{s.Node, c}
					si, ok := bd.segAt[k]
					if !ok {
						si = len(bd.segs)
						p := bd.segs[prev]
						tokens, actions := bd.turnTokens(s.Node, from, c)
						bd.segs = append(bd.segs, seg{group: p.group, node: s.Node, from: from, to: c, parent: prev,
							owner: ri, tokens: tokens, actions: actions, depth: p.depth + p.tokens, turn0: p.turn0 + p.to - p.from})
						bd.segAt[k] = si
					}
					bd.rowSegs = append(bd.rowSegs, si)
					prev, from = si, c
				}
			}
			bd.rowEnd[ri] = len(bd.rowSegs)
			last := bd.segs[prev]
			bd.tokens[ri] = int64(last.depth + last.tokens)
		}
		lo = hi
	}
}

// turnTokens counts the tokens, and the action tokens among them, of
// turns [from, to) of node.
func (bd *builder) turnTokens(node uint64, from, to int) (tokens, actions int) {
	for _, t := range bd.turns(node, from, to) {
		tokens += (len(t.ActionTokens) + len(t.ObservationTokens)) / 4
		actions += len(t.ActionTokens) / 4
	}
	return tokens, actions
}
