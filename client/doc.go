// Package client is the Go client of patrdb's HTTP API (patrdb serve): a
// Client for every endpoint under /api/v1, and a Worker that grows a
// step's branches over the rollout protocol. It imports the API's
// vocabulary (package api) and the protocol's types (package rollout), not
// the server, so a worker or trainer that talks to a server builds without
// the server, its web viewer, or the tree and rubric libraries.
//
// # Concurrency
//
// A Client is safe for concurrent use by any number of goroutines once
// its fields are set: it holds no per-request state, its http.Client is
// safe to share, and the one thing it remembers (the server's API version)
// is guarded. Set its fields before the first request and leave them. A
// Worker is not: run one Work loop per Worker, as many Workers as wanted
// over one Client.
//
// # API version
//
// Before its first request (Health aside) a Client reads the server's API
// version from GET /api/v1/ and fails every request with
// ErrIncompatibleServer when its major number is not this client's
// (api.PathVersion); a server that predates the index fails the same way.
// A successful check is remembered for the life of the Client; a failed
// read (the server is down) is tried again by the next request.
// SkipVersionCheck turns the check off.
//
// # Retries and idempotency
//
// Every write request embeds api.Keyed. A client key left empty is filled
// with a random one (NewKey) before the request is sent, and the server
// runs a write at most once per (run, client key): a repeat gets the first
// answer back, byte for byte, without writing again. So a Client retries
// any request — reads and writes alike — up to Retries more times, after
// Backoff doubled per attempt, when the server did not answer or answered
// 5xx, always with the same body and key. A 4xx is never retried. A 503
// "checking" (a server that has just started checks each run once before
// its first use) is waited out after its Retry-After, for up to
// CheckWait, without counting against Retries. The
// methods take requests by value, so a request sent with an empty key gets
// a fresh one on every call: a caller that retries a write itself sets
// ClientKey once (NewKey) and sends the same key again, or the retry is a
// new write. Leases carry no key (a lease writes nothing): asking again
// hands out other branches.
//
// Worker.Work adds its own loop on top: it retries a lease or a submit
// until the server answers (not just Retries times) while ctx lives, each
// submit under one key, so a submit that did commit before the connection
// dropped is answered, not applied twice.
//
// # Errors
//
// A non-2xx answer is an *APIError, which matches the sentinels of the
// API, the protocol and the store with errors.Is: model.ErrNotFound for a
// 404, api.ErrConflict and rollout.ErrConflict for a 409 (and
// rollout.ErrLeaseLost and its siblings by the answer's code),
// model.ErrExists, api.ErrBadRequest for a 400, 413 or 415.
package client
