package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
)

// bigfileMain is `go run ./bench bigfile`: it builds (or reuses) the cached
// resume stores and times the read commands on the largest one.
func bigfileMain(args []string, root string, log io.Writer) error {
	fs := flag.NewFlagSet("bench bigfile", flag.ContinueOnError)
	fs.SetOutput(log)
	sizes := fs.String("sizes", "10000,1000000", "node counts of the stores, comma-separated (smallest is the resume anchor)")
	out := fs.String("out", filepath.Join(root, "bench", "out"), "work directory (cached stores)")
	trees := fs.Int("trees", 64, "trees per batch")
	seed := fs.Uint64("seed", 1, "workload seed")
	buildOnly := fs.Bool("build-only", false, "build the stores and stop")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ns, err := parseInts(*sizes)
	if err != nil {
		return err
	}
	for _, n := range ns {
		info, err := resumeStore(*out, n, *seed, *trees, log)
		if err != nil {
			return err
		}
		fmt.Fprintf(log, "store %d: %s (%d nodes, %.0f MB)\n", n, info.Path, info.Nodes, float64(info.Bytes)/1e6)
	}
	if *buildOnly {
		return nil
	}
	return nil
}
