package main

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/patrdb/patrdb/model"

	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/store"
)

// A read command gathers what it prints from a source: the file, read in
// one transaction, or the serve API of the process that owns the file. It
// builds its output struct from a runReader and renders it once, so the two
// paths cannot drift apart in what they print (remote_test.go holds every
// golden file to that).
//
//	return a.readRun(rf, id, func(r runReader) error {
//		out, err = showRun(r)
//		return err
//	})
//
// A runReader's methods have the store's names and meanings (*store.RunTx
// provides most of them); lookups of what does not exist match
// model.ErrNotFound either way.

// source is a set of runs: the file or a server.
type source interface {
	// where names the source in messages: the file's path or the server's
	// URL.
	where() string
	RunIDs() ([]string, error)
	// Run returns a reader of one run, or a not-found error naming the run
	// and where it was looked for.
	Run(id string) (runReader, error)
	// summaryRun is Run for a command that reads only the run's summary,
	// rubrics and checkpoints (withBytes: and its bucket sizes): from the
	// file it checks just what those read, not the whole run.
	summaryRun(id string, withBytes bool) (runReader, error)
}

// runReader is what the read commands need of one run.
type runReader interface {
	ID() string
	Info() (model.Run, error)
	LastSeq() (uint64, error)
	Summary(o model.SummaryOptions) (model.RunSummary, error)
	ForEachGroup(step uint64, fn func(model.Group) error) error
	Groups(step uint64) ([]model.Group, error)
	Group(id uint64) (model.Group, error)
	LatestGroup() (model.Group, error)
	GroupNodes(g model.Group) ([]model.Node, error)
	Node(id uint64) (model.Node, error)
	Path(id uint64) ([]model.Segment, error)
	Trajectory(id uint64) ([]model.PathTurn, error)
	FrontierNodes() ([]model.Node, error)
	Rubrics(pool model.RubricPool) ([]model.Rubric, error)
	Rubric(id uint64) (model.Rubric, error)
	Advantages(step, group uint64) ([]model.Advantage, error)
	LastAdvantage() (model.Advantage, error)
	Checkpoint(step uint64) (model.Checkpoint, error)

	// events calls fn for every event with from <= Seq <= to (both
	// within 1..LastSeq), in order, each decoded by its kind.
	events(from, to uint64, fn func(logEvent) error) error
	// stats is replay.Stats of the run.
	stats() (*replay.RunStats, error)
	// whatIf is replay.WhatIf of the run; only the file can answer it.
	whatIf(opts replay.WhatIfOptions) (*replay.WhatIfReport, error)
}

// logEvent is one event of a run's log as the replay command prints it.
type logEvent struct {
	replay.Event
	// sent is the payload as a server sent it (decoded to JSON), when the
	// event came from one; from the file it is nil and the msgpack payload
	// is decoded instead.
	sent json.RawMessage
}

// read calls fn with the source a read command should use: the server named
// by --server or announced by the file's owner (app.remote), else the file
// opened read-only, in one read transaction so the output is one
// consistent snapshot. Errors from a server map to the CLI's exit codes.
func (a *App) read(rf *remoteFlags, fn func(source) error) error {
	ctx := context.Background()
	cl, err := a.remote(ctx, rf)
	if err != nil {
		return err
	}
	if cl != nil {
		return a.remoteError(cl, fn(&remoteSource{ctx: ctx, cl: cl}))
	}
	db, err := a.openRead()
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(func(tx *store.Tx) error { return fn(&fileSource{app: a, tx: tx}) })
}

// readRun is read for a command about one run.
func (a *App) readRun(rf *remoteFlags, id string, fn func(runReader) error) error {
	return a.read(rf, func(s source) error {
		r, err := s.Run(id)
		if err != nil {
			return err
		}
		return fn(r)
	})
}

// fileSource reads the file inside one read transaction.
type fileSource struct {
	app *App
	tx  *store.Tx
}

func (s *fileSource) where() string { return s.app.dbPath }

func (s *fileSource) RunIDs() ([]string, error) {
	if err := s.tx.VerifyMetas(); err != nil {
		return nil, s.app.damaged(err)
	}
	if err := s.tx.VerifyRuns(); err != nil {
		return nil, s.app.damaged(err)
	}
	return s.tx.RunIDs()
}

// Run hands out a run whose reads check what they touch (checkedRun): a
// read command prints all of what it asked for or none of it.
func (s *fileSource) Run(id string) (runReader, error) {
	if err := s.tx.VerifyMetas(); err != nil {
		return nil, s.app.damaged(err)
	}
	c, err := s.tx.CheckedRun(id)
	if errors.Is(err, model.ErrNotFound) {
		return nil, s.app.runNotFound(s.tx, id)
	}
	if err != nil {
		return nil, s.app.damaged(err)
	}
	return checkedRun{s.app, c}, nil
}

func (s *fileSource) summaryRun(id string, withBytes bool) (runReader, error) {
	if withBytes {
		return s.Run(id) // the bytes walk every page of the run
	}
	r, err := s.app.lookupVerified(s.tx, id, s.tx.VerifySummary)
	if err != nil {
		return nil, err
	}
	return fileRun{r}, nil
}

// fileRun is a run of the file: the store's own handle plus what the
// commands compute from it.
type fileRun struct{ *store.RunTx }

// LastSeq is RunTx.LastSeq, with the runReader's signature (a checked
// read of the file can fail).
func (r fileRun) LastSeq() (uint64, error) { return r.RunTx.LastSeq(), nil }

func (r fileRun) events(from, to uint64, fn func(logEvent) error) error {
	return replay.Iterate(r.RunTx, from, to, func(e replay.Event) error { return fn(logEvent{Event: e}) })
}

func (r fileRun) stats() (*replay.RunStats, error) { return replay.Stats(r.RunTx) }

func (r fileRun) whatIf(opts replay.WhatIfOptions) (*replay.WhatIfReport, error) {
	return replay.WhatIf(r.RunTx, opts)
}

// errFileOnly is returned by a server source for what only the file can
// answer.
var errFileOnly = errors.New("only the file can answer this")
