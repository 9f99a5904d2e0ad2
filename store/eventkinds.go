package store

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
	kind EventKind
	rec  recordType
}{
	{EvRunCreate, recRun},
	{EvRunStatus, recRun},
	{EvRunVersion, recRun},
	{EvRunDrop, recRun},
	{EvGroupOpen, recGroup},
	{EvGroupUpdate, recGroup},
	{EvGroupClose, recGroup},
	{EvNodeAdd, recNode},
	{EvTurns, recTurns},
	{EvNodeScore, recNode},
	{EvNodeRoute, recNode},
	{EvNodeStatus, recNode},
	{EvNodeReward, recNode},
	{EvNodeEnvState, recNode},
	{EvAdvantage, recAdvantage},
	{EvRubricPut, recRubric},
	{EvRubricUpdate, recRubric},
	{EvRubricMove, recRubric},
	{EvCheckpoint, recCheckpoint},
	{EvReply, recReply},
	{EvScalars, recScalars},
}

// EventKinds returns the store's own event kinds, those whose payload is
// a record (RecordFor).
func EventKinds() []EventKind {
	out := make([]EventKind, len(eventKinds))
	for i, k := range eventKinds {
		out[i] = k.kind
	}
	return out
}

// RecordFor returns a new zero record of the type an event of kind k holds
// as its payload — *Run, *Group, *Node, *TurnsPayload (EvTurns),
// *Advantage, *Rubric, *Checkpoint, *Reply or *Scalars, for DecodePayload — or nil
// for a kind defined above the store.
func RecordFor(k EventKind) any {
	switch recordOf(k) {
	case recRun:
		return new(Run)
	case recGroup:
		return new(Group)
	case recNode:
		return new(Node)
	case recTurns:
		return new(TurnsPayload)
	case recAdvantage:
		return new(Advantage)
	case recRubric:
		return new(Rubric)
	case recCheckpoint:
		return new(Checkpoint)
	case recReply:
		return new(Reply)
	case recScalars:
		return new(Scalars)
	}
	return nil
}

// recordOf is the record type of kind k's payload.
func recordOf(k EventKind) recordType {
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
func decodedKind(b []byte) (k EventKind, ok bool) {
	for i := range eventKinds {
		if string(eventKinds[i].kind) == string(b) {
			return eventKinds[i].kind, true
		}
	}
	return "", false
}
