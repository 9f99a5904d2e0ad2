// Package replay reads a run's event log back: typed streaming iteration,
// the run's state as it stood after any event, counterfactual ("what-if")
// routing over the recorded process scores, and run statistics. Two
// packages under it build on those reads: replay/export (the JSONL and RL
// files; the Parquet lake is package lake's) and replay/view (the web
// viewer's read models).
//
// It imports store, and tree only for the pure routing function and its
// Config; it never writes to the store.
//
// # Iterate and state
//
// Every mutation writes one event in its own transaction, and for the
// store's own kinds the payload is the record after the mutation, so
// Iterate decodes each event into that record and StateAt folds them into
// the groups, nodes (statuses, scores, decisions, turn counts), frontier,
// rubric pools, advantages and checkpoints as they stood after event N. Two
// facts are not carried by payloads and follow from the node.add events
// instead: a group's root list (AddNode rewrites the group without an event)
// and the parent → child index.
//
// # What-if routing
//
// WhatIf replays each group interval by interval with tree.Route under
// another Config. The recorded branch set at an interval is the nodes with
// a Score for it. The analysis follows only the part of the tree the run
// sampled:
//
//   - Every root branch is reached (B0 is not a what-if key).
//   - At each interval, the reached branches that are still active in the
//     counterfactual and have a score there are routed with their recorded
//     scores. The result is compared with the recorded decision.
//   - An expansion the run also made reaches the first min(new, recorded)
//     recorded children by ordinal; children beyond the recorded ones are
//     unobserved. An expansion the run did not make creates only unobserved
//     children. A branch that now survives where the run pruned or expanded
//     it continues unobserved (one unobserved branch); its recorded children
//     are not reached. A branch pruned or expanded where the run let it
//     survive stops at the turn it was scored at.
//   - Unobserved branches are counted, never invented: they have no scores,
//     so they cannot be routed, and every later interval of their group is
//     marked Partial, since they might have changed the reference or taken
//     an expansion slot there.
//   - Env steps under the config are the turns it would still have sampled
//     on reached recorded nodes: all of a node's own turns, except for a
//     node stopped early, which counts the turns up to its score.
//
// RepeatRun (identical actions in a row) is not recorded with a score. It
// does not need to be: RepeatPrune is not a what-if key, and a repeat prune
// depends only on the path up to the scored turn, so a branch the run pruned
// with rule "repeat" is pruned the same way under any what-if config (its
// score still counts toward the max or median, as it did), and no other
// branch had a run long enough to be. With the run's own config WhatIf
// therefore reproduces every recorded decision exactly.
//
// The base config is read from model.Run.Config, a JSON object whose "tree"
// member is a tree.Config (package runconfig; tree.ConfigJSON writes one
// with only that member); a run that recorded none, or one that does not
// parse, is analysed against tree.DefaultConfig, and the report says so.
//
// # Statistics
//
// Stats reads the records group by group; rubric pool sizes over steps come
// from the events.
package replay
