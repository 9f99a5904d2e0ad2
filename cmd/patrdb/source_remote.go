package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/client"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/store"
)

// remoteSource reads runs through the serve API. The server answers with
// the store's own records, so a remoteRun hands the commands the same
// values a fileRun does. Unlike the file, the answers are not one snapshot:
// each request is its own read transaction, so the figures of a run being
// written can differ by the writes that landed between two requests.
type remoteSource struct {
	ctx  context.Context
	cl   *client.Client
	runs map[string]api.RunSummary // from RunIDs: one request for `runs`
}

func (s *remoteSource) where() string { return s.cl.Base }

func (s *remoteSource) RunIDs() ([]string, error) {
	sums, err := s.cl.Runs(s.ctx)
	if err != nil {
		return nil, err
	}
	s.runs = make(map[string]api.RunSummary, len(sums))
	ids := make([]string, len(sums))
	for i, sum := range sums {
		ids[i] = sum.Run.ID
		s.runs[sum.Run.ID] = sum
	}
	return ids, nil
}

func (s *remoteSource) summaryRun(id string, _ bool) (runReader, error) { return s.Run(id) }

func (s *remoteSource) Run(id string) (runReader, error) {
	sum, ok := s.runs[id]
	if sum.Damaged != "" {
		return nil, &codeError{exitUsage, &damagedError{fmt.Sprintf("server %s: %s", s.cl.Base, sum.Damaged)}}
	}
	if !ok {
		var err error
		if sum, err = s.cl.Run(s.ctx, id); err != nil {
			if isNotFound(err) {
				ids, _ := s.RunIDs()
				return nil, notFoundErrorf("run %q not found on %s%s", id, s.cl.Base, runsPresent(ids))
			}
			return nil, err
		}
	}
	return &remoteRun{ctx: s.ctx, cl: s.cl, id: id, sum: sum,
		trees: map[uint64]api.GroupTree{}, trajs: map[uint64]api.Trajectory{}}, nil
}

// remoteRun is one run read through the API. It keeps the run's summary
// from when it was looked up (LastSeq and Info come from it)
// and the group trees and trajectories it fetched, which answer more than
// one method each.
type remoteRun struct {
	ctx   context.Context
	cl    *client.Client
	id    string
	sum   api.RunSummary
	trees map[uint64]api.GroupTree
	trajs map[uint64]api.Trajectory
}

func (r *remoteRun) ID() string                                { return r.id }
func (r *remoteRun) Info() (model.Run, error)                  { return r.sum.Run.Record(), nil }
func (r *remoteRun) LastSeq() (uint64, error)                  { return r.sum.Events, nil }
func (r *remoteRun) Groups(step uint64) ([]model.Group, error) { return r.cl.Groups(r.ctx, r.id, step) }

// LatestGroup is the last of the run's groups: the API lists them in key
// order, step|group.
func (r *remoteRun) LatestGroup() (model.Group, error) {
	all, err := r.Groups(0)
	if err != nil {
		return model.Group{}, err
	}
	if len(all) == 0 {
		return model.Group{}, fmt.Errorf("groups of run %q: %w", r.id, model.ErrNotFound)
	}
	return all[len(all)-1], nil
}

func (r *remoteRun) FrontierNodes() ([]model.Node, error) { return r.cl.Frontier(r.ctx, r.id, 0) }

func (r *remoteRun) ForEachGroup(step uint64, fn func(model.Group) error) error {
	gs, err := r.Groups(step)
	if err != nil {
		return err
	}
	for _, g := range gs {
		if err := fn(g); err != nil {
			return err
		}
	}
	return nil
}

func (r *remoteRun) tree(id uint64) (api.GroupTree, error) {
	if t, ok := r.trees[id]; ok {
		return t, nil
	}
	t, err := r.cl.Tree(r.ctx, r.id, id)
	if err == nil {
		r.trees[id] = t
	}
	return t, err
}

func (r *remoteRun) Group(id uint64) (model.Group, error) {
	t, err := r.tree(id)
	return t.Group, err
}

