package store

import "github.com/patrdb/patrdb/model"

// The node record: a 21-element msgpack array in this order — id, step,
// group, parent, ordinal, fork, base, depth, status, turns, scores
// (arrays of interval, turn, value), decisions (arrays of interval,
// action, score, reference, delta, rule, children), has reward, reward,
// env state, worker, attempt, error, min and max policy version, turn
// ranges (TurnRanges' packed bin). Integers take their shortest form.
// Format 1 wrote the first 17 fields, format 2 the first 20.
const (
	nodeFields     = 21
	nodeFieldsV2   = 20
	nodeFieldsV1   = 17
	scoreFields    = 3
	decisionFields = 7
)

// encodeNode frames n's record. The bytes are those msgpack/v5's encoder
// writes for the struct (msgp_test.go checks it), built without reflection.
func encodeNode(n *model.Node) []byte {
	return frame(appendNodeMsgp(make([]byte, headerLen, headerLen+nodeMsgpSizeHint(n)), n))
}

// nodeMsgpSizeHint is about the size of n's record (its payload): a
// buffer's capacity, not a bound.
func nodeMsgpSizeHint(n *model.Node) int {
	return 96 + len(n.EnvState) + len(n.Worker) + len(n.Error) +
		16*len(n.Scores) + 48*len(n.Decisions) + turnRangesLen(n.TurnRanges)
}

func appendNodeMsgp(b []byte, n *model.Node) []byte {
	b = appendArrayLen(b, nodeFields)
	b = appendUint(b, n.ID)
	b = appendUint(b, n.Step)
	b = appendUint(b, n.Group)
	b = appendUint(b, n.Parent)
	b = appendInt(b, int64(n.Ordinal))
	b = appendInt(b, int64(n.Fork))
	b = appendInt(b, int64(n.Base))
	b = appendInt(b, int64(n.Depth))
	b = appendStr(b, string(n.Status))
	b = appendInt(b, int64(n.Turns))
	if n.Scores == nil {
		b = append(b, 0xc0)
	} else {
		b = appendArrayLen(b, len(n.Scores))
		for i := range n.Scores {
			s := &n.Scores[i] // not a copy of the element
			b = appendArrayLen(b, scoreFields)
			b = appendInt(b, int64(s.Interval))
			b = appendInt(b, int64(s.Turn))
			b = appendFloat64(b, s.Value)
		}
	}
	if n.Decisions == nil {
		b = append(b, 0xc0)
	} else {
		b = appendArrayLen(b, len(n.Decisions))
		for i := range n.Decisions {
			d := &n.Decisions[i] // not a copy of the element (two strings, three floats)
			b = appendArrayLen(b, decisionFields)
			b = appendInt(b, int64(d.Interval))
			b = appendStr(b, string(d.Action))
			b = appendFloat64(b, d.Score)
			b = appendFloat64(b, d.Reference)
			b = appendFloat64(b, d.Delta)
			b = appendStr(b, d.Rule)
			b = appendInt(b, int64(d.Children))
		}
	}
	b = appendBool(b, n.HasReward)
	b = appendFloat64(b, n.Reward)
	b = appendBin(b, n.EnvState)
	b = appendStr(b, n.Worker)
	b = appendInt(b, int64(n.Attempt))
	b = appendStr(b, n.Error)
	b = appendUint(b, n.MinVersion)
	b = appendUint(b, n.MaxVersion)
	if len(n.TurnRanges) == 0 {
		return append(b, 0xc0)
	}
	return packTurnRanges(appendBinHeader(b, turnRangesLen(n.TurnRanges)), n.TurnRanges)
}

// internStatus and internAction return the package's own strings for the
// values a node record holds, so decoding them allocates nothing.
func internStatus(b []byte) model.NodeStatus {
	switch string(b) {
	case string(model.NodeActive):
		return model.NodeActive
	case string(model.NodeExpanded):
		return model.NodeExpanded
	case string(model.NodeCompleted):
		return model.NodeCompleted
	case string(model.NodePruned):
		return model.NodePruned
	case string(model.NodeTruncated):
		return model.NodeTruncated
	case string(model.NodeFailed):
		return model.NodeFailed
	}
	return model.NodeStatus(b)
}

func internAction(b []byte) model.Action {
	switch model.Action(b) {
	case model.ActionExpand:
		return model.ActionExpand
	case model.ActionSurvive:
		return model.ActionSurvive
	case model.ActionPrune:
		return model.ActionPrune
	}
	return model.Action(b)
}

func decodeNodeMsgp(payload []byte, n *model.Node) bool {
	m := msgpReader{b: payload}
	fields := m.arrayLen()
	if fields != nodeFields && fields != nodeFieldsV2 && fields != nodeFieldsV1 {
		return false
	}
	n.ID = m.uint64()
	n.Step = m.uint64()
	n.Group = m.uint64()
	n.Parent = m.uint64()
	n.Ordinal = m.int()
	n.Fork = m.int()
	n.Base = m.int()
	n.Depth = m.int()
	status, _ := m.bytes()
	n.Status = internStatus(status)
	n.Turns = m.int()
	var ok bool
	if n.Scores, ok = decodeSlice(&m, scoreFields, func(s *model.Score) {
		s.Interval = m.int()
		s.Turn = m.int()
		s.Value = m.float64()
	}); !ok {
		return false
	}
	if n.Decisions, ok = decodeSlice(&m, decisionFields, func(d *model.Decision) {
		d.Interval = m.int()
		action, _ := m.bytes()
		d.Action = internAction(action)
		d.Score = m.float64()
		d.Reference = m.float64()
		d.Delta = m.float64()
		d.Rule = m.str()
		d.Children = m.int()
	}); !ok {
		return false
	}
	n.HasReward = m.bool()
	n.Reward = m.float64()
	n.EnvState = m.bin()
	n.Worker = m.str()
	n.Attempt = m.int()
	if fields >= nodeFieldsV2 {
		n.Error = m.str()
		n.MinVersion = m.uint64()
		n.MaxVersion = m.uint64()
	}
	if fields == nodeFields {
		ranges, isNil := m.bytes()
		if m.err != nil || (!isNil && len(ranges) == 0) {
			return false
		}
		var err error
		if n.TurnRanges, err = unpackTurnRanges(ranges); err != nil {
			return false
		}
	}
	return m.err == nil
}

// decodeSlice reads an array of as_array structs of fields fields each, as
// msgpack/v5 fills a slice field: nil stays nil, an empty array is empty
// and non-nil. ok is false for anything else (an element that is not an
// array of exactly fields fields, damage), which sends the whole record to
// msgpack/v5.
func decodeSlice[T any](m *msgpReader, fields int, elem func(*T)) (out []T, ok bool) {
	n := m.arrayLen()
	switch {
	case m.err != nil:
		return nil, false
	case n == -1:
		return nil, true
	case n < 0 || n > len(m.b)-m.pos: // every element takes a byte at least
		return nil, false
	}
	out = make([]T, n)
	for i := range out {
		if m.arrayLen() != fields || m.err != nil {
			return nil, false
		}
		elem(&out[i])
	}
	return out, m.err == nil
}
