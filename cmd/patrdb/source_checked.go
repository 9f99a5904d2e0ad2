package main

import (
	"errors"
	"github.com/patrdb/patrdb/model"

	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/store"
)

// checkedRun is a run of the file read through store.CheckedRun: a read
// of a group, a node, a trajectory, the frontier, the rubrics or a
// checkpoint checks the pages and records it touches, so `tree RUN
// latest` on a run of a million nodes costs what the group costs; damage
// elsewhere in the run does not stop it. Everything else (the event log,
// stats, summaries, every advantage of the run) is read after the whole
// run checked clean, once.
// Either way a damaged read is one "damaged" error, never partial output.
type checkedRun struct {
	app *App
	c   *store.CheckedRun
}

// sound is the run's plain handle once the whole run checked clean.
func (r checkedRun) sound() (fileRun, error) {
	rt, err := r.c.Sound()
	if err != nil {
		return fileRun{}, r.app.damaged(err)
	}
	return fileRun{rt}, nil
}

func (r checkedRun) ID() string               { return r.c.ID() }
func (r checkedRun) Info() (model.Run, error) { return damagedOr(r.app, r.c.Info) }
func (r checkedRun) LastSeq() (uint64, error) { return damagedOr(r.app, r.c.LastSeq) }

func (r checkedRun) LatestGroup() (model.Group, error) { return damagedOr(r.app, r.c.LatestGroup) }

func (r checkedRun) Group(id uint64) (model.Group, error) {
	return damagedOr(r.app, func() (model.Group, error) { return r.c.Group(id) })
}

func (r checkedRun) Groups(step uint64) ([]model.Group, error) {
	if step == 0 {
		return soundThen(r, func(f fileRun) ([]model.Group, error) { return f.Groups(0) })
	}
	return damagedOr(r.app, func() ([]model.Group, error) { return r.c.Groups(step) })
}

func (r checkedRun) GroupNodes(g model.Group) ([]model.Node, error) {
	return damagedOr(r.app, func() ([]model.Node, error) { return r.c.GroupNodes(g) })
}

func (r checkedRun) Advantages(step, group uint64) ([]model.Advantage, error) {
	if step == 0 {
		return soundThen(r, func(f fileRun) ([]model.Advantage, error) { return f.Advantages(0, group) })
	}
	return damagedOr(r.app, func() ([]model.Advantage, error) { return r.c.Advantages(step, group) })
}

func (r checkedRun) LastAdvantage() (model.Advantage, error) {
	return damagedOr(r.app, r.c.LastAdvantage)
}

func (r checkedRun) Node(id uint64) (model.Node, error) {
	return damagedOr(r.app, func() (model.Node, error) { return r.c.Node(id) })
}

func (r checkedRun) Path(id uint64) ([]model.Segment, error) {
	return damagedOr(r.app, func() ([]model.Segment, error) { return r.c.Path(id) })
}

func (r checkedRun) Trajectory(id uint64) ([]model.PathTurn, error) {
	return damagedOr(r.app, func() ([]model.PathTurn, error) { return r.c.Trajectory(id) })
}

func (r checkedRun) FrontierNodes() ([]model.Node, error) { return damagedOr(r.app, r.c.FrontierNodes) }

func (r checkedRun) Summary(o model.SummaryOptions) (model.RunSummary, error) {
	return soundThen(r, func(f fileRun) (model.RunSummary, error) { return f.Summary(o) })
}

func (r checkedRun) ForEachGroup(step uint64, fn func(model.Group) error) error {
	_, err := soundThen(r, func(f fileRun) (struct{}, error) { return struct{}{}, f.ForEachGroup(step, fn) })
	return err
}

func (r checkedRun) Rubrics(pool model.RubricPool) ([]model.Rubric, error) {
	return damagedOr(r.app, func() ([]model.Rubric, error) { return r.c.Rubrics(pool) })
}

func (r checkedRun) Rubric(id uint64) (model.Rubric, error) {
	return damagedOr(r.app, func() (model.Rubric, error) { return r.c.Rubric(id) })
}

func (r checkedRun) Checkpoint(step uint64) (model.Checkpoint, error) {
	return damagedOr(r.app, func() (model.Checkpoint, error) { return r.c.Checkpoint(step) })
}

func (r checkedRun) events(from, to uint64, fn func(logEvent) error) error {
	_, err := soundThen(r, func(f fileRun) (struct{}, error) { return struct{}{}, f.events(from, to, fn) })
	return err
}

func (r checkedRun) stats() (*replay.RunStats, error) {
	return soundThen(r, func(f fileRun) (*replay.RunStats, error) { return f.stats() })
}

func (r checkedRun) whatIf(opts replay.WhatIfOptions) (*replay.WhatIfReport, error) {
	return soundThen(r, func(f fileRun) (*replay.WhatIfReport, error) { return f.whatIf(opts) })
}

// damagedOr calls a checked read and turns damage into the CLI's one line.
func damagedOr[T any](a *App, read func() (T, error)) (T, error) {
	v, err := read()
	if errors.Is(err, store.ErrCorrupt) {
		err = a.damaged(err)
	}
	return v, err
}

// soundThen reads through the plain handle after the whole run checked
// clean.
func soundThen[T any](r checkedRun, read func(fileRun) (T, error)) (T, error) {
	f, err := r.sound()
	if err != nil {
		var zero T
		return zero, err
	}
	return read(f)
}
