package model

// EventKind names a mutation.
type EventKind string

// Event kinds written by the store. Packages above add their own kinds with
// store.RunTx.AppendEvent (e.g. "rubric.judge").
const (
	EvRunCreate    EventKind = "run.create"
	EvRunStatus    EventKind = "run.status"
	EvRunVersion   EventKind = "run.version"
	EvGroupOpen    EventKind = "group.open"
	EvGroupUpdate  EventKind = "group.update"
	EvGroupClose   EventKind = "group.close"
	EvNodeAdd      EventKind = "node.add"
	EvTurns        EventKind = "node.turns"
	EvNodeScore    EventKind = "node.score"
	EvNodeRoute    EventKind = "node.route"
	EvNodeStatus   EventKind = "node.status"
	EvNodeReward   EventKind = "node.reward"
	EvNodeEnvState EventKind = "node.env"
	EvAdvantage    EventKind = "adv.put"
	EvRubricPut    EventKind = "rubric.put"
	EvRubricUpdate EventKind = "rubric.update"
	EvRubricMove   EventKind = "rubric.move"
	EvCheckpoint   EventKind = "ckpt.put"
	// EvRunDrop is the event DropSteps writes: its payload is the run
	// record, with DroppedStep and DroppedSeq set.
	EvRunDrop EventKind = "run.drop"
	// EvScalars is the event PutScalars writes: its payload is the step's
	// Scalars record after the write (the values given merged into the
	// ones the step had).
	EvScalars EventKind = "scalars.put"
	// EvReply is the event that records a server's reply to a keyed
	// request. (The kind keeps the name the HTTP server gave it when it
	// kept replies itself.)
	EvReply EventKind = "server.reply"
)

// Event is one entry of a run's log. For the store's own kinds Payload is
// the msgpack of the record after the mutation (a Node, Group, Rubric, ...;
// for EvTurns a TurnsPayload), so a reader can rebuild any record as it was
// after any event; see DecodePayload.
type Event struct {
	_msgpack struct{}  `msgpack:",as_array"`
	Seq      uint64    `json:"seq"`
	Time     int64     `json:"created_at"` // unix nanoseconds
	Kind     EventKind `json:"kind"`
	Step     uint64    `json:"step,omitempty"`
	Group    uint64    `json:"group,omitempty"`
	Node     uint64    `json:"node,omitempty"`
	Rubric   uint64    `json:"rubric,omitempty"`
	Payload  []byte    `json:"payload,omitempty"`
}

// TurnsPayload is the payload of an EvTurns event: the range of own-turn
// indexes written, and the node's turn count and policy-version range
// after the write (format 2 added the versions; format 1 wrote 3 fields),
// and the turn sequence number of the first turn past the node's old count
// (format 3; 0 when the write only rewrote turns, or in older files), and
// the oldest policy version among the turns written (format 4; 0 when none
// says): with the run's version at the event's place in the log, how stale
// they were when sampled.
type TurnsPayload struct {
	_msgpack   struct{} `msgpack:",as_array"`
	From       int      `json:"from"`
	Count      int      `json:"count"`
	Turns      int      `json:"turns"`
	MinVersion uint64   `json:"min_policy_version,omitempty"`
	MaxVersion uint64   `json:"max_policy_version,omitempty"`
	Seq        uint64   `json:"-"` // where the new turns are stored: not part of the JSON vocabulary
	Oldest     uint64   `json:"oldest_policy_version,omitempty"`
}

// Apply sets what the payload records on the node it was written for (the
// node as it was before the write).
func (p *TurnsPayload) Apply(n *Node) {
	if p.Seq != 0 && p.Turns > n.Turns {
		n.TurnRanges = n.TurnRanges.Extend(p.Seq, p.Turns-n.Turns)
	}
	n.Turns, n.MinVersion, n.MaxVersion = p.Turns, p.MinVersion, p.MaxVersion
}
