package store

import "github.com/patrdb/patrdb/model"

// The store's own event kinds and the record each one's payload holds: the
// one table every reader of the log consults — decoding (codec_event.go),
// the check's log cross-check, LoadRun, DropSteps, and above the store
// replay, the API's event views and the CLI's remote source. A kind
// missing here is a kind defined above the store (RunTx.AppendEvent),
// whose payload only its writer decodes.

// recordType is the type of record a store event's payload holds.
type recordType uint8

const (
	recNone recordType = iota // a kind defined above the store
	recRun
	recGroup
	recNode
	recTurns
	recAdvantage
	recRubric
	recCheckpoint
	recReply
	recScalars
)

var eventKinds = [...]struct {
	kind model.EventKind
	rec  recordType
}{
	{model.EvRunCreate, recRun},
	{model.EvRunStatus, recRun},
	{model.EvRunVersion, recRun},
	{model.EvRunDrop, recRun},
	{model.EvGroupOpen, recGroup},
	{model.EvGroupUpdate, recGroup},
	{model.EvGroupClose, recGroup},
	{model.EvNodeAdd, recNode},
	{model.EvTurns, recTurns},
	{model.EvNodeScore, recNode},
	{model.EvNodeRoute, recNode},
	{model.EvNodeStatus, recNode},
	{model.EvNodeReward, recNode},
	{model.EvNodeEnvState, recNode},
	{model.EvAdvantage, recAdvantage},
	{model.EvRubricPut, recRubric},
	{model.EvRubricUpdate, recRubric},
	{model.EvRubricMove, recRubric},
	{model.EvCheckpoint, recCheckpoint},
	{model.EvReply, recReply},
	{model.EvScalars, recScalars},
}

// EventKinds returns the store's own event kinds, those whose payload is
// a record (RecordFor).
func EventKinds() []model.EventKind {
	out := make([]model.EventKind, len(eventKinds))
	for i, k := range eventKinds {
		out[i] = k.kind
	}
	return out
}

// RecordFor returns a new zero record of the type an event of kind k holds
// as its payload — *Run, *Group, *Node, *TurnsPayload (EvTurns),
// *Advantage, *Rubric, *Checkpoint, *Reply or *Scalars, for DecodePayload — or nil
// for a kind defined above the store.
func RecordFor(k model.EventKind) any {
	switch recordOf(k) {
	case recRun:
		return new(model.Run)
	case recGroup:
		return new(model.Group)
	case recNode:
		return new(model.Node)
	case recTurns:
		return new(model.TurnsPayload)
	case recAdvantage:
		return new(model.Advantage)
	case recRubric:
		return new(model.Rubric)
	case recCheckpoint:
		return new(model.Checkpoint)
	case recReply:
		return new(Reply)
	case recScalars:
		return new(model.Scalars)
	}
	return nil
}

// kindSlots finds a kind's place in eventKinds from its length and three
// of its bytes (kindHash), checked against the table's own string, for
// the lookups every event decode and every write makes: a walk of the
// table compared up to 21 strings, many of one length ("node.score",
// "node.route", "group.open"), and was a tenth of a replay's time; a map
// lookup, hashing the whole string, still half of decoding an event's
// head. Slots hold an index, or -1; a collision takes the next slot.
var kindSlots = func() (t [nKindSlots]int8) {
	for i := range t {
		t[i] = -1
	}
	for i, k := range eventKinds {
		h := kindHash(k.kind)
		for t[h] >= 0 {
			h = (h + 1) % len(t)
		}
		t[h] = int8(i)
	}
	return t
}()

// nKindSlots is kindSlots' size, three times the kinds: few collisions.
const nKindSlots = 64

func kindHash[S ~string | ~[]byte](s S) int {
	n := len(s)
	if n == 0 {
		return 0
	}
	return (n*7 + int(s[0]) + 3*int(s[n-1]) + 5*int(s[n/2])) % nKindSlots
}

// kindIndex is kind s's index in eventKinds, or -1 for a kind defined
// above the store.
func kindIndex[S ~string | ~[]byte](s S) int {
	for h := kindHash(s); ; h = (h + 1) % nKindSlots {
		i := kindSlots[h]
		if i < 0 || string(eventKinds[i].kind) == string(s) {
			return int(i)
		}
	}
}

// recordOf is the record type of kind k's payload.
func recordOf(k model.EventKind) recordType {
	if i := kindIndex(k); i >= 0 {
		return eventKinds[i].rec
	}
	return recNone
}

// decodedKind returns the package's own string for kind b when it is in
// the table, so decoding an event allocates none; ok is false for a kind
// defined above the store.
func decodedKind(b []byte) (k model.EventKind, ok bool) {
	if i := kindIndex(b); i >= 0 {
		return eventKinds[i].kind, true
	}
	return "", false
}
