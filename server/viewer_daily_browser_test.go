package server

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// agentRun writes run "agent": one group of step 1 whose root A calls a
// tool (JSON in its action and observation) and is expanded into B and C,
// which fork after A's two turns; B completes, C is pruned, and a second
// root D completes. "needle-alpha" is in B's, C's and D's own turns. The
// trainer logged loss, kl and lr for five steps.
type agentIDs struct{ A, B, C, D uint64 }

func agentRun(t *testing.T, db *store.DB) agentIDs {
	t.Helper()
	var ids agentIDs
	turn := func(action, obs string) model.Turn {
		return model.Turn{Action: action, Observation: obs, ActionTokens: []uint32{1, 2, 3}, ActionLogprobs: []float32{-0.1, -0.5, -2}}
	}
	err := db.Update(func(tx *store.Tx) error {
		r, err := tx.CreateRun("agent", []byte(`{"tree":{"b0":2,"k":2,"m":2}}`), nil)
		if err != nil {
			return err
		}
		g, err := r.OpenGroup(store.GroupSpec{Step: 1, Task: "flights", Prompt: "Find the cheapest flight from SFO to JFK and book it."})
		if err != nil {
			return err
		}
		add := func(parent uint64, fork, ordinal int) (uint64, error) {
			n, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Parent: parent, Fork: fork, Ordinal: ordinal, Worker: "w0"})
			return n.ID, err
		}
		if ids.A, err = add(0, 0, 0); err != nil {
			return err
		}
		if ids.D, err = add(0, 0, 1); err != nil {
			return err
		}
		steps := []func() error{
			func() error {
				return r.AppendTurns(ids.A, 0,
					turn(`{"name": "search_flights", "arguments": {"from": "SFO", "to": "JFK", "max_stops": 1}}`,
						`<tool_result>{"results": [{"airline": "blue", "price": 129}, {"airline": "red", "price": 141}], "count": 2}</tool_result>`),
					turn("Compare the two fares.", "Blue is 12 dollars cheaper."))
			},
			func() error {
				return r.AppendTurns(ids.D, 0, turn("Give up.", "No booking made: needle-alpha"), turn("Stop.", "Done."))
			},
			func() error { return r.Score(ids.A, model.Score{Interval: 0, Turn: 2, Value: 0.75}) },
			func() error { return r.Score(ids.D, model.Score{Interval: 0, Turn: 2, Value: 0.125}) },
			func() error {
				return r.Route(ids.A, model.Decision{Interval: 0, Action: model.ActionExpand, Score: 0.75, Reference: 0.75, Delta: 0.5, Rule: "max", Children: 2})
			},
			func() (err error) { ids.B, err = add(ids.A, 2, 0); return },
			func() (err error) { ids.C, err = add(ids.A, 2, 1); return },
			func() error {
				return r.AppendTurns(ids.B, 0, turn("Book the blue fare.", "Booked: confirmation needle-alpha, 129 dollars."), turn("Report.", "Reported."))
			},
			func() error {
				return r.AppendTurns(ids.C, 0, turn("Wait for a cheaper fare.", "The price rose to 180."), turn("Book red, needle-alpha.", "Booked red for 180."))
			},
			func() error { return r.Score(ids.C, model.Score{Interval: 1, Turn: 4, Value: 0.25}) },
			func() error { return r.Score(ids.B, model.Score{Interval: 1, Turn: 4, Value: 1}) },
			func() error {
				return r.Route(ids.C, model.Decision{Interval: 1, Action: model.ActionPrune, Score: 0.25, Reference: 1, Delta: 0.5, Rule: "max"})
			},
			func() error { return r.SetReward(ids.C, 0) },
			func() error { return r.SetReward(ids.B, 1) },
			func() error { return r.SetNodeStatus(ids.B, model.NodeCompleted) },
			func() error { return r.SetReward(ids.D, 0) },
			func() error { return r.SetNodeStatus(ids.D, model.NodeCompleted) },
			func() error { return r.CloseGroup(1, g.ID) },
			func() error { return r.PutCheckpoint(model.Checkpoint{Step: 1, URI: "ckpt/1"}) },
		}
		for _, f := range steps {
			if err := f(); err != nil {
				return err
			}
		}
		for s := uint64(1); s <= 5; s++ {
			if err := r.PutScalars(s, map[string]float64{"loss": 2 / float64(s), "kl": 0.001 * float64(s*s), "lr": 3e-6}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// Search: a text finds the trajectories that hold it, in their own turns or
// inherited, within the status asked for; a hit opens its trajectory.
func TestViewerSearch(t *testing.T) {
	e := newEnv(t, Options{})
	ids := agentRun(t, e.db)
	p := newPage(t, e.srv.URL+"/?run=agent")
	p.wait(`document.querySelectorAll("#tree .row").length === 4`)
	p.do(chromedp.Evaluate[chromedp.Void](`document.getElementById("search-panel").open = true`))
	hits := func() []string {
		return js[[]string](p, `Array.from(document.querySelectorAll("#search-results tr.hit")).map(tr => tr.dataset.node)`)
	}
	search := func(text, status string) {
		p.do(chromedp.SetValue(chromedp.CSS("#s-text"), text), chromedp.SetValue(chromedp.CSS("#s-status"), status))
		p.do(chromedp.Evaluate[chromedp.Void](`document.getElementById("s-summary").textContent = ""`))
		p.do(chromedp.Click(chromedp.CSS(`#search-form button[type=submit]`)))
		p.wait(`document.getElementById("s-summary").textContent.includes("found")`)
	}
	want := func(ns ...uint64) []string {
		var out []string
		for _, n := range ns {
			out = append(out, fmt.Sprint(n))
		}
		slices.Sort(out)
		return out
	}
	sorted := func(s []string) []string { slices.Sort(s); return s }
	search("NEEDLE-alpha", "")
	if got := sorted(hits()); !slices.Equal(got, want(ids.B, ids.C, ids.D)) {
		t.Errorf("needle-alpha, any status: %v, want %v", got, want(ids.B, ids.C, ids.D))
	}
	search("needle-alpha", "completed")
	if got := sorted(hits()); !slices.Equal(got, want(ids.B, ids.D)) {
		t.Errorf("needle-alpha, completed: %v, want %v", got, want(ids.B, ids.D))
	}
	if s := js[string](p, fmt.Sprintf(`document.querySelector('#search-results tr[data-node="%d"] td.snippet').textContent`, ids.B)); !strings.Contains(s, "confirmation needle-alpha") {
		t.Errorf("B's snippet %q", s)
	}
	// Text in the shared prefix: A's tool call is inherited by B and C.
	search("search_flights", "pruned")
	if got := hits(); !slices.Equal(got, want(ids.C)) {
		t.Errorf("search_flights, pruned: %v, want [%d] (inherited from A)", got, ids.C)
	}
	p.shot("search")
	p.do(chromedp.Click(chromedp.CSS(fmt.Sprintf(`#search-results tr[data-node="%d"]`, ids.C))))
	p.wait(fmt.Sprintf(`document.getElementById("traj-title").textContent.startsWith("Trajectory of node %d:") && location.search.includes("node=%d")`, ids.C, ids.C))
}

// Two branches side by side: the rows start where they part, turn for
// turn, with the scores and decisions along each and their outcomes.
func TestViewerBranchesSideBySide(t *testing.T) {
	e := newEnv(t, Options{})
	ids := agentRun(t, e.db)
	p := newPage(t, e.srv.URL+"/?run=agent")
	p.wait(`document.querySelectorAll("#leaves tbody tr").length === 3`)
	if !js[bool](p, `document.getElementById("branches-open").disabled`) {
		t.Error("side by side is open with no branch ticked")
	}
	for _, id := range []uint64{ids.B, ids.C} {
		p.do(chromedp.Click(chromedp.CSS(fmt.Sprintf(`#leaves input[data-branch="%d"]`, id))))
	}
	p.do(chromedp.Click(chromedp.CSS("#branches-open")))
	p.wait(`!document.getElementById("branches").hidden && document.querySelectorAll("#branches-grid tr.turn-row").length > 0`)
	if s := js[string](p, `document.getElementById("branches-title").textContent`); !strings.Contains(s, "from turn 3") {
		t.Errorf("title %q: the branches part after A's two turns", s)
	}
	heads := js[[]string](p, `Array.from(document.querySelectorAll("#branches-grid thead th[data-node]")).map(th => th.dataset.node + ":" + th.textContent)`)
	if len(heads) != 2 || !strings.HasPrefix(heads[0], fmt.Sprint(ids.B)) || !strings.Contains(heads[0], "reward 1") ||
		!strings.Contains(heads[1], "pruned") || !strings.Contains(heads[1], "reward 0") {
		t.Errorf("branch heads %q", heads)
	}
	rows := js[[]string](p, `Array.from(document.querySelectorAll("#branches-grid tr.turn-row")).map(tr =>
		tr.dataset.turn + "|" + Array.from(tr.querySelectorAll("td pre.action")).map(p => p.textContent).join("|"))`)
	wantRows := []string{"2|Book the blue fare.|Wait for a cheaper fare.", "3|Report.|Book red, needle-alpha."}
	if !slices.Equal(rows, wantRows) {
		t.Errorf("rows side by side:\n%s\nwant\n%s", strings.Join(rows, "\n"), strings.Join(wantRows, "\n"))
	}
	// The shared turns above the fork, once; the scores after turn 4.
	shared := js[int](p, `document.querySelectorAll("#branches-grid tr.shared").length`)
	scored := js[string](p, `Array.from(document.querySelectorAll("#branches-grid tr.score-row")).map(tr => tr.textContent).join(" / ")`)
	if shared != 2 || !strings.Contains(scored, "score 1 (interval 1)") || !strings.Contains(scored, "score 0.25 (interval 1) → prune") ||
		!strings.Contains(scored, "score 0.75 (interval 0) → expand") {
		t.Errorf("%d shared rows; score rows %q", shared, scored)
	}
	p.scrollTo("#branches")
	p.shot("branches")
}

// A tool call and a tool result in the text read as their structure: the
// call's name, its arguments as keys and values; the text stays a click
// away.
func TestViewerToolCalls(t *testing.T) {
	e := newEnv(t, Options{})
	ids := agentRun(t, e.db)
	p := newPage(t, e.srv.URL+fmt.Sprintf("/?run=agent&step=1&group=1&node=%d", ids.A))
	p.wait(`document.querySelectorAll("#traj li.turn").length === 2`)
	first := `document.querySelector("#traj li.turn")`
	if s := js[string](p, first+`.querySelector(".json.tool-call .tool-name").textContent`); s != "tool call: search_flights" {
		t.Errorf("tool name %q", s)
	}
	args := js[[]string](p, first+`.querySelector(".json.tool-call dl.jt dd dl.jt") ? Array.from(`+first+`.querySelectorAll(".json.tool-call > dl.jt > dd dl.jt > dt")).map(dt => dt.textContent + "=" + dt.nextElementSibling.textContent) : []`)
	if !slices.Equal(args, []string{"from=SFO", "to=JFK", "max_stops=1"}) {
		t.Errorf("arguments %v", args)
	}
	// The result inside <tool_result> tags: its list of results, each a record.
	res := js[string](p, first+`.querySelectorAll(".json")[1].textContent`)
	if !strings.Contains(res, "airline") || !strings.Contains(res, "blue") || !strings.Contains(res, "141") {
		t.Errorf("tool result %q", res)
	}
	if s := js[string](p, first+`.querySelector("details.raw pre.action").textContent`); !strings.HasPrefix(s, `{"name": "search_flights"`) {
		t.Errorf("the call as written %q", s)
	}
	// Plain text stays text.
	if n := js[int](p, `document.querySelectorAll("#traj li.turn")[1].querySelectorAll(".json").length`); n != 0 {
		t.Errorf("%d structured blocks in a turn without JSON", n)
	}
	p.scrollTo("#traj")
	p.shot("tool-calls")
}

// The trainer's figures are charted beside the rollouts', one chart per
// name, hovering shows a value; comparing runs overlays them.
func TestViewerTrainerMetrics(t *testing.T) {
	e := newEnv(t, Options{})
	agentRun(t, e.db)
	buildViewerRun(t, e.db, "plain", viewerSpec{steps: 3, tasks: 1, roots: 2, nodes: 4, children: 2, tokens: 2, obsLines: 1, seed: 8})
	if err := e.db.Update(func(tx *store.Tx) error {
		r, err := tx.Run("plain")
		if err != nil {
			return err
		}
		for s := uint64(1); s <= 3; s++ {
			if err := r.PutScalars(s, map[string]float64{"loss": 3 / float64(s)}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	p := newPage(t, e.srv.URL+"/?run=agent")
	p.wait(`document.querySelectorAll("#charts figure.plot.trainer").length === 3`)
	captions := js[[]string](p, `Array.from(document.querySelectorAll("#charts figure.plot figcaption")).map(f => f.textContent)`)
	if !slices.Contains(captions, "trainer: loss") || !slices.Contains(captions, "trainer: kl") || slices.ContainsFunc(captions, func(c string) bool { return strings.HasPrefix(c, "Rubric pools") }) {
		t.Errorf("charts %q: the trainer's three, and no empty rubric chart", captions)
	}
	loss := js[[]float64](p, `patrdbCharts["chart-scalar-loss"].data[1]`)
	if !slices.Equal(loss, []float64{2, 1, 2.0 / 3, 0.5, 0.4}) {
		t.Errorf("loss chart data %v", loss)
	}
	// Hover: the legend shows the value under the cursor.
	hover := js[string](p, `(() => { const u = patrdbCharts["chart-scalar-loss"];
		u.setCursor({ left: u.valToPos(2, "x"), top: u.valToPos(1, "y") });
		return document.querySelector('[data-id="chart-scalar-loss"] .u-legend .u-series:nth-child(2) .u-value').textContent; })()`)
	if hover != "1" {
		t.Errorf("legend under the cursor at step 2: %q, want 1", hover)
	}
	// Log scale and smoothing redraw the charts.
	p.do(chromedp.Click(chromedp.CSS("#run-panel input.logy")))
	p.wait(`patrdbCharts["chart-scalar-loss"] && patrdbCharts["chart-scalar-loss"].scales.y.distr === 3`)
	p.do(chromedp.SetValue(chromedp.CSS("#run-panel input.smooth"), "0.6"), chromedp.Evaluate[chromedp.Void](`document.querySelector("#run-panel input.smooth").dispatchEvent(new Event("input"))`))
	p.wait(`patrdbCharts["chart-scalar-loss"] && patrdbCharts["chart-scalar-loss"].series.length === 3`)
	p.shot("trainer-metrics")
	p.do(chromedp.Click(chromedp.CSS("#run-panel input.logy")))
	p.do(chromedp.SetValue(chromedp.CSS("#run-panel input.smooth"), "0"), chromedp.Evaluate[chromedp.Void](`document.querySelector("#run-panel input.smooth").dispatchEvent(new Event("input"))`))

	// Comparison: one loss chart, both runs in it.
	p.do(chromedp.Click(chromedp.CSS(`#runs input[data-compare="plain"]`)))
	p.wait(`!document.getElementById("compare-panel").hidden && patrdbCharts["cmp-scalar-loss"] !== undefined`)
	names := js[[]string](p, `patrdbCharts["cmp-scalar-loss"].series.slice(1).map(s => s.label)`)
	if !slices.Equal(names, []string{"agent", "plain"}) {
		t.Errorf("compared loss series %v", names)
	}
}