// GroupNodes are the group's nodes in the store's order (the server sends
// rt.GroupNodes).
func (r *remoteRun) GroupNodes(g model.Group) ([]model.Node, error) {
	t, err := r.tree(g.ID)
	return t.Nodes, err
}

func (r *remoteRun) Node(id uint64) (model.Node, error) {
	if t, ok := r.trajs[id]; ok {
		return t.Node, nil
	}
	n, err := r.cl.Node(r.ctx, r.id, id)
	return n.Node, err
}

func (r *remoteRun) trajectory(id uint64) (api.Trajectory, error) {
	if t, ok := r.trajs[id]; ok {
		return t, nil
	}
	t, err := r.cl.Trajectory(r.ctx, r.id, id)
	if err == nil {
		r.trajs[id] = t
	}
	return t, err
}

func (r *remoteRun) Path(id uint64) ([]model.Segment, error) {
	t, err := r.trajectory(id)
	return t.Segments, err
}

func (r *remoteRun) Trajectory(id uint64) ([]model.PathTurn, error) {
	t, err := r.trajectory(id)
	return t.Turns, err
}

func (r *remoteRun) Rubrics(pool model.RubricPool) ([]model.Rubric, error) {
	return r.cl.Rubrics(r.ctx, r.id, pool)
}

// Rubric has no endpoint of its own: it is one of the run's rubrics.
func (r *remoteRun) Rubric(id uint64) (model.Rubric, error) {
	all, err := r.Rubrics("")
	if err != nil {
		return model.Rubric{}, err
	}
	for _, rb := range all {
		if rb.ID == id {
			return rb, nil
		}
	}
	return model.Rubric{}, fmt.Errorf("%w: rubric %d of run %q", model.ErrNotFound, id, r.id)
}

func (r *remoteRun) Advantages(step, group uint64) ([]model.Advantage, error) {
	return r.cl.Advantages(r.ctx, r.id, step, group)
}

// LastAdvantage is the last of the run's advantage records (the API has
// no narrower query).
func (r *remoteRun) LastAdvantage() (model.Advantage, error) {
	all, err := r.Advantages(0, 0)
	if err != nil {
		return model.Advantage{}, err
	}
	if len(all) == 0 {
		return model.Advantage{}, fmt.Errorf("%w: advantages of run %q", model.ErrNotFound, r.id)
	}
	return all[len(all)-1], nil
}

func (r *remoteRun) Checkpoint(step uint64) (model.Checkpoint, error) {
	return r.cl.Checkpoint(r.ctx, r.id, step)
}

// Summary is the summary the run was looked up with, or, when o asks for
// more than the totals, the server's answer to that.
func (r *remoteRun) Summary(o model.SummaryOptions) (model.RunSummary, error) {
	s := r.sum
	if o != (model.SummaryOptions{}) {
		var err error
		if s, err = r.cl.RunWith(r.ctx, r.id, o); err != nil {
			return model.RunSummary{}, err
		}
	}
	// The API's run field is the run's record, which hides the summary's
	// own (its id).
	s.RunSummary.Run = r.id
	return s.RunSummary, nil
}

func (r *remoteRun) whatIf(replay.WhatIfOptions) (*replay.WhatIfReport, error) {
	return nil, fmt.Errorf("replay --what-if: %w", errFileOnly)
}

// eventPageSize is the events asked for per request: within the server's
// default cap (server.DefaultMaxPage), and small enough that a page is a
// short transaction on the live file.
const eventPageSize = 1000

// remoteEvent is an event as the API sends it, with the payload kept as
// raw JSON: decoding it into a generic value first would round 64-bit
// integers (times in nanoseconds) through float64.
type remoteEvent struct {
	Seq     uint64          `json:"seq"`
	Time    int64           `json:"created_at"`
	Kind    model.EventKind `json:"kind"`
	Step    uint64          `json:"step"`
	Group   uint64          `json:"group"`
	Node    uint64          `json:"node"`
	Rubric  uint64          `json:"rubric"`
	Payload json.RawMessage `json:"payload"`
}

