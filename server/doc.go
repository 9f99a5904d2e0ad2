// Package server is patrdb's HTTP door: a JSON API under /api/v1/ over a
// store, for live runs, other processes and trainers in other languages,
// and the embedded web viewer at /.
//
// A Go trainer serves its own live store in-process with
// Handler(db, Options{}); `patrdb serve` opens a file and serves it. Field
// names are the store records' json tags (snake_case); a run's config and
// an event's payload come as JSON values, byte slices (env_state, inline
// checkpoints) as base64. The request and reply bodies named below are
// package api's (this package gives them the same names), so Go programs
// that only talk to a server import package client and never this one.
//
// # Index, OpenAPI, operations
//
//	GET /api/v1/                                    Index: the API version ("<major>.<minor>") and every endpoint
//	GET /api/v1/openapi.json                        the OpenAPI document (openapi.json beside this file)
//	GET /metrics                                    Prometheus: requests and latencies by route and code, store figures
//
// Options.AccessLog writes one Common Log Format line per request. A new
// endpoint goes into openapi.json too (a test holds the document to the
// registered routes both ways), with info.version's minor number raised so
// clients can ask for it. Its bodies are the JSON vocabulary's objects
// (components.schemas is generated from docs/json-schema.json; a test
// validates replies and requests against the document).
//
// # Reads
//
//	GET /api/v1/health                              Health (open even with a token; the path only with it)
//	GET /api/v1/stats[?run=ID]                      Stats: bytes per bucket, turns stored vs materialised
//	GET /api/v1/runs[?steps=&buckets=]              {"runs": [RunSummary]} (a damaged run: its id and "damaged")
//	GET /api/v1/runs/{run}[?steps=&buckets=]        RunSummary (from the run's counters; buckets=true walks its pages)
//	GET /api/v1/runs/{run}/steps                    {"steps": [StepMetrics]} (the viewer's charts)
//	GET /api/v1/runs/{run}/stats                    replay.RunStats: what patrdb stats RUN prints
//	GET /api/v1/runs/{run}/steps/{step}/groups      {"step", "groups": [Group]}
//	GET /api/v1/runs/{run}/steps/{step}/status      StepStatus: open, done (to close) and closed groups, active and leased branches
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
//	GET /api/v1/runs/{run}/scalars[?from=STEP]      ScalarsPage: the trainer's figures of each step
//
// The viewer's reads (viewer_api.go) send the read models package
// replay/view builds:
//
//	GET /api/v1/runs/{run}/env-steps                EnvSteps: turns sampled per step and in total
//	GET /api/v1/runs/{run}/groups/{group}/view      view.GroupView: the tree depth-first, its summary
//	GET /api/v1/runs/{run}/nodes/{node}/view        view.TrajectoryView: prompt, turns with token figures, scores on the path, advantage
//	GET /api/v1/runs/{run}/rubrics/page[?pool=P,P&q=TEXT&sort=id|rho|support|activations&offset=N&limit=N]  RubricPage
//	GET /api/v1/runs/{run}/search[?text=&status=&leaves=&min_reward=...&limit=N]  view.SearchResult
//	GET /api/v1/runs/{run}/branches?nodes=A,B[,...] view.BranchesView: branches side by side from their fork
//
// # Writes
//
// Every write body carries "client_key". The first answer to a key is kept
// (store.RunTx.PutReply, in the same transaction as the write, found again
// by key in the run's reply index, however long its log); repeating the
// request returns it byte for byte with "Idempotent-Replay: true" and
// writes nothing; the same key with a different request is a 409.
//
//	POST /api/v1/runs                               CreateRunRequest → 201 {"run"}
//	POST /api/v1/runs/{run}/status                  RunStatusRequest
//	POST /api/v1/runs/{run}/checkpoints             CheckpointRequest → 201 (marks the step complete)
//	POST /api/v1/runs/{run}/scalars                 ScalarsRequest → 201 ScalarsResponse (merged into the step's figures)
//	POST /api/v1/runs/{run}/steps                   OpenStepRequest → OpenStepResponse (one group per task, B0 roots; idempotent per task list)
//	POST /api/v1/runs/{run}/leases                  LeaseRequest → LeaseResponse (branches to work on; writes nothing, no client key)
//	POST /api/v1/runs/{run}/submit                  SubmitRequest → rollout.Submitted (turns, scores, rewards, failures; routes completed intervals)
//	POST /api/v1/runs/{run}/groups/{group}/close    CloseGroupRequest → {"group", "advantages"}
//	POST /api/v1/runs/{run}/steps/{step}/abandon    AbandonRequest → OpenStepResponse (gives the step up, on record)
//	POST /api/v1/runs/{run}/rubrics/activate        ActivateRequest → ActiveRubrics
//	POST /api/v1/runs/{run}/groups/{group}/shape    ShapeRequest → ShapeResponse (computes; writes nothing)
//
// Concurrent writes are committed together, one transaction and one fsync
// per batch (batch.go), with the meaning of one transaction per request.
//
// # Growing trees
//
// Every PaTR rule is tree.Coordinator's; the server keeps one per run, made
// from the run's recorded tree config, and only decodes, calls and encodes.
// A driver opens a step; workers (any number of processes: client.Worker
// in Go, RolloutWorker in the Python client) lease branches, sample each lease's
// turns, score when the lease says so, and submit under the lease; the
// submit that completes a group's interval routes it. A lease lives in the
// server's memory for its TTL: a dead worker's branches go to another
// worker when it expires, and a restarted server has forgotten every lease,
// so old workers are told lease_lost and lease again from the last
// committed turn. The driver closes each group the step status lists as
// done. A submit that does not fit its lease is a 409 whose code names the
// rule: lease_lost (expired or handed on, interval over, server restarted,
// or from is not the node's stored turn count), branch_ended, too_early (a
// score before the interval's K turns), step_exists (a step re-opened with
// other tasks), config_mismatch (a step opened with tree fields the run did
// not record). Submits and lease answers also travel as frames
// (api.FrameType, API 1.7): the JSON without the turns' texts and token
// arrays, which follow as raw bytes (docs/json.md); both clients use them.
//
// # Errors and safety
//
// Every error is one line of JSON, {"error": "...", "code": "..."}: 400 for
// malformed JSON, unknown fields, wrong types, missing or invalid values
// (NaN cannot be JSON; scores outside [0,1]; logprobs that are not one
// finite value <= 0 per action token); 404 for unknown runs, groups,
// nodes, rubrics; 409 for a state that forbids the request; 413 for a body
// over Options.MaxBodyBytes; 415 for a body that is not application/json
// (which also keeps browsers on other sites from posting to the API); 400
// for text that is not valid UTF-8 or holds an unpaired \ud800-style
// escape (Go's decoder would store U+FFFD); 507 "full" when the disk, the
// quota or Options.MaxSize is full; 409 "needs_migration" for a write to a
// file of an older format (it is read as it is; patrdb migrate copies it
// into the current one); 503 "locked"; 503 "checking", with
// Retry-After, while a run's first check outlasts Options.CheckWait. A
// refused request writes nothing. A handler panic is a 500 and is logged.
//
// A damaged file never ends the process (sound.go): the first request that
// touches a run walks its pages with bounds and checks its records
// (store.Tx.Check of the run); a damaged run answers 500 "damaged", naming where,
// from then on, and the other runs are served. The check runs apart from
// the requests: those that arrive while it runs wait for it rather than
// run their own (a restarted server's rollout workers all ask at once),
// for up to Options.CheckWait, then answer 503 "checking" with Retry-After
// (a big file that is not in the page cache can take minutes, past the write
// timeout), which package client and the Python client wait out. The endpoints
// of one group, one node or one trajectory, a step's training batch, a
// run's summary, the list of runs and the viewer's run page check only
// what they read until the run has checked clean (store.Tx.CheckReads, or
// store.Tx.Check of the parts they read, store.CheckOptions.Parts: the
// summary's, and for the step figures the event log and the advantage
// records, which they read whole), and answer "damaged" only for damage
// in what they read.
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
