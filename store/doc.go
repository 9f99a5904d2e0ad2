// Package store is patrdb's bbolt-backed file: the schema, keys, value
// encoding, node cache, transactions, format version and integrity check of
// the training state of tree-structured agent RL (PaTR rollouts, ARBOR
// rubric buffers, GRPO advantages, trainer checkpoints).
//
// # On disk
//
// One bbolt file (format 5), 4 KiB pages unless created otherwise
// (Options.PageSize):
//
//	meta                      magic "patrdb\0", format version (u64 BE), writer
//	runs/
//	  <run-id>/               one nested bucket per run
//	    run                   Run record
//	    groups/  step|group   Group        (u64 BE keys, so cursors walk in order)
//	    nodes/   node         Node         (no turns: prefix sharing)
//	    turns/   seq|node     Turn         (seq: the run's turn sequence, in append order)
//	    children/parent|child (empty)      index of the parent pointers
//	    frontier/node         (empty)      exactly the active nodes
//	    adv/     step|group|leaf Advantage
//	    rubrics/ rubric       Rubric
//	    ckpt/    step         Checkpoint
//	    events/  seq          Event        one per mutation, seq = 1, 2, 3, ...
//	    counts/  step         counters     the run's figures (key 0) and each step's
//	    groupids/group|step   (empty)      finds a group's key from its id
//	    scalars/ step         Scalars      the trainer's figures of a step (loss, kl, ...)
//	    replies/ client key   seq (u64 BE) the EvReply event answering that key
//
// The counters (nodes by status, leaves, turns, groups open and closed,
// rewards, zero-variance groups) are kept by every write of a node, group
// or advantage in its own transaction, so RunTx.Summary reads a few small
// records instead of walking the run. A run written before they existed has
// neither bucket: it is summarised by reading its records, and its next
// write transaction (or RunTx.Recount) builds both. Check compares them with
// the records.
//
// The replies index finds the first answer to a keyed write (reply.go),
// which the log holds, without reading the log: a server looks a retried
// request's key up in two point reads, however long the run. A run
// written before it has no replies bucket; the first write transaction
// that looks a key up or records a reply builds it from the log. Check
// holds the index and the log's EvReply events to each other.
//
// Ids (groups, nodes, rubrics, event seqs, turn seqs) come from the
// sequence of the bucket that holds them, so they are allocated in the
// same transaction that writes the record and never reused. A write
// transaction compares each sequence with its bucket's last record when it
// first takes a run (sequences.go): a sequence that fell behind (a damaged
// header) is ErrCorrupt, never an id handed out twice. A transaction that
// follows its handle's own commit of the run takes the sequences and the
// counters as that commit left them (txcarry.go). Run ids are
// RunIDRule's; steps run from 1 to MaxStep.
//
// Every hot bucket grows at its end. A turn is numbered when it is
// appended, however many branches grow at once, and its node records
// where its own turns are as a short list of ranges of those numbers
// (Node.TurnRanges: one per commit that appended to it). A turn rewritten
// after a crash keeps its number, so it is overwritten, never duplicated.
// Buckets written in key order pack their pages full (bbolt FillPercent
// 1.0): a page behind the end is never written again. Node records grow
// as their branch is scored and routed, so node pages are split three
// quarters full, leaving room for that growth instead of splitting again
// (the measurements are in bench/RESULTS.md).
//
// Formats 1 and 2 keyed turns node|index, which scattered concurrent
// branches' appends over the b-tree and left its pages a third full. This
// build opens and reads them as they are, but refuses to write to them
// (ErrNeedsMigration); Migrate copies one into a new file of the current
// format. Formats 3 and 4 are written as they are: a write transaction
// moves the file's format number on (format.go).
//
// # Records
//
// Every value is framed:
//
//	+--------+------------------+-------------------------------+
//	| format | CRC32C (BE, 4 B) | msgpack payload               |
//	| 1 byte | of the payload   | (an array of the fields)      |
//	+--------+------------------+-------------------------------+
//
// The payload is a msgpack array of the record's fields, and the field
// order is the format: records only ever grow at their end, and a reader
// takes the shorter arrays of older formats with the missing fields at
// their zero values. The codecs live in the codec_*.go files, and
// codec_golden_test.go pins the bytes of every record kind. A turn is an
// 8-element array — action, action token ids, action logprobs,
// observation, observation token ids, reward, done, policy version (a
// 9-byte uint64) — whose token ids and logprobs are bin blobs of packed
// little-endian 32-bit words; a group's prompt token ids are packed the
// same way. A node is 21 fields, the last its turn ranges packed as
// uvarint pairs (gap from the previous range's end, count). Format 1
// wrote turns of 7 elements, nodes of 17 and groups of 9; format 2 nodes
// of 20.
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
// A write transaction holds what it writes in memory until it commits, as
// bbolt does: its turns and events are put into their buckets in one pass
// per bucket at the commit, and its frontier changes made once each, or
// as soon as the transaction reads that bucket, so its reads see all its
// writes. Their values are carved from 32 KiB buffers, which a DB keeps
// for the next write transaction (at most 4 MiB of them), with the
// emptied queues (at most four of 16,384 entries, 3 MiB).
//
// Every mutation appends an Event in the same transaction; for the store's
// own kinds its payload is the record after the mutation, so the log alone
// rebuilds the state at any sequence number.
//
// A run that copied its old steps elsewhere may drop them (RunTx.DropSteps,
// drop.go): their records and the events that only they needed are
// deleted, bbolt reuses the pages, and the run record and an EvRunDrop
// event say how far. Its log then starts with gaps up to Run.DroppedSeq.
// DB.Backup writes a consistent copy of the file while writers go on, and
// DB.LoadRun rebuilds a run in another file from its events and turns
// alone (load.go), checked as Check would before it is kept.
package store
