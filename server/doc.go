// Package server is patrdb's HTTP door: a JSON API under /api/v1/ over a
// store, for live runs, other processes and trainers in other languages,
// and the embedded web viewer at /.
//
// A Go trainer serves its own live store in-process with
// Handler(db, Options{}); `patrdb serve` opens a file and serves it. Field
// names are the store records' json tags (snake_case); a run's config and
// an event's payload come as JSON values, byte slices (env_state, inline
// checkpoints) as base64.
//
// # Reads
//
//	GET /api/v1/health                              Health (open even with a token)
//	GET /api/v1/stats[?run=ID]                      Stats: bytes per bucket, turns stored vs materialised
//	GET /api/v1/runs                                {"runs": [RunSummary]}
//	GET /api/v1/runs/{run}                          RunSummary
//	GET /api/v1/runs/{run}/steps                    {"steps": [StepMetrics]} (the viewer's charts)
//	GET /api/v1/runs/{run}/steps/{step}/groups      {"step", "groups": [Group]}
//	GET /api/v1/runs/{run}/steps/{step}/batch[?layout=rows|tree&...]  the step's training batch, a safetensors file (package batch)
//	GET /api/v1/runs/{run}/groups[?step=N]          {"groups": [Group]} (every step when no step)
//	GET /api/v1/runs/{run}/groups/{group}           GroupTree: the group and its nodes
//	GET /api/v1/runs/{run}/nodes/{node}             NodeInfo: the node and its children
//	GET /api/v1/runs/{run}/nodes/{node}/trajectory  Trajectory: root→node, inherited prefix marked
//	GET /api/v1/runs/{run}/frontier[?step=N]        {"nodes": [Node]}: the active nodes
//	GET /api/v1/runs/{run}/rubrics[?pool=P|all]     {"rubrics": [Rubric]}
//	GET /api/v1/runs/{run}/rubrics/active?step=N    ActiveRubrics
//	GET /api/v1/runs/{run}/advantages[?step=N[&group=G]]  {"advantages": [Advantage]}
//	GET /api/v1/runs/{run}/events[?from=SEQ&limit=N]      EventPage (paged; next = following from)
//	GET /api/v1/runs/{run}/checkpoint[?step=N]      {"checkpoint": Checkpoint}
//
// # Writes
//
// Every write body carries "client_key". The first answer to a key is kept
// (a KindReply event in the same transaction as the write); repeating the
// request returns it byte for byte with "Idempotent-Replay: true" and
// writes nothing; the same key with a different request is a 409.
//
//	POST /api/v1/runs                               CreateRunRequest → 201 {"run"}
//	POST /api/v1/runs/{run}/status                  RunStatusRequest
//	POST /api/v1/runs/{run}/checkpoints             CheckpointRequest → 201 (marks the step complete)
//	POST /api/v1/runs/{run}/groups                  OpenGroupRequest → 201 {"group", "roots"} (B0 roots)
//	POST /api/v1/runs/{run}/nodes/{node}/turns      AppendTurnsRequest (turns at own indexes from, from+1, ...)
//	POST /api/v1/runs/{run}/groups/{group}/route    RouteRequest → RouteResponse (tree.Route, new children)
//	POST /api/v1/runs/{run}/nodes/{node}/finish     FinishRequest (completed or truncated, with reward)
//	POST /api/v1/runs/{run}/groups/{group}/close    CloseGroupRequest → {"group", "advantages"}
//	POST /api/v1/runs/{run}/groups/{group}/nodes    AddNodeRequest (for trainers that route themselves)
//	POST /api/v1/runs/{run}/rubrics/activate        ActivateRequest → ActiveRubrics
//	POST /api/v1/runs/{run}/groups/{group}/shape    ShapeRequest → ShapeResponse (computes; writes nothing)
//
// Concurrent writes are committed together, one transaction and one fsync
// per batch (batch.go), with the meaning of one transaction per request.
//
// # Errors and safety
//
// Every error is one line of JSON, {"error": "...", "code": "..."}: 400 for
// malformed JSON, unknown fields, wrong types, missing or invalid values
// (NaN cannot be JSON; scores outside [0,1]); 404 for unknown runs, groups,
// nodes, rubrics; 409 for a state that forbids the request; 413 for a body
// over Options.MaxBodyBytes; 415 for a body that is not application/json
// (which also keeps browsers on other sites from posting to the API). A
// refused request writes nothing. A handler panic is a 500 and is logged.
// Without a token only loopback Host headers are answered (DNS rebinding);
// a non-loopback listener needs a bearer token (CheckBind), compared in
// constant time. NewHTTPServer sets read, write and idle timeouts.
//
// # Finding a live server
//
// The owner of a file that serves it writes its URL to AddrFile(db), next
// to the file, and removes it on a clean close; Discover finds it and
// checks that it answers for that very file.
package server
