package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// plotRuns trains a tiny PaTR-vs-GRPO comparison over two seeds into a fresh
// file and returns its path and run ids.
func plotRuns(t *testing.T) (string, []string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "patr.db")
	cli(t, "demo", "--db", path, "--run", "p", "--mode", "both", "--budget", "900", "--batch", "4", "--seeds", "2").ok(t)
	return path, []string{"p-patr-s1", "p-patr-s2", "p-grpo-s1", "p-grpo-s2"}
}

// near reports whether c is within tol of want on every channel.
func near(c color.Color, want color.RGBA, tol int) bool {
	r, g, b, _ := c.RGBA()
	d := func(x uint32, y uint8) bool { v := int(x>>8) - int(y); return v <= tol && -v <= tol }
	return d(r, want.R) && d(g, want.G) && d(b, want.B)
}

// TestPlotDrawsTheStoredRuns: plot renders the runs' curves into a PNG of
// the asked size with both setups' colours in it, and an SVG that parses;
// the file is not changed.
func TestPlotDrawsTheStoredRuns(t *testing.T) {
	path, runs := plotRuns(t)
	before := fileHash(t, path)
	dir := t.TempDir()

	pngPath := filepath.Join(dir, "curves.png")
	out := cli(t, append([]string{"--db", path, "plot", "--out", pngPath, "--size", "640x480", "--episodes", "50", "--json"}, runs...)...).ok(t)
	var rep plotOutput
	if err := json.Unmarshal([]byte(out.stdout), &rep); err != nil {
		t.Fatalf("plot --json: %v\n%s", err, out.stdout)
	}
	if len(rep.Setups) != 2 || rep.Setups[0].Label != "patr" || rep.Setups[1].Label != "grpo" ||
		len(rep.Setups[0].Runs) != 2 || rep.Setups[0].EnvSteps != 900 || rep.Setups[1].EnvSteps != 900 {
		t.Fatalf("plot --json = %+v", rep)
	}
	f, err := os.Open(pngPath)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		t.Fatalf("the PNG does not decode: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 640 || b.Dy() != 480 {
		t.Fatalf("PNG is %dx%d, want 640x480", b.Dx(), b.Dy())
	}
	// Each setup's lines are drawn in its colour, and the panels are not
	// blank: a good share of the pixels is not the white background.
	counts := make([]int, 2)
	nonWhite := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := img.At(x, y)
			for i := range counts {
				if near(c, setupColor(i), 40) {
					counts[i]++
				}
			}
			if !near(c, color.RGBA{R: 255, G: 255, B: 255}, 8) {
				nonWhite++
			}
		}
	}
	if counts[0] < 200 || counts[1] < 200 {
		t.Errorf("pixels in the setups' colours: %v, want both curves drawn", counts)
	}
	if share := float64(nonWhite) / float64(b.Dx()*b.Dy()); share < 0.02 {
		t.Errorf("only %.1f%% of the image is drawn", 100*share)
	}

	svgPath := filepath.Join(dir, "curves.svg")
	cli(t, append([]string{"--db", path, "plot", "--out", svgPath, "--size", "800x600", "--episodes", "50"}, runs...)...).ok(t)
	raw, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	var svg struct {
		XMLName xml.Name `xml:"svg"`
		Width   string   `xml:"width,attr"`
		Height  string   `xml:"height,attr"`
	}
	if err := xml.Unmarshal(raw, &svg); err != nil {
		t.Fatalf("the SVG does not parse: %v", err)
	}
	if svg.Width != "600pt" || svg.Height != "450pt" { // 800x600 px at 96 dpi
		t.Errorf("SVG is %s x %s, want 600pt x 450pt", svg.Width, svg.Height)
	}
	for _, want := range []string{"stroke:#1F77B4", "stroke:#D62728", "patr (2 runs)", "env steps"} {
		if !bytes.Contains(raw, []byte(want)) {
			t.Errorf("the SVG has no %q", want)
		}
	}
	if fileHash(t, path) != before {
		t.Fatal("plot changed the file")
	}
}

func TestPlotBadInput(t *testing.T) {
	path, runs := plotRuns(t)
	fix := fixture(t) // runs that are not the demo's
	dir := t.TempDir()
	out := filepath.Join(dir, "x.png")
	for _, c := range []struct {
		args []string
		code int
		frag string
	}{
		{[]string{"--db", path, "plot", "--out", out}, 2, "RUN"},
		{[]string{"--db", path, "plot", runs[0]}, 2, "--out"},
		{[]string{"--db", path, "plot", runs[0], "--out", filepath.Join(dir, "x.jpg")}, 2, ".svg or .png"},
		{[]string{"--db", path, "plot", runs[0], "--out", out, "--size", "big"}, 2, "--size"},
		{[]string{"--db", path, "plot", runs[0], "--out", out, "--episodes", "0"}, 2, "--episodes"},
		{[]string{"--db", path, "plot", "nope", "--out", out}, 1, "not found"},
		{[]string{"--db", path, "plot", "bad id", "--out", out}, 2, "run id"},
		{[]string{"--db", fix, "plot", "patr-4x4", "--out", out}, 2, "not written by patrdb demo"},
		{[]string{"--db", path, "plot", runs[0], "--out", filepath.Join(dir, "missing", "x.png")}, 2, "--out"},
	} {
		t.Run(strings.Join(c.args[2:], " "), func(t *testing.T) {
			cli(t, c.args...).fails(t, c.code, c.frag)
		})
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed plots left %d files behind", len(entries))
	}
}
