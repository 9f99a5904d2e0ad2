package server

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/store"
)

// A trajectory reads as an LLM wrote it, and the place a reader reached is
// in the URL: reload and back return to it.
func TestViewerTrajectory(t *testing.T) {
	e := newEnv(t, Options{})
	buildViewerRun(t, e.db, "llm", viewerSpec{steps: 2, tasks: 2, roots: 3, nodes: 12, children: 2, tokens: 40, obsLines: 30, seed: 3})
	var gv replay.GroupView
	e.get("/api/v1/runs/llm/groups/3/view", &gv)
	var a, b replay.TreeNode // a child that inherits a prefix, and another node
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
	var tv replay.TrajectoryView
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
	if n := js[int](p, `document.querySelectorAll("#traj li.turn .strip .cell").length`); n != len(tv.Turns)*min(40, replay.StripBins) {
		t.Errorf("%d logprob cells", n)
	}
	if n := js[int](p, `document.querySelectorAll("#traj li.score").length`); n != len(tv.Scores) || n == 0 {
		t.Errorf("%d score marks, want %d", n, len(tv.Scores))
	}
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
	var gv replay.GroupView
	e.get("/api/v1/runs/big/groups/1/view", &gv)
	if gv.Summary.Nodes < 2000 {
		t.Fatalf("fixture group has %d nodes", gv.Summary.Nodes)
	}
	deep := gv.Nodes[0]
	for _, n := range gv.Nodes {
		if n.Depth > deep.Depth && n.Status == store.NodeCompleted {
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
	// Colour by reward: leaves with different rewards get different colours.
	p.do(chromedp.Click(chromedp.CSS("#expand-all")))
	p.wait(fmt.Sprintf(`document.querySelectorAll("#tree .row").length === %d`, len(gv.Nodes)))
	colours := js[map[string][]string](p, `(() => { const m = {}; for (const n of tree.view.nodes) if (n.reward !== null && n.status === "completed") {
		const c = getComputedStyle(document.querySelector('#tree .row[data-node="' + n.id + '"] .dot')).backgroundColor;
		(m[n.reward] = m[n.reward] || []).includes(c) || m[n.reward].push(c); } return m; })()`)
	if len(colours["0"]) != 1 || len(colours["1"]) != 1 || colours["0"][0] == colours["1"][0] {
		t.Errorf("colours by reward: %v", colours)
	}
	p.shot("tree")
	// The leaf table sorts by advantage and opens a leaf.
	p.do(chromedp.Click(chromedp.CSS(`#leaves th[data-key="advantage"]`)))
	advs := js[[]float64](p, `Array.from(document.querySelectorAll("#leaves tbody tr td:nth-child(4)")).map(td => Number(td.textContent))`)
	if len(advs) != gv.Summary.Leaves || !slices.IsSortedFunc(advs, func(a, b float64) int { return -cmpFloat(a, b) }) {
		t.Errorf("%d leaf rows (want %d), sorted by advantage descending: %v", len(advs), gv.Summary.Leaves, advs[:min(8, len(advs))])
	}
	first := js[string](p, `document.querySelector("#leaves tbody tr").dataset.node`)
	p.do(chromedp.Click(chromedp.CSS(`#leaves tbody tr`)))
	p.wait(fmt.Sprintf(`document.getElementById("traj-title").textContent.startsWith("Trajectory of node %s:")`, first))
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
