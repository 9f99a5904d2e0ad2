package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/patrdb/patrdb/store"
)

// chromiumPath is Debian's chromium, which .ci/run installs with apt-get.
const chromiumPath = "/usr/bin/chromium"

// demoStore fills a run the way a trainer would, through the API: steps of
// groups whose trees expand, survive and prune, closed with advantages,
// plus rubrics in every pool.
func demoStore(e *testEnv, run string, steps, groups int) {
	e.t.Helper()
	createRun(e, run, `{"b0":3,"k":2,"m":2,"top_expand":1,"delta":0.1,"max_turns":8}`)
	for step := 1; step <= steps; step++ {
		growStep(e, run, uint64(step), fakeTasks(groups), 2)
	}
	err := e.db.Update(func(tx *store.Tx) error {
		rt, _ := tx.Run(run)
		pub, err := rt.PutRubric(store.Rubric{Pool: store.PoolPublic, Text: "moves toward the goal", CreatedStep: 1, Support: 3, Usage: store.RubricUsage{Activations: 2, LastActivation: 2}})
		if err != nil {
			return err
		}
		d, err := rt.PutRubric(store.Rubric{Pool: store.PoolCandidate, Text: "avoids holes", CreatedStep: 2})
		if err != nil {
			return err
		}
		if _, err := rt.MoveRubric(d.ID, store.RubricMove{To: store.PoolMerged, MergedInto: pub.ID}); err != nil {
			return err
		}
		_, err = rt.PutRubric(store.Rubric{Pool: store.PoolCandidate, Text: "does not repeat a move", CreatedStep: 3})
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

func TestDemoStoreShape(t *testing.T) {
	e := newEnv(t, Options{})
	demoStore(e, "demo", 2, 2)
	var s RunSummary
	e.get("/api/v1/runs/demo", &s)
	if s.Groups != 4 || s.OpenGroups != 0 || s.ByStatus[store.NodeExpanded] == 0 || s.ByStatus[store.NodePruned] == 0 || s.ByStatus[store.NodeCompleted] == 0 {
		t.Fatalf("demo store lacks variety: %+v", s)
	}
}

// The viewer in a real browser: the runs list and charts render, the tree
// of the latest group is drawn, and clicking a node that inherits a prefix
// shows its turns with the inherited ones marked.
func TestViewerInChromium(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("no browser at %s (apt-get install chromium): %v", chromiumPath, err)
	}
	e := newEnv(t, Options{})
	demoStore(e, "demo", 3, 2)

	// A node with a parent, from the group the page opens by default (the
	// first group of the last step), and its trajectory as the API has it.
	var groups struct{ Groups []store.Group }
	e.get("/api/v1/runs/demo/steps/3/groups", &groups)
	var tr GroupTree
	e.get(fmt.Sprintf("/api/v1/runs/demo/groups/%d", groups.Groups[0].ID), &tr)
	var target store.Node
	for _, n := range tr.Nodes {
		if n.Parent != 0 && n.Turns > 0 {
			target = n
			break
		}
	}
	if target.ID == 0 {
		t.Fatal("demo group has no child with turns")
	}
	var traj Trajectory
	e.get(fmt.Sprintf("/api/v1/runs/demo/nodes/%d/trajectory", target.ID), &traj)

	dir := t.TempDir()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(filepath.Join(dir, "profile")),
		chromedp.WindowSize(1400, 1000),
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	bctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer cancel()
	// The first action starts the browser and must not run under a timeout
	// (it would stop the browser); later ones are bounded.
	if err := chromedp.Do(bctx, chromedp.Navigate(e.srv.URL+"/")); err != nil {
		t.Fatalf("browser: %v", err)
	}
	ctx, cancelT := context.WithTimeout(bctx, 30*time.Second)
	defer cancelT()

	sel := chromedp.CSS(fmt.Sprintf(`#tree .node[data-node="%d"]`, target.ID))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("browser: %v", err)
		}
	}
	must(chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#runs button[data-run="demo"]`)), chromedp.WaitVisible(sel)))
	runsText, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#runs`)))
	must(err)
	nodes, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#tree .node").length`))
	must(err)
	chartPaths, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#charts path.series").length`))
	must(err)
	rubricRows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#rubrics tbody tr[data-pool]").length`))
	must(err)
	must(chromedp.Do(ctx, chromedp.Click(sel), chromedp.WaitVisible(chromedp.CSS(`#traj li.own`))))
	title, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#traj-title`)))
	must(err)
	status, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(`#status`)))
	must(err)
	if !strings.Contains(runsText, "demo") {
		t.Errorf("runs list: %q", runsText)
	}
	if nodes != len(tr.Nodes) {
		t.Errorf("tree draws %d nodes, the group has %d", nodes, len(tr.Nodes))
	}
	if chartPaths != 2+2+4 || rubricRows != 3 {
		t.Errorf("%d chart series, %d rubric rows", chartPaths, rubricRows)
	}
	want := fmt.Sprintf("Trajectory of node %d: %d turns, %d inherited", target.ID, len(traj.Turns), traj.Inherited)
	if title != want || status != "" {
		t.Errorf("trajectory title %q (status %q), want %q", title, status, want)
	}
	// Every turn is listed in order; the inherited prefix is marked and
	// ends where the node's own turns begin.
	turns, err := chromedp.Run(ctx, chromedp.Evaluate[[]map[string]string](`Array.from(document.querySelectorAll("#traj-turns li")).map(li => ({
		cls: li.className, node: li.dataset.node || "", action: (li.querySelector(".act") || {}).textContent || ""}))`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, li := range turns {
		got = append(got, li["cls"]+":"+li["node"]+":"+li["action"])
	}
	var expect []string
	for i, pt := range traj.Turns {
		if i == traj.Inherited && traj.Inherited > 0 {
			expect = append(expect, "prefix-end::")
		}
		cls := "turn own"
		if i < traj.Inherited {
			cls = "turn inherited"
		}
		expect = append(expect, fmt.Sprintf("%s:%d:%s", cls, pt.Node, pt.Action))
	}
	if strings.Join(got, "\n") != strings.Join(expect, "\n") {
		t.Errorf("trajectory panel:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(expect, "\n"))
	}
	if traj.Inherited == 0 {
		t.Error("the clicked node inherits nothing: the test does not exercise the prefix marking")
	}

	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	must(err)
	shotDir := os.Getenv("PATRDB_ARTIFACTS")
	if shotDir == "" {
		shotDir = os.TempDir()
	}
	shot := filepath.Join(shotDir, "patrdb-viewer.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("viewer screenshot: %s (%d bytes)", shot, len(png))
}
