package store

// Hand-written decoders for the records replay reads by the million:
// events (RunTx.Events), nodes (the payload of every node event, and every
// node-cache miss), the payload of every EvTurns event, and advantages (one
// per row of every training batch). Each one parses only the canonical form the store
// writes — the record's as_array msgpack, every field present — and leaves
// every other input to msgpack/v5, which then decides exactly as it always
// did: the other shapes it accepts (nil, an empty array, a map of field
// names) and the error for damage. So the fast path changes no result, only
// the time (msgp_test.go checks it against msgpack/v5 on damaged and random
// bytes).

import "github.com/vmihailenco/msgpack/v5"

// decodeFast fills v from payload and reports true when v is a record with
// a hand-written decoder and payload is in canonical form; otherwise it
// leaves v untouched and reports false.
func decodeFast(payload []byte, v any) bool {
	switch p := v.(type) {
	case *Event:
		var e Event
		if p == nil || !decodeEventMsgp(payload, &e) {
			return false
		}
		*p = e
		return true
	case *Node:
		var n Node
		if p == nil || !decodeNodeMsgp(payload, &n) {
			return false
		}
		*p = n
		return true
	case *Advantage:
		var a Advantage
		if p == nil || !decodeAdvantageMsgp(payload, &a) {
			return false
		}
		*p = a
		return true
	case *TurnsPayload:
		m := msgpReader{b: payload}
		fields := m.arrayLen()
		if p == nil || (fields != turnsPayloadFields && fields != turnsPayloadFieldsV1) {
			return false
		}
		tp := TurnsPayload{From: m.int(), Count: m.int(), Turns: m.int()}
		if fields == turnsPayloadFields {
			tp.MinVersion, tp.MaxVersion = m.uint64(), m.uint64()
		}
		if m.err != nil {
			return false
		}
		*p = tp
		return true
	}
	return false
}

const (
	eventFields    = 8
	nodeFields     = 20 // format 2; format 1 wrote 17 (no Error, MinVersion, MaxVersion)
	nodeFieldsV1   = 17
	scoreFields    = 3
	decisionFields = 7

	turnsPayloadFields   = 5
	turnsPayloadFieldsV1 = 3
	advantageFields      = 13
)

// storeEventKinds interns the kinds the store writes, so decoding one
// allocates no string. A kind missing here still decodes (into a fresh
// string).
var storeEventKinds = func() map[string]EventKind {
	m := map[string]EventKind{}
	for _, k := range []EventKind{EvRunCreate, EvRunStatus, EvGroupOpen, EvGroupUpdate, EvGroupClose,
		EvNodeAdd, EvTurns, EvNodeScore, EvNodeRoute, EvNodeStatus, EvNodeReward, EvNodeEnvState,
		EvAdvantage, EvRubricPut, EvRubricUpdate, EvRubricMove, EvCheckpoint} {
		m[string(k)] = k
	}
	return m
}()

// decodeEvent is decodeValue for an event, without making e escape to the
// heap (an interface argument would): RunTx.Events decodes one per key.
func decodeEvent(bucket string, key, raw []byte, e *Event) error {
	payload, err := checkCRC(bucket, key, raw)
	if err != nil {
		return err
	}
	if decodeEventMsgp(payload, e) {
		return nil
	}
	*e = Event{}
	if !msgpackFits(payload) {
		return errLengthExceeds(bucket, key)
	}
	slow := new(Event)
	if err := msgpack.Unmarshal(payload, slow); err != nil {
		return &CorruptError{Bucket: bucket, Key: cloneBytes(key), Reason: "decode: " + err.Error()}
	}
	*e = *slow
	return nil
}

func decodeEventMsgp(payload []byte, e *Event) bool {
	m := msgpReader{b: payload}
	if m.arrayLen() != eventFields {
		return false
	}
	e.Seq = m.uint64()
	e.Time = m.int64()
	kind, _ := m.bytes()
	if k, ok := storeEventKinds[string(kind)]; ok {
		e.Kind = k
	} else {
		e.Kind = EventKind(kind)
	}
	e.Step = m.uint64()
	e.Group = m.uint64()
	e.Node = m.uint64()
	e.Rubric = m.uint64()
	e.Payload = m.bin()
	return m.err == nil
}

// internStatus and internAction return the package's own strings for the
// values a node record holds, so decoding them allocates nothing.
func internStatus(b []byte) NodeStatus {
	switch string(b) {
	case string(NodeActive):
		return NodeActive
	case string(NodeExpanded):
		return NodeExpanded
	case string(NodeCompleted):
		return NodeCompleted
	case string(NodePruned):
		return NodePruned
	case string(NodeTruncated):
		return NodeTruncated
	case string(NodeFailed):
		return NodeFailed
	}
	return NodeStatus(b)
}

func internAction(b []byte) string {
	switch string(b) {
	case ActionExpand:
		return ActionExpand
	case ActionSurvive:
		return ActionSurvive
	case ActionPrune:
		return ActionPrune
	}
	return string(b)
}

func decodeNodeMsgp(payload []byte, n *Node) bool {
	m := msgpReader{b: payload}
	fields := m.arrayLen()
	if fields != nodeFields && fields != nodeFieldsV1 {
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
	if n.Scores, ok = decodeSlice(&m, scoreFields, func(s *Score) {
		s.Interval = m.int()
		s.Turn = m.int()
		s.Value = m.float64()
	}); !ok {
		return false
	}
	if n.Decisions, ok = decodeSlice(&m, decisionFields, func(d *Decision) {
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
	if fields == nodeFields {
		n.Error = m.str()
		n.MinVersion = m.uint64()
		n.MaxVersion = m.uint64()
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

func decodeAdvantageMsgp(payload []byte, a *Advantage) bool {
	m := msgpReader{b: payload}
	if m.arrayLen() != advantageFields {
		return false
	}
	a.Step, a.Group, a.Leaf = m.uint64(), m.uint64(), m.uint64()
	a.Outcome, a.RubricScore, a.Lambda, a.Total = m.float64(), m.float64(), m.float64(), m.float64()
	a.Mean, a.Std, a.Advantage = m.float64(), m.float64(), m.float64()
	switch n := m.arrayLen(); {
	case m.err != nil:
		return false
	case n == -1:
		a.Rubrics = nil
	case n < 0 || n > len(m.b)-m.pos: // every id takes a byte at least
		return false
	default:
		a.Rubrics = make([]uint64, n)
		for i := range a.Rubrics {
			a.Rubrics[i] = m.uint64()
		}
	}
	a.ZeroVariance = m.bool()
	a.ZeroVarianceAfter = m.bool()
	return m.err == nil
}
