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

// recordOf is the record type of kind k's payload.
func recordOf(k model.EventKind) recordType {
	for i := range eventKinds {
		if eventKinds[i].kind == k {
			return eventKinds[i].rec
		}
	}
	return recNone
}

// decodedKind returns the package's own string for kind b when it is in
// the table, so decoding an event allocates none; ok is false for a kind
// defined above the store. A linear walk: most kinds differ from b in
// length, so a miss costs a compare of lengths.
func decodedKind(b []byte) (k model.EventKind, ok bool) {
	for i := range eventKinds {
		if string(eventKinds[i].kind) == string(b) {
			return eventKinds[i].kind, true
		}
	}
	return "", false
}
