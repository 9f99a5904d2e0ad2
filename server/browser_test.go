package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumPath is Debian's chromium, which .ci/run installs with apt-get.
const chromiumPath = "/usr/bin/chromium"

// page is a headless Chromium tab for one test, with bounded steps.
type page struct {
	t   *testing.T
	ctx context.Context
}

func newPage(t *testing.T, url string) *page {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("no browser at %s (apt-get install chromium): %v", chromiumPath, err)
	}
	// The browser's temporary files (its singleton socket's folder) go in
	// the test's folder too, not in /tmp, where every run left ten.
	dir := t.TempDir()
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
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
		chromedp.Env("TMPDIR=" + tmp),
		chromedp.WindowSize(1400, 1000),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelB := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	// The first action starts the browser and must not run under a timeout
	// (it would stop the browser); later ones are bounded.
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("browser: %v", err)
	}
	ctx, cancelT := context.WithTimeout(bctx, 90*time.Second)
	t.Cleanup(func() { cancelT(); cancelB(); cancelA() })
	// An uncaught exception or a blocked inline style or script (the page's
	// Content-Security-Policy) fails the test; HTTP errors are the tests'
	// own business (a 401 before the token, the missing favicon).
	var mu sync.Mutex
	var problems, network []string
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.IsException() || m.Type == chromedp.ConsoleError && m.Source != "network" {
				mu.Lock()
				problems = append(problems, fmt.Sprintf("%s %s (%s:%d)", m.Type, m.Text, m.URL, m.Line))
				mu.Unlock()
			} else if m.Source == "network" && !strings.HasSuffix(m.URL, "/favicon.ico") {
				mu.Lock()
				network = append(network, fmt.Sprintf("%s (%s)", m.Text, m.URL))
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range problems {
			t.Errorf("browser console: %s", p)
		}
		// A failed request is not a failure by itself (a 401 before the
		// token), but when a wait then fails the log names it.
		if t.Failed() {
			for _, n := range network {
				t.Logf("browser network: %s", n)
			}
		}
	})
	p := &page{t: t, ctx: ctx}
	if url != "about:blank" {
		p.do(chromedp.Navigate(url))
	}
	return p
}

func (p *page) do(actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, actions...); err != nil {
		p.t.Fatalf("browser: %v", err)
	}
}

// wait polls a JavaScript condition until it holds (bounded by p's time).
func (p *page) wait(cond string) {
	p.t.Helper()
	var err error
	for range 3 {
		_, err = chromedp.Run(p.ctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(20*time.Second)))
		// A poll that starts while a navigation swaps the page's script
		// context loses that context; it is tried again in the new one.
		if err == nil || !strings.Contains(err.Error(), "Cannot find context") {
			break
		}
	}
	if err != nil {
		status, _ := evalJS[string](p, `document.getElementById("status").textContent`)
		p.t.Fatalf("waiting for %s: %v (status line %q)", cond, err, status)
	}
}

func evalJS[T any](p *page, expr string) (T, error) {
	return chromedp.Run(p.ctx, chromedp.Evaluate[T](expr))
}

func js[T any](p *page, expr string) T {
	p.t.Helper()
	v, err := evalJS[T](p, expr)
	if err != nil {
		p.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// shot saves a screenshot of the viewport as docs-ready viewer-NAME.png
// into $PATRDB_SCREENSHOTS when set (the README shows them), and into
// $PATRDB_ARTIFACTS for CI otherwise.
func (p *page) shot(name string) {
	p.t.Helper()
	dir := os.Getenv("PATRDB_SCREENSHOTS")
	if dir == "" {
		dir = os.Getenv("PATRDB_ARTIFACTS")
	}
	if dir == "" {
		return
	}
	png, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Fatal(err)
	}
	f := filepath.Join(dir, "viewer-"+name+".png")
	if err := os.WriteFile(f, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("screenshot %s (%d bytes)", f, len(png))
}

func (p *page) scrollTo(sel string) {
	p.t.Helper()
	js[bool](p, fmt.Sprintf(`(document.querySelector(%q).scrollIntoView({block: "start"}), true)`, sel))
}