type remoteEventPage struct {
	Events []remoteEvent `json:"events"`
	Next   uint64        `json:"next"`
}

// events pages through GET /api/v1/runs/{run}/events from `from`, decoding
// each store payload back into its record, as replay.Iterate does from the
// file.
func (r *remoteRun) events(from, to uint64, fn func(logEvent) error) error {
	for from != 0 && from <= to {
		var page remoteEventPage
		q := fmt.Sprintf("/api/v1/runs/%s/events?from=%d&limit=%d", url.PathEscape(r.id), from, eventPageSize)
		if err := r.getJSON(q, &page); err != nil {
			return err
		}
		for _, re := range page.Events {
			if re.Seq > to {
				return nil
			}
			e, err := decodeRemoteEvent(re)
			if err != nil {
				return err
			}
			if err := fn(e); err != nil {
				return err
			}
		}
		if page.Next != 0 && page.Next <= from {
			return fmt.Errorf("events from %d: the server's next page starts at %d", from, page.Next)
		}
		from = page.Next
	}
	return nil
}

// getJSON is a GET through the client's HTTP client and token, with the
// client's error type for a non-2xx answer.
func (r *remoteRun) getJSON(path string, out any) error {
	req, err := http.NewRequestWithContext(r.ctx, http.MethodGet, r.cl.Base+path, nil)
	if err != nil {
		return err
	}
	if r.cl.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.cl.Token)
	}
	hc := r.cl.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var eb struct {
			Error string `json:"error"`
			Code  string `json:"code"`
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		if json.Unmarshal(b, &eb) != nil || eb.Error == "" {
			eb.Error = strings.TrimSpace(string(b))
		}
		return &client.APIError{Status: resp.StatusCode, Code: eb.Code, Message: eb.Error}
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decoding GET %s: %w", path, err)
	}
	return nil
}

// decodeRemoteEvent turns an API event back into what replay.Decode makes
// of the stored one: the record for the store's kinds; for other kinds the
// payload stays as the server decoded it.
func decodeRemoteEvent(re remoteEvent) (logEvent, error) {
	e := logEvent{Event: replay.Event{Event: model.Event{Seq: re.Seq, Time: re.Time, Kind: re.Kind,
		Step: re.Step, Group: re.Group, Node: re.Node, Rubric: re.Rubric}}}
	if len(re.Payload) > 0 && string(re.Payload) != "null" {
		e.sent = re.Payload
	}
	rec := store.RecordFor(re.Kind)
	if rec == nil {
		return e, nil
	}
	bad := func(err error) (logEvent, error) {
		return e, fmt.Errorf("event %d (%s) from the server: %w: payload: %v", re.Seq, re.Kind, store.ErrCorrupt, err)
	}
	if len(re.Payload) == 0 || string(re.Payload) == "null" {
		return bad(fmt.Errorf("none"))
	}
	var undecodable struct {
		Undecodable string `json:"undecodable"`
	}
	if json.Unmarshal(re.Payload, &undecodable) == nil && undecodable.Undecodable != "" {
		return bad(fmt.Errorf("%s", undecodable.Undecodable))
	}
	if _, ok := rec.(*model.Run); ok { // sent with its config as a JSON value
		var rj api.RunJSON
		if err := json.Unmarshal(re.Payload, &rj); err != nil {
			return bad(err)
		}
		run := rj.Record()
		e.Record = &run
		return e, nil
	}
	if err := json.Unmarshal(re.Payload, rec); err != nil {
		return bad(err)
	}
	e.Record = rec
	return e, nil
}

// stats is the server's replay.Stats of the run (GET .../stats): the
// figures computed once, where the records are.
func (r *remoteRun) stats() (*replay.RunStats, error) {
	var rs replay.RunStats
	if err := r.getJSON("/api/v1/runs/"+url.PathEscape(r.id)+"/stats", &rs); err != nil {
		return nil, err
	}
	return &rs, nil
}
