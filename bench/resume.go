package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/patrdb/patrdb/internal/workload"
	"github.com/patrdb/patrdb/store"
)

// resumeFormat versions the cached stores: bump it when the workload or
// the way they are built changes, so stale files are rebuilt.
const resumeFormat = 1

// frontierSeed seeds the one batch left half-grown at the end of every
// resume store, so stores of every size have the same frontier.
const frontierSeed = 0xf0f0

// resumeInfo describes a cached store; it is written next to the store once
// the build has finished, so a half-built file is never reused.
type resumeInfo struct {
	Format   int     `json:"format"`
	Target   int     `json:"target"`
	Nodes    int     `json:"nodes"`
	Turns    int     `json:"turns"`
	Events   uint64  `json:"events"`
	Frontier int     `json:"frontier"`
	Bytes    int64   `json:"bytes"`
	BuildSec float64 `json:"build_seconds"`
	Path     string  `json:"-"`
}

// resumeStore returns a frozenlake store of about target nodes under dir,
// building it (NoSync, one transaction per batch) if no finished one is
// cached. All batches but the last are closed trees; the last, seeded
// alike for every size, is left after two intervals with its active nodes
// on the frontier.
func resumeStore(dir string, target int, seed uint64, trees int, log io.Writer) (resumeInfo, error) {
	base := filepath.Join(dir, fmt.Sprintf("resume-lake-n%d-s%d-t%d-v%d.db", target, seed, trees, resumeFormat))
	marker := base + ".json"
	if b, err := os.ReadFile(marker); err == nil {
		var info resumeInfo
		if json.Unmarshal(b, &info) == nil && info.Format == resumeFormat {
			if _, err := os.Stat(base); err == nil {
				info.Path = base
				return info, nil
			}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return resumeInfo{}, err
	}
	fmt.Fprintf(log, "building resume store of ~%d nodes (cached in %s)...\n", target, base)
	t0 := time.Now()
	cfg := workload.FrozenLakeConfig(seed)
	cfg.Trees = trees
	gen, err := workload.NewGenerator(cfg)
	if err != nil {
		return resumeInfo{}, err
	}
	tmp := base + ".building"
	o := store.DefaultOptions()
	o.NoSync = true
	c := &patrdbC{opts: o}
	if err := c.open(tmp); err != nil {
		return resumeInfo{}, err
	}
	info := resumeInfo{Format: resumeFormat, Target: target}
	final := gen.NextWithSeed(frontierSeed) // sized up front to know when to stop
	finalNodes := 0
	for _, txn := range final.Txns[:min(2, len(final.Txns))] {
		finalNodes += countAdds(txn)
	}
	gen, _ = workload.NewGenerator(cfg)
	apply := func(txns [][]workload.Op) error {
		var all []workload.Op
		for _, t := range txns {
			all = append(all, t...)
		}
		p, err := c.prepare(all)
		if err != nil {
			return err
		}
		return c.apply(p)
	}
	for info.Nodes+finalNodes < target {
		b := gen.Next()
		if err := apply(b.Txns); err != nil {
			_ = c.close()
			return info, err
		}
		info.Nodes += b.Stats.Nodes
		info.Turns += b.Stats.Turns
	}
	b := gen.NextWithSeed(frontierSeed)
	if err := apply(b.Txns[:min(2, len(b.Txns))]); err != nil {
		_ = c.close()
		return info, err
	}
	for _, txn := range b.Txns[:min(2, len(b.Txns))] {
		info.Nodes += countAdds(txn)
		for _, op := range txn {
			info.Turns += len(op.Turns)
		}
	}
	err = c.db.ViewRun(benchRun, func(r *store.RunTx) error {
		f, err := r.Frontier()
		info.Frontier, info.Events = len(f), r.LastSeq()
		return err
	})
	if cerr := c.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return info, err
	}
	if err := syncFile(tmp); err != nil {
		return info, err
	}
	if err := os.Rename(tmp, base); err != nil {
		return info, err
	}
	st, err := os.Stat(base)
	if err != nil {
		return info, err
	}
	info.Bytes = st.Size()
	info.BuildSec = time.Since(t0).Seconds()
	mb, _ := json.Marshal(info)
	if err := os.WriteFile(marker, mb, 0o644); err != nil {
		return info, err
	}
	info.Path = base
	fmt.Fprintf(log, "  %d nodes, %d events, %.0f MB in %.0f s\n", info.Nodes, info.Events, float64(info.Bytes)/1e6, info.BuildSec)
	return info, nil
}

// syncFile makes a NoSync-built file durable before it is cached.
func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func countAdds(txn []workload.Op) int {
	n := 0
	for _, op := range txn {
		if op.Kind == workload.OpAddNode {
			n++
		}
	}
	return n
}
