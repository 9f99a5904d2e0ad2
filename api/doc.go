// Package api is the JSON vocabulary of patrdb's HTTP API: the body of
// every request and reply under /api/v1 (docs/json.md describes them), the
// error body, the client key every write carries, and the errors both
// sides test for with errors.Is.
//
// Package server answers with these types and package client sends and
// decodes them, so each is defined once; the libraries whose results are
// served as they are (rubricpool's decision for a group, replay's step
// figures, the drafts and consolidations the LLMs answer with) use them
// too. The package imports nothing of patrdb but the store's records and
// package rollout's protocol types.
package api
