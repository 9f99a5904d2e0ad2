package server

import (
	"errors"
	"mime"
	"net/http"
	"os"
	"strings"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// APIVersion is the path prefix version of this API.
const APIVersion = api.PathVersion

func (s *server) ok(w http.ResponseWriter, v any) error {
	b, err := marshal(v)
	if err != nil {
		return err
	}
	writeRaw(w, http.StatusOK, b)
	return nil
}

// okTurns answers v, whose turns are written packed when the request asks
// (tokens=packed; api.Packed).
func (s *server) okTurns(w http.ResponseWriter, r *http.Request, v any) error {
	if lr, ok := v.(api.LeaseResponse); ok && accepts(r, api.FrameType) {
		b, err := api.LeaseFrame(lr)
		if err != nil {
			return err
		}
		writeBody(w, http.StatusOK, api.FrameType, b)
		return nil
	}
	packed, err := packedTokens(r)
	if err != nil {
		return err
	}
	if packed {
		return s.ok(w, api.Packed(v))
	}
	return s.ok(w, v)
}

// packedTokens reads the request's tokens= query: packed, or arrays of
// numbers (none), or a 400.
func packedTokens(r *http.Request) (bool, error) {
	switch r.URL.Query().Get("tokens") {
	case "":
		return false, nil
	case api.TokensPacked:
		return true, nil
	}
	return false, badRequest("tokens=%q: want %q (or none, for arrays of numbers)", r.URL.Query().Get("tokens"), api.TokensPacked)
}

// accepts reports whether the request's Accept header lists the media
// type mt (a frame, a batch source): the binary forms are sent only to a
// client that names them.
func accepts(r *http.Request, mt string) bool {
	for _, a := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(a, ",") {
			if t, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && t == mt {
				return true
			}
		}
	}
	return false
}

// lookupRun returns the run named in the path, or a 404 naming it.
// viewRun runs fn over the request's run (the {run} path value) in one
// read transaction, so every read endpoint answers from one snapshot.
func (s *server) viewRun(r *http.Request, fn func(rt *store.RunTx) error) error {
	return s.db.View(func(tx *store.Tx) error {
		rt, err := lookupRun(tx, r.PathValue("run"))
		if err != nil {
			return err
		}
		return fn(rt)
	})
}

func lookupRun(tx *store.Tx, id string) (*store.RunTx, error) {
	if err := validRunID(id); err != nil {
		return nil, err
	}
	r, err := tx.Run(id)
	if errors.Is(err, model.ErrNotFound) {
		return nil, notFound("run %q", id)
	}
	return r, err
}

// validRunID is the 400 for a run id no run can have.
func validRunID(id string) error {
	if !store.ValidRunID(id) {
		return badRequest("run id %q: want %s", id, store.RunIDRule)
	}
	return nil
}

func (s *server) health(w http.ResponseWriter, r *http.Request) error {
	h := api.Health{Status: "ok", API: APIVersion, File: FileID(s.db.Path()), ReadOnly: s.opts.ReadOnly || s.db.Options().ReadOnly}
	// health answers without the token (a client checks it reached a
	// patrdb server before it has one); where the file lives is said only
	// to a client that holds it.
	if s.opts.Token != "" && s.authorized(r) {
		h.Path = resolvePath(s.db.Path())
	}
	return s.ok(w, h)
}

