// Package store is patrdb's bbolt-backed file: the schema, keys, value
// encoding, node cache, transactions, format version and integrity check of
// the training state of tree-structured agent RL (PaTR rollouts, ARBOR
// rubric buffers, GRPO advantages, trainer checkpoints).
//
// # On disk
//
// One bbolt file, page size 16 KiB unless created otherwise:
//
//	meta                      magic "patrdb\0", format version (u64 BE), writer
//	runs/
//	  <run-id>/               one nested bucket per run
//	    run                   Run record
//	    groups/  step|group   Group        (u64 BE keys, so cursors walk in order)
//	    nodes/   node         Node         (no turns: prefix sharing)
//	    turns/   node|index   Turn         (index = position among the node's own turns)
//	    children/parent|child (empty)      index of the parent pointers
//	    frontier/node         (empty)      exactly the active nodes
//	    adv/     step|group|leaf Advantage
//	    rubrics/ rubric       Rubric
//	    ckpt/    step         Checkpoint
//	    events/  seq          Event        one per mutation, seq = 1, 2, 3, ...
//	    counts/  step         counters     the run's figures (key 0) and each step's
//	    groupids/group|step   (empty)      finds a group's key from its id
//
// The counters (nodes by status, leaves, turns, groups open and closed,
// rewards, zero-variance groups) are kept by every write of a node, group
// or advantage in its own transaction, so RunTx.Summary reads a few small
// records instead of walking the run. A run written before they existed has
// neither bucket: it is summarised by reading its records, and its next
// write transaction (or RunTx.Recount) builds both. Check compares them with
// the records.
//
// Ids (groups, nodes, rubrics, event seqs) come from the sequence of the
// bucket that holds them, so they are allocated in the same transaction that
// writes the record and never reused.
//
// Every value is framed:
//
//	+--------+------------------+-------------------------------+
//	| format | CRC32C (BE, 4 B) | msgpack payload               |
//	| 1 byte | of the payload   | (array-encoded struct)        |
//	+--------+------------------+-------------------------------+
//
// A turn's payload is an 8-element array — action, action token ids, action
// logprobs, observation, observation token ids, reward, done, policy
// version (a 9-byte uint64) — whose token ids and logprobs are bin blobs of
// packed little-endian 32-bit words; a group's prompt token ids are packed
// the same way. Records only ever grow at their end: format 1 wrote turns
// of 7 elements, nodes of 17 and groups of 9, and this build reads both
// (a format-1 file is read as it is; its first write stamps format 2).
//
// Every turn keeps one rule (RunTx.AppendTurns and EncodeTurns refuse the
// rest with ErrInvalid): text is valid UTF-8, the reward is finite, and
// logprobs are either absent or one finite value <= 0 per action token.
// Group text, node workers and failure reasons must be valid UTF-8 too.
//
// A value that fails its CRC
// or does not decode is reported as ErrCorrupt, wrapped in a *CorruptError
// naming bucket and key: bbolt checksums only its meta pages.
//
// # Prefix sharing
//
// A node stores only its own turns; its trajectory is each ancestor's first
// Fork turns followed by its own (RunTx.Trajectory). Node records are small
// and served from an LRU, so walking the parents costs little.
//
// # Transactions, concurrency and lifetime
//
// One process owns the file (bbolt's flock); a second one waits
// Options.Timeout and gets ErrTimeout. Within the process, DB.Update runs one
// read-write transaction at a time and DB.View any number of read-only ones
// over consistent snapshots. A *Tx and the *RunTx handles obtained from it
// are valid only for the life of the transaction; records returned by their
// methods are copies and stay valid afterwards.
//
// Every write method validates its input before writing anything. A failed
// write poisons the transaction: Update rolls it back and returns that error
// even if the function ignored it, so bad input never half-writes. When
// Update returns nil the data is fsynced (unless Options.NoSync).
//
// Every mutation appends an Event in the same transaction; for the store's
// own kinds its payload is the record after the mutation, so the log alone
// rebuilds the state at any sequence number.
package store
