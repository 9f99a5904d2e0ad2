package store

// TurnBrief is what routing and outcome rewards read of a turn: its action
// text, env reward and done flag, without the token arrays and the
// observation that make up most of its bytes.
type TurnBrief struct {
	Action string
	Reward float64
	Done   bool
}

// PathBackward hands fn the turns of node id's full path (inherited prefix
// included) from its last turn back to the first, until fn returns false.
// Each value's CRC is checked, but its token arrays and observation are
// skipped, not copied: a writer deciding a prune or a leaf's reward inside
// its transaction does not pay for hundreds of tokens a turn.
func (r *RunTx) PathBackward(id uint64, fn func(TurnBrief) bool) error {
	if r.checking() {
		p, err := r.chk.Sound()
		if err != nil {
			return err
		}
		return p.PathBackward(id, fn)
	}
	segs, err := r.pathSegments(id)
	if err != nil {
		return err
	}
	b, err := r.bucket(bTurns)
	if err != nil {
		return err
	}
	path := r.bpath(bTurns)
	for si := len(segs) - 1; si >= 0; si-- {
		n, err := r.nodeRef(segs[si].node)
		if err != nil {
			return err
		}
		spans, err := r.turnSpans(n, 0, segs[si].count)
		if err != nil {
			return err
		}
		for sp := len(spans) - 1; sp >= 0; sp-- {
			for j := spans[sp].count - 1; j >= 0; j-- {
				k := r.spanKey(n.ID, spans[sp], j)
				raw := b.Get(k)
				if raw == nil {
					return &CorruptError{Bucket: path, Key: k, Reason: "turn missing"}
				}
				t, err := decodeTurnBrief(path, k, raw)
				if err != nil {
					return err
				}
				if !fn(t) {
					return nil
				}
			}
		}
	}
	return nil
}

// decodeTurnBrief reads the fields of a TurnBrief from a framed turn,
// stepping over the others; damage is a *CorruptError as in decodeTurn.
func decodeTurnBrief(bucket string, key, raw []byte) (TurnBrief, error) {
	var t TurnBrief
	payload, err := checkCRC(bucket, key, raw)
	if err != nil {
		return t, err
	}
	m := msgpReader{b: payload}
	if fields := m.arrayLen(); m.err == nil && fields != turnFields && fields != turnFieldsV1 {
		return t, &CorruptError{Bucket: bucket, Key: cloneBytes(key), Reason: "turn: not a 7- or 8-field array"}
	}
	t.Action = m.str()
	for range 4 { // action tokens, logprobs, observation, observation tokens
		m.bytes()
	}
	t.Reward = m.float64()
	t.Done = m.bool()
	if m.err != nil {
		return TurnBrief{}, &CorruptError{Bucket: bucket, Key: cloneBytes(key), Reason: "turn: " + m.err.Error()}
	}
	return t, nil
}