func (s *server) listRuns(w http.ResponseWriter, req *http.Request) error {
	opts, err := summaryOptions(req)
	if err != nil {
		return err
	}
	out := struct {
		Runs []api.RunSummary `json:"runs"`
	}{Runs: []api.RunSummary{}}
	err = s.db.View(func(tx *store.Tx) error {
		ids, err := tx.RunIDs()
		if err != nil {
			return err
		}
		for _, id := range ids {
			sum, err := s.summarize(tx, id, opts)
			if damaged(err) {
				// The list goes on: the other runs are still served.
				out.Runs = append(out.Runs, api.RunSummary{Run: api.RunJSON{Run: model.Run{ID: id}}, Damaged: oneLine(err.Error())})
				continue
			}
			if err != nil {
				return err
			}
			out.Runs = append(out.Runs, sum)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.ok(w, out)
}

func (s *server) getRun(w http.ResponseWriter, r *http.Request) error {
	opts, err := summaryOptions(r)
	if err != nil {
		return err
	}
	var out api.RunSummary
	err = s.db.View(func(tx *store.Tx) error {
		var err error
		out, err = s.summarize(tx, r.PathValue("run"), opts)
		return err
	})
	if err != nil {
		return err
	}
	return s.ok(w, out)
}

// summaryOptions reads ?steps= and ?buckets=.
func summaryOptions(r *http.Request) (model.SummaryOptions, error) {
	var o model.SummaryOptions
	var err error
	if o.Steps, err = queryBool(r, "steps"); err != nil {
		return o, err
	}
	o.Buckets, err = queryBool(r, "buckets")
	return o, err
}

// summarize is run id's summary. Until the run has checked whole, it
// checks only what a summary without bytes reads (store's Check of
// CheckSummary and CheckLastEvent): the run record, its counters and the
// small records beside them. On a run of a million nodes that is
// milliseconds, where the whole-run check is some 11 s, and the runs list is what the viewer and
// a trainer's monitor ask first. As on the endpoints of one group, the
// answer is "damaged" only for damage in what it reads, whatever another
// endpoint found elsewhere in the run. The bytes per bucket walk every
// page of the run, so they wait for the whole-run check.
func (s *server) summarize(tx *store.Tx, id string, o model.SummaryOptions) (api.RunSummary, error) {
	err := validRunID(id)
	switch c := &s.soundness; {
	case err != nil:
	case o.Buckets:
		err = s.sound(id)
	case !c.trusted(id):
		if err = walkParts(tx, id, store.CheckSummary|store.CheckLastEvent); errors.Is(err, store.ErrCorrupt) {
			err = damagedError(id, err)
		}
	}
	if err != nil {
		return api.RunSummary{}, err
	}
	r, err := lookupRun(tx, id)
	if err != nil {
		return api.RunSummary{}, err
	}
	info, err := r.Info()
	var sum model.RunSummary
	if err == nil {
		sum, err = r.Summary(o)
	}
	if errors.Is(err, store.ErrCorrupt) {
		return api.RunSummary{}, damagedError(id, err)
	}
	return api.RunSummary{Run: runJSON(info), RunSummary: sum}, err
}

func (s *server) stepGroups(w http.ResponseWriter, r *http.Request) error {
	step, err := pathID(r, "step")
	if err != nil {
		return err
	}
	out := struct {
		Step   uint64        `json:"step"`
		Groups []model.Group `json:"groups"`
	}{Step: step, Groups: []model.Group{}}
	err = s.viewChecked(r, func(rt *store.RunTx) error {
		gs, err := rt.Groups(step)
		out.Groups = append(out.Groups, gs...)
		return err
	})
	if err != nil {
		return err
	}
	return s.ok(w, out)
}

// listGroups is GET /api/v1/runs/{run}/groups[?step=N]: every group of the
// run (or of one step) in (step, id) order.
func (s *server) listGroups(w http.ResponseWriter, r *http.Request) error {
	step, err := queryUint(r, "step", 0)
	if err != nil {
		return err
	}
	out := struct {
		Groups []model.Group `json:"groups"`
	}{Groups: []model.Group{}}
	err = s.viewRun(r, func(rt *store.RunTx) error {
		return rt.ForEachGroup(step, func(g model.Group) error {
			out.Groups = append(out.Groups, g)
			return nil
		})
	})
	if err != nil {
		return err
	}
	return s.ok(w, out)
}

func (s *server) getGroup(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "group")
	if err != nil {
		return err
	}
	var out api.GroupTree
	err = s.viewChecked(r, func(rt *store.RunTx) error {
		var err error
		if out.Group, err = rt.Group(id); err != nil {
			return err
		}
		out.Nodes, err = rt.GroupNodes(out.Group)
		return err
	})
	if err != nil {
		return err
	}
	if out.Nodes == nil {
		out.Nodes = []model.Node{}
	}
	return s.ok(w, out)
}

func (s *server) getNode(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "node")
	if err != nil {
		return err
	}
	var out api.NodeInfo
	err = s.viewChecked(r, func(rt *store.RunTx) error {
		var err error
		if out.Node, err = rt.Node(id); err != nil {
			return err
		}
		out.Children, err = rt.Children(id)
		return err
	})
	if err != nil {
		return err
	}
	if out.Children == nil {
		out.Children = []uint64{}
	}
	return s.ok(w, out)
}

func (s *server) getTrajectory(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "node")
	if err != nil {
		return err
	}
	var out api.Trajectory
	err = s.viewChecked(r, func(rt *store.RunTx) error {
		var err error
		if out.Node, err = rt.Node(id); err != nil {
			return err
		}
		if out.Segments, err = rt.Path(id); err != nil {
			return err
		}
		out.Turns, err = rt.Trajectory(id)
		return err
	})
	if err != nil {
		return err
	}
	out.Inherited = out.Node.Base
	if out.Turns == nil {
		out.Turns = []model.PathTurn{}
	}
	return s.okTurns(w, r, out)
}

func (s *server) getFrontier(w http.ResponseWriter, r *http.Request) error {
	step, err := queryUint(r, "step", 0)
	if err != nil {
		return err
	}
	out := struct {
		Nodes []model.Node `json:"nodes"`
	}{Nodes: []model.Node{}}
	err = s.viewRun(r, func(rt *store.RunTx) error {
		nodes, err := rt.FrontierNodes()
		for _, n := range nodes {
			if step == 0 || n.Step == step {
				out.Nodes = append(out.Nodes, n)
			}
		}
		return err
	})
	if err != nil {
		return err
	}
	return s.ok(w, out)
}

