package server

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay/view"
	"github.com/patrdb/patrdb/store"
)

// A trajectory reads as an LLM wrote it, and the place a reader reached is
// in the URL: reload and back return to it.
func TestViewerTrajectory(t *testing.T) {
	e := newEnv(t, Options{})
	buildViewerRun(t, e.db, "llm", viewerSpec{steps: 2, tasks: 2, roots: 3, nodes: 12, children: 2, tokens: 40, obsLines: 30, seed: 3})
	var gv view.GroupView
	e.get("/api/v1/runs/llm/groups/3/view", &gv)
	var a, b view.TreeNode // a child that inherits a prefix, and another node
	for _, n := range gv.Nodes {
		if n.Parent != 0 && n.Base > 0 && a.ID == 0 {
			a = n
		} else if n.ID != a.ID && b.ID == 0 && n.Depth == 0 {
			b = n
		}
	}
	if a.ID == 0 || b.ID == 0 {
		t.Fatalf("fixture group lacks a child with a prefix: %+v", gv.Summary)
	}
	var tv view.TrajectoryView
	e.get(fmt.Sprintf("/api/v1/runs/llm/nodes/%d/view", a.ID), &tv)

	p := newPage(t, e.srv.URL+"/?run=llm&step=2&group=3")
	p.wait(fmt.Sprintf(`document.querySelectorAll("#tree .row").length === %d`, len(gv.Nodes)))
	p.do(chromedp.Click(chromedp.CSS(fmt.Sprintf(`#tree .row[data-node="%d"] .nid`, a.ID))))
	title := fmt.Sprintf("Trajectory of node %d: %d turns, %d inherited", a.ID, len(tv.Turns), tv.Inherited)
	p.wait(fmt.Sprintf(`document.getElementById("traj-title").textContent === %q`, title))

	// Every turn in order, the inherited ones marked, the prefix end shown.
	got := js[[]string](p, `Array.from(document.querySelectorAll("#traj-turns li.turn, #traj-turns li.prefix-end")).map(li =>
		li.className + ":" + (li.dataset.node || "") + ":" + ((li.querySelector("pre.action") || {}).textContent || ""))`)
	var want []string
	for i, pt := range tv.Turns {
		if i == tv.Inherited {
			want = append(want, "prefix-end::")
		}
		cls := "turn own"
		if i < tv.Inherited {
			cls = "turn inherited"
		}
		want = append(want, fmt.Sprintf("%s:%d:%s", cls, pt.Node, pt.Action))
	}
	if !slices.Equal(got, want) {
		t.Errorf("trajectory panel:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// White space is kept; a 30-line observation starts folded and opens.
	if ws := js[string](p, `getComputedStyle(document.querySelector("#traj pre.action")).whiteSpace`); ws != "pre-wrap" {
		t.Errorf("action white-space %q, want pre-wrap", ws)
	}
	if n := js[int](p, `document.querySelectorAll("#traj details.folded:not([open]) pre.observation").length`); n != len(tv.Turns) {
		t.Errorf("%d folded observations, want %d", n, len(tv.Turns))
	}
	if h := js[float64](p, `document.querySelector("#traj details.folded").getBoundingClientRect().height`); h > 30 {
		t.Errorf("a folded block is %gpx tall", h)
	}
	p.do(chromedp.Click(chromedp.CSS("#traj-unfold")))
	if n := js[int](p, `document.querySelectorAll("#traj details.folded[open]").length`); n != len(tv.Turns) {
		t.Errorf("unfold all opened %d of %d blocks", n, len(tv.Turns))
	}
	p.do(chromedp.Click(chromedp.CSS("#traj-fold")))
	// The prompt, token counts, logprob strips, the scores along the path.
	if got := js[string](p, `document.querySelector("#traj li.prompt pre").textContent`); got != tv.Group.Prompt {
		t.Errorf("prompt %q, want %q", got, tv.Group.Prompt)
	}
	head := js[string](p, `document.querySelector("#traj li.turn .turn-head").textContent`)
	t0 := tv.Turns[0]
	for _, w := range []string{fmt.Sprintf("%d action tokens", t0.ActionTokenCount), fmt.Sprintf("%d observation tokens", t0.ObservationTokenCount), "mean logprob " + jsRound(*t0.MeanLogprob, 2)} {
		if !strings.Contains(head, w) {
			t.Errorf("turn head %q lacks %q", head, w)
		}
	}
	if n := js[int](p, `document.querySelectorAll("#traj li.turn .strip .cell").length`); n != len(tv.Turns)*min(40, view.StripBins) {
		t.Errorf("%d logprob cells", n)
	}
	if n := js[int](p, `document.querySelectorAll("#traj li.score").length`); n != len(tv.Scores) || n == 0 {
		t.Errorf("%d score marks, want %d", n, len(tv.Scores))
	}
	path := js[string](p, `document.getElementById("traj-path").textContent`)
	var wantPath []string
	for _, pn := range tv.Path {
		wantPath = append(wantPath, fmt.Sprintf("#%d ×%d", pn.ID, pn.Count))
	}
	if !strings.HasPrefix(path, "path: "+strings.Join(wantPath, " → ")) {
		t.Errorf("path line %q, want %v", path, wantPath)
	}
	p.scrollTo("#traj")
	p.shot("trajectory")

	// Deep links: another node, then back, then reload.
	p.do(chromedp.Click(chromedp.CSS(fmt.Sprintf(`#tree .row[data-node="%d"] .nid`, b.ID))))
	p.wait(fmt.Sprintf(`location.search.includes("node=%d") && document.getElementById("traj-title").textContent.startsWith("Trajectory of node %d:")`, b.ID, b.ID))
	p.do(chromedp.NavigateBack())
	p.wait(fmt.Sprintf(`location.search.includes("node=%d") && document.getElementById("traj-title").textContent === %q`, a.ID, title))
	p.do(chromedp.Reload())
	p.wait(fmt.Sprintf(`document.getElementById("traj-title").textContent === %q && document.querySelector("#tree .row.sel") && document.querySelector("#tree .row.sel").dataset.node === "%d"`, title, a.ID))
	if s := js[string](p, `document.getElementById("group").value + "/" + document.getElementById("step").value`); s != "3/2" {
		t.Errorf("after reload the page shows group/step %s, want 3/2", s)
	}

	// A link straight to a failed node: its row and its path say so.
	var g1 view.GroupView
	e.get("/api/v1/runs/llm/groups/1/view", &g1)
	var failed view.TreeNode
	for _, n := range g1.Nodes {
		if n.Status == model.NodeFailed {
			failed = n
		}
	}
	if failed.ID == 0 {
		t.Fatal("fixture has no failed node")
	}
	p.do(chromedp.Navigate(fmt.Sprintf("%s/?run=llm&step=1&group=1&node=%d", e.srv.URL, failed.ID)))
	p.wait(fmt.Sprintf(`document.getElementById("traj-title").textContent.startsWith("Trajectory of node %d:")`, failed.ID))
	if m := js[string](p, fmt.Sprintf(`document.querySelector('#tree .row[data-node="%d"] .mark').textContent`, failed.ID)); m != "✖" {
		t.Errorf("failed node's tree mark %q", m)
	}
	if s := js[string](p, `document.getElementById("traj-path").textContent + " | " + document.getElementById("traj-outcome").textContent`); !strings.Contains(s, "✖ failed") || !strings.Contains(s, "error: "+failed.Error) {
		t.Errorf("failed node's trajectory says %q", s)
	}
}

// jsRound is how the page rounds a figure to d decimals.
func jsRound(x float64, d int) string {
	s := fmt.Sprintf("%.*f", d, x)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		s = "0"
	}
	return s
}

// A 2,000-node group opens as a summary over its collapsed roots; find,
// colour, the leaf table and the keyboard all reach any node.
func TestViewerBigGroup(t *testing.T) {
	e := newEnv(t, Options{})
	buildViewerRun(t, e.db, "big", viewerSpec{steps: 1, tasks: 1, roots: 16, nodes: 2000, children: 3, tokens: 4, obsLines: 2, seed: 5})
	var gv view.GroupView
	e.get("/api/v1/runs/big/groups/1/view", &gv)
	if gv.Summary.Nodes < 2000 {
		t.Fatalf("fixture group has %d nodes", gv.Summary.Nodes)
	}
	deep := gv.Nodes[0]
	for _, n := range gv.Nodes {
		if n.Depth > deep.Depth && n.Status == model.NodeCompleted {
			deep = n
		}
	}
	p := newPage(t, e.srv.URL+"/?run=big")
	p.wait(fmt.Sprintf(`document.querySelectorAll("#tree .row").length === %d`, len(gv.Group.Roots)))
	if s := js[string](p, `document.getElementById("group-summary").textContent`); !strings.Contains(s, fmt.Sprintf("%d nodes", gv.Summary.Nodes)) || !strings.Contains(s, "large tree") {
		t.Errorf("summary %q", s)
	}
	// Find opens the ancestors of a deep leaf and its trajectory.
	p.do(chromedp.SendKeys(chromedp.CSS("#find"), fmt.Sprint(deep.ID)+"\r"))
	p.wait(fmt.Sprintf(`document.getElementById("traj-title").textContent.startsWith("Trajectory of node %d:") && document.querySelector('#tree .row.sel[data-node="%d"]') !== null`, deep.ID, deep.ID))
	if rows := js[int](p, `document.querySelectorAll("#tree .row").length`); rows <= len(gv.Group.Roots) || rows >= len(gv.Nodes) {
		t.Errorf("find opened %d rows of %d", rows, len(gv.Nodes))
	}
	// Find by status: the group's failed node, however deep.
	var failedID uint64
	for _, n := range gv.Nodes {
		if n.Status == model.NodeFailed {
			failedID = n.ID
		}
	}
	clearFind := `(document.getElementById("find").value = "", true)`
	js[bool](p, clearFind)
	p.do(chromedp.SendKeys(chromedp.CSS("#find"), "failed\r"))
	p.wait(fmt.Sprintf(`document.querySelector('#tree .row.sel[data-node="%d"]') !== null`, failedID))
	js[bool](p, clearFind)
	p.do(chromedp.SendKeys(chromedp.CSS("#find"), fmt.Sprint(deep.ID)+"\r"))
	p.wait(fmt.Sprintf(`document.querySelector('#tree .row.sel[data-node="%d"]') !== null`, deep.ID))
	p.scrollTo("#group-panel")
	p.shot("tree")
	// Colour by reward: leaves with different rewards get different colours.
	p.do(chromedp.Click(chromedp.CSS("#expand-all")))
	p.wait(fmt.Sprintf(`document.querySelectorAll("#tree .row").length === %d`, len(gv.Nodes)))
	colours := js[map[string][]string](p, `(() => { const m = {}; for (const n of tree.view.nodes) if (n.reward !== null && n.status === "completed") {
		const c = getComputedStyle(document.querySelector('#tree .row[data-node="' + n.id + '"] .dot')).backgroundColor;
		(m[n.reward] = m[n.reward] || []).includes(c) || m[n.reward].push(c); } return m; })()`)
	if len(colours["0"]) != 1 || len(colours["1"]) != 1 || colours["0"][0] == colours["1"][0] {
		t.Errorf("colours by reward: %v", colours)
	}
	// The leaf table sorts by advantage and opens a leaf.
	if n := js[int](p, `document.querySelectorAll("#leaves tbody tr").length`); n != 200 {
		t.Errorf("a big group lists %d leaves at first, want the first 200", n)
	}
	p.do(chromedp.Click(chromedp.CSS("#leaves-more")), chromedp.Click(chromedp.CSS(`#leaves th[data-key="advantage"]`)))
	advs := js[[]float64](p, `Array.from(document.querySelectorAll("#leaves tbody tr td:nth-child(4)")).map(td => Number(td.textContent))`)
	if len(advs) != gv.Summary.Leaves || !slices.IsSortedFunc(advs, func(a, b float64) int { return -cmpFloat(a, b) }) {
		t.Errorf("%d leaf rows (want %d), sorted by advantage descending: %v", len(advs), gv.Summary.Leaves, advs[:min(8, len(advs))])
	}
	first := js[string](p, `document.querySelector("#leaves tbody tr").dataset.node`)
	p.do(chromedp.Click(chromedp.CSS(`#leaves tbody tr`)))
	p.wait(fmt.Sprintf(`document.getElementById("traj-title").textContent.startsWith("Trajectory of node %s:")`, first))
	// The table is one tab stop; ArrowDown and Enter open the next leaf.
	second := js[string](p, `document.querySelectorAll("#leaves tbody tr")[1].dataset.node`)
	if n := js[int](p, `document.querySelectorAll('#leaves tbody tr[tabindex="0"]').length`); n != 1 {
		t.Errorf("%d leaf rows are tab stops, want 1", n)
	}
	p.do(chromedp.Focus(chromedp.CSS(`#leaves tbody tr[tabindex="0"]`)), chromedp.KeyEvent(kb.ArrowDown), chromedp.KeyEvent(kb.Enter))
	p.wait(fmt.Sprintf(`document.getElementById("traj-title").textContent.startsWith("Trajectory of node %s:")`, second))
	// The keyboard: collapse, focus the first root, open it, step into it,
	// open the trajectory.
	p.do(chromedp.Click(chromedp.CSS("#collapse-all")))
	p.wait(fmt.Sprintf(`document.querySelectorAll("#tree .row").length === %d`, len(gv.Group.Roots)))
	p.do(chromedp.Focus(chromedp.CSS(`#tree .row[tabindex="0"]`)), chromedp.KeyEvent(kb.ArrowRight))
	p.wait(fmt.Sprintf(`document.querySelectorAll("#tree .row").length > %d`, len(gv.Group.Roots)))
	p.do(chromedp.KeyEvent(kb.ArrowDown), chromedp.KeyEvent(kb.Enter))
	child := js[string](p, `document.activeElement.dataset.node`)
	p.wait(fmt.Sprintf(`document.getElementById("traj-title").textContent.startsWith("Trajectory of node %s:")`, child))
	if child == fmt.Sprint(gv.Group.Roots[0]) {
		t.Error("ArrowDown did not move off the first root")
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// The page of a 100-step × 32-task run: its load time, the separate
// success and reward curves, the rubric table's pages and filter, and the
// comparison with another run.
func TestViewerRunPage(t *testing.T) {
	e := newEnv(t, Options{})
	// Under the race detector the server is several times slower: the run
	// keeps its 100 steps but fewer tasks, and its load time is only
	// reported (CI times the full run without -race).
	tasks := 32
	if raceEnabled {
		tasks = 4
	}
	buildViewerRun(t, e.db, "big", viewerSpec{steps: 100, tasks: tasks, roots: 4, nodes: 12, children: 2, tokens: 16, obsLines: 4, rubrics: 25, seed: 1})
	buildViewerRun(t, e.db, "small", viewerSpec{steps: 20, tasks: 4, roots: 3, nodes: 10, children: 2, tokens: 4, obsLines: 2, rubrics: 1, seed: 2})
	var page view.RubricPage
	e.get("/api/v1/runs/big/rubrics/page", &page)
	inPlay := page.Pools[model.PoolPublic] + page.Pools[model.PoolCandidate]
	if page.Total != inPlay || inPlay < 1000 {
		t.Fatalf("rubric page total %d, pools %v", page.Total, page.Pools)
	}
	// The trainer's own figures of each step, charted beside the rollouts'.
	if err := e.db.Update(func(tx *store.Tx) error {
		r, err := tx.Run("big")
		if err != nil {
			return err
		}
		for s := uint64(1); s <= 100; s++ {
			x := float64(s)
			if err := r.PutScalars(s, map[string]float64{"loss": 1.5/(1+x/12) + 0.05*math.Sin(x), "kl": 0.002 * x * (1 + 0.3*math.Cos(x/3))}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The server checks a run once before serving it; that is the server's
	// start, not the page's load.
	e.get("/api/v1/runs/big/env-steps", &EnvSteps{})
	e.get("/api/v1/runs/small/env-steps", &EnvSteps{})

	p := newPage(t, "about:blank")
	ready := `document.querySelectorAll("#charts figure.plot").length === 6 && document.querySelectorAll("#tree .row").length > 0 &&
		document.getElementById("run-summary").textContent !== "" && document.querySelectorAll("#runs button").length === 2 &&
		document.querySelectorAll("#rubrics tbody tr[data-rubric]").length === 50 && document.getElementById("status").textContent === ""`
	// A shared machine only ever slows a load down, so the budget holds
	// when the fastest load meets it; a busy moment earns up to five more
	// tries, and every load must stay under a generous bound.
	var loads []time.Duration
	fastest := time.Hour
	for i := 0; i < 5 || i < 10 && fastest > time.Second; i++ {
		start := time.Now()
		p.do(chromedp.Navigate(e.srv.URL + "/?run=big"))
		p.wait(ready)
		d := time.Since(start)
		loads = append(loads, d)
		fastest = min(fastest, d)
	}
	slices.Sort(loads)
	t.Logf("run page of a 100-step × %d-task run: median load %v over %d loads (fastest %v, slowest %v)", tasks, loads[len(loads)/2], len(loads), loads[0], loads[len(loads)-1])
	if !raceEnabled && (loads[0] > time.Second || loads[len(loads)-1] > 8*time.Second) {
		t.Errorf("run page loads %v: want the fastest under 1s and every one under 8s", loads)
	}
	if s := js[string](p, `document.getElementById("step").value + "/" + document.querySelectorAll("#step option").length`); s != "100/100" {
		t.Errorf("step picker %s, want the last of 100 steps", s)
	}
	captions := js[[]string](p, `Array.from(document.querySelectorAll("#charts figcaption")).map(f => f.textContent)`)
	if len(captions) != 6 || !strings.HasPrefix(captions[0], "Success") || !strings.HasPrefix(captions[1], "Mean outcome reward") ||
		captions[4] != "trainer: kl" || captions[5] != "trainer: loss" {
		t.Errorf("charts %q: success and mean reward each want their own", captions)
	}
	p.shot("run")

	// Rubrics: public and candidate by default, 50 a page, with rho.
	rng := js[string](p, `document.getElementById("rubric-range").textContent`)
	if !strings.Contains(rng, fmt.Sprintf("1–50 of %d", inPlay)) {
		t.Errorf("rubric range %q, want 1–50 of %d", rng, inPlay)
	}
	pools := js[[]string](p, `Array.from(new Set(Array.from(document.querySelectorAll("#rubrics tbody tr")).map(tr => tr.dataset.pool)))`)
	if !slices.Equal(pools, []string{"public"}) {
		t.Errorf("first page pools %v, want public first", pools)
	}
	rho := js[string](p, `document.querySelector("#rubrics tbody tr td:nth-child(4)").textContent`)
	if want := jsRound(page.Rubrics[0].Rho, 3); rho != want {
		t.Errorf("first rubric's rho cell %q, want %q", rho, want)
	}
	p.do(chromedp.Click(chromedp.CSS("#rubric-next")))
	p.wait(`document.getElementById("rubric-range").textContent.includes("51–100 of")`)
	p.do(chromedp.SendKeys(chromedp.CSS("#rubric-q"), "minimal"))
	p.wait(`document.getElementById("rubric-range").textContent.startsWith(" 1–")`)
	texts := js[[]string](p, `Array.from(document.querySelectorAll("#rubrics tbody td.text")).map(td => td.textContent)`)
	for _, s := range texts {
		if !strings.Contains(s, "minimal") {
			t.Errorf("filtered rubric %q lacks the filter", s)
		}
	}

	// Comparison: tick the other run; curves overlay, configs line up.
	p.do(chromedp.Click(chromedp.CSS(`#runs input[data-compare="small"]`)))
	p.wait(`!document.getElementById("compare-panel").hidden && document.querySelectorAll("#compare-charts figure.plot").length === 5`)
	if s := js[string](p, `location.search`); !strings.Contains(s, "compare=big%2Csmall") {
		t.Errorf("comparison URL %q", s)
	}
	differs := js[[]string](p, `Array.from(document.querySelectorAll("#compare-config tr.differs")).map(tr => tr.dataset.key)`)
	if !slices.Contains(differs, "lr") || !slices.Contains(differs, "tree.b0") || slices.Contains(differs, "trainer") {
		t.Errorf("config rows that differ: %v", differs)
	}
	p.do(chromedp.SetValue(chromedp.CSS("#compare-panel select.xaxis"), "env"), chromedp.Evaluate[chromedp.Void](`document.querySelector("#compare-panel select.xaxis").dispatchEvent(new Event("change"))`))
	p.wait(`document.querySelector("#compare-charts .u-legend").textContent.includes("env steps")`)
	p.shot("compare")
	p.do(chromedp.Reload())
	p.wait(`!document.getElementById("compare-panel").hidden && document.querySelectorAll("#compare-charts figure.plot").length === 5`)
	// Opening a run from the list leaves the comparison for that run.
	p.do(chromedp.Click(chromedp.CSS(`#runs button[data-run="small"]`)))
	p.wait(`document.getElementById("compare-panel").hidden && document.getElementById("run-title").textContent === "run small" &&
		document.querySelectorAll("#step option").length === 20 && location.search.startsWith("?run=small")`)
}

// Without the token the page asks for it instead of failing.
func TestViewerTokenPrompt(t *testing.T) {
	const tok = "viewer-test-token-0123456789"
	e := newEnv(t, Options{Token: tok})
	buildViewerRun(t, e.db, "r", viewerSpec{steps: 1, tasks: 1, roots: 2, nodes: 4, children: 2, tokens: 2, obsLines: 1, seed: 4})
	p := newPage(t, e.srv.URL+"/")
	p.wait(`!document.getElementById("token-form").hidden`)
	if s := js[string](p, `document.getElementById("status").textContent`); s != "" {
		t.Errorf("status line %q with the token form up", s)
	}
	p.do(chromedp.SendKeys(chromedp.CSS("#token-input"), "wrong-token-wrong-token\r"))
	p.wait(`document.getElementById("token-error").textContent.includes("refused")`)
	p.do(chromedp.SendKeys(chromedp.CSS("#token-input"), tok+"\r"))
	p.wait(`document.getElementById("token-form").hidden && document.querySelectorAll("#tree .row").length > 0`)
}

// A run being written refreshes on its own.
func TestViewerLive(t *testing.T) {
	e := newEnv(t, Options{})
	spec := viewerSpec{steps: 2, tasks: 2, roots: 2, nodes: 6, children: 2, tokens: 2, obsLines: 1, seed: 6}
	buildViewerRun(t, e.db, "live", spec)
	p := newPage(t, e.srv.URL+"/?run=live")
	p.wait(`document.querySelectorAll("#step option").length === 2 && !document.getElementById("live-label").hidden`)
	err := e.db.Update(func(tx *store.Tx) error {
		r, err := tx.Run("live")
		if err != nil {
			return err
		}
		return fixtureGroup(r, rand.New(rand.NewPCG(1, 2)), spec, 3, 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	p.wait(`document.querySelectorAll("#step option").length === 3 && document.querySelectorAll("#charts figure.plot").length === 3`)
	// The reader's place stays: step 2 is still the one shown.
	if s := js[string](p, `document.getElementById("step").value`); s != "2" {
		t.Errorf("after a refresh the step is %s, want 2", s)
	}
}