func (s *server) getRubrics(w http.ResponseWriter, r *http.Request) error {
	pool := model.RubricPool(r.URL.Query().Get("pool"))
	if pool == "all" {
		pool = ""
	}
	if pool != "" && !pool.Valid() {
		return badRequest("pool %q: want candidate, public, retired, merged or all", pool)
	}
	out := struct {
		Rubrics []model.Rubric `json:"rubrics"`
	}{}
	err := s.viewRun(r, func(rt *store.RunTx) error {
		var err error
		out.Rubrics, err = rt.Rubrics(pool)
		return err
	})
	if err != nil {
		return err
	}
	if out.Rubrics == nil {
		out.Rubrics = []model.Rubric{}
	}
	return s.ok(w, out)
}

func (s *server) getAdvantages(w http.ResponseWriter, r *http.Request) error {
	step, err := queryUint(r, "step", 0)
	if err != nil {
		return err
	}
	group, err := queryUint(r, "group", 0)
	if err != nil {
		return err
	}
	if group != 0 && step == 0 {
		return badRequest("query group needs step too")
	}
	out := struct {
		Advantages []model.Advantage `json:"advantages"`
	}{}
	err = s.viewRun(r, func(rt *store.RunTx) error {
		var err error
		out.Advantages, err = rt.Advantages(step, group)
		return err
	})
	if err != nil {
		return err
	}
	if out.Advantages == nil {
		out.Advantages = []model.Advantage{}
	}
	return s.ok(w, out)
}

func (s *server) getEvents(w http.ResponseWriter, r *http.Request) error {
	from, err := queryUint(r, "from", 1)
	if err != nil {
		return err
	}
	limit, err := queryUint(r, "limit", 1000)
	if err != nil {
		return err
	}
	if limit == 0 || limit > uint64(s.opts.MaxPage) {
		return badRequest("limit %d: want 1..%d", limit, s.opts.MaxPage)
	}
	out := api.EventPage{Events: []api.EventJSON{}}
	full := errors.New("page full")
	err = s.viewRun(r, func(rt *store.RunTx) error {
		var err error
		out.LastSeq = rt.LastSeq()
		err = rt.Events(max(from, 1), func(e model.Event) error {
			if uint64(len(out.Events)) == limit {
				out.Next = e.Seq
				return full
			}
			out.Events = append(out.Events, EventView(e))
			return nil
		})
		if err == full {
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	return s.ok(w, out)
}

func (s *server) getCheckpoint(w http.ResponseWriter, r *http.Request) error {
	step, err := queryUint(r, "step", 0)
	if err != nil {
		return err
	}
	out := struct {
		Checkpoint model.Checkpoint `json:"checkpoint"`
	}{}
	err = s.viewRun(r, func(rt *store.RunTx) error {
		var err error
		out.Checkpoint, err = rt.Checkpoint(step)
		return err
	})
	if err != nil {
		return err
	}
	return s.ok(w, out)
}

func (s *server) stats(w http.ResponseWriter, r *http.Request) error {
	only := r.URL.Query().Get("run")
	out := api.Stats{Path: s.db.Path(), Runs: []api.RunStats{}}
	err := s.db.View(func(tx *store.Tx) error {
		out.FileBytes = tx.Size()
		ids, err := tx.RunIDs()
		if err != nil {
			return err
		}
		if only != "" {
			if err := s.sound(only); store.ValidRunID(only) && err != nil {
				return err
			}
			if _, err := lookupRun(tx, only); err != nil {
				return err
			}
			ids = []string{only}
		}
		for _, id := range ids {
			st, err := s.runStatsOf(tx, id)
			if damaged(err) && only == "" {
				// The list goes on, as the run list does: the other runs
				// are still served.
				out.Runs = append(out.Runs, api.RunStats{Run: id, Damaged: oneLine(err.Error())})
				continue
			}
			if err != nil {
				return err
			}
			out.Runs = append(out.Runs, st)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if fi, err := os.Stat(s.db.Path()); err == nil {
		out.FileBytes = fi.Size()
	}
	return s.ok(w, out)
}

// runStatsOf is run id's row of GET /api/v1/stats, once its check passed.
func (s *server) runStatsOf(tx *store.Tx, id string) (api.RunStats, error) {
	if err := s.sound(id); err != nil {
		return api.RunStats{}, err
	}
	rt, err := tx.Run(id)
	if err != nil {
		return api.RunStats{}, err
	}
	return runStats(rt)
}

func runStats(r *store.RunTx) (api.RunStats, error) {
	sum, err := r.Summary(model.SummaryOptions{Buckets: true})
	return api.RunStats{Run: sum.Run, Groups: sum.Groups, Nodes: sum.Nodes, Leaves: sum.Leaves,
		TurnsStored: sum.Turns, TurnsMaterialised: sum.TurnsMaterialised, PrefixSharing: sum.PrefixSharing,
		Events: sum.Events, Bytes: sum.Bytes, Buckets: sum.Buckets}, err
}
