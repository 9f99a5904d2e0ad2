package main

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/patrdb/patrdb/model"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/patrdb/patrdb/store"
)

func newCheckCommand(app *App) *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "Verify the file: bbolt structure, every value's CRC, tree and pool invariants",
		Long: `check reads the whole file: bbolt's page structure, the CRC and decoding of
every value, and the data model's invariants (parents precede children, fork
points in range, the children index and the frontier agree with the nodes,
turns are contiguous, events are numbered 1..n, advantages refer to leaves,
rubric pools are valid). It prints "ok" and what it checked, or one line per
violation and exits 1. A file too damaged to open is reported in one line:
exit 1 when the damage is corruption, 2 when the file cannot be read at all.`,
		Args: needArgs(),
		RunE: func(*cobra.Command, []string) error { return app.check() },
	}
}

// checkOutput is `check --json`.
type checkOutput struct {
	OK         bool           `json:"ok"`
	Runs       int            `json:"runs"`
	Nodes      int            `json:"nodes"`
	Events     int            `json:"events"`
	Violations []violationRow `json:"violations"`
}

type violationRow struct {
	Kind   string `json:"kind"` // structure, corrupt or invariant
	Bucket string `json:"bucket"`
	Key    string `json:"key"` // hex
	Detail string `json:"detail"`
}

func (a *App) check() error {
	db, err := a.openRead()
	if err != nil {
		if errors.Is(err, store.ErrCorrupt) {
			// Damage found while opening is a failed check, not a usage error.
			return failedErrorf("check failed: %s", errorText(err))
		}
		return err
	}
	defer db.Close()
	report, clearLine := a.checkProgress()
	vs, err := db.Check(&store.CheckOptions{Progress: report})
	clearLine()
	if err != nil && !errors.Is(err, store.ErrCorrupt) {
		return err
	}
	out := checkOutput{OK: len(vs) == 0, Violations: []violationRow{}}
	for _, v := range vs {
		row := violationRow{Kind: v.Kind, Bucket: v.Bucket, Detail: v.Detail}
		if v.Key != nil {
			row.Key = hex.EncodeToString(v.Key)
		}
		out.Violations = append(out.Violations, row)
	}
	countChecked(db, &out)

	if a.json {
		if err := a.printJSON(out); err != nil {
			return err
		}
	} else {
		w := bufio.NewWriter(a.stdout)
		if out.OK {
			fmt.Fprintf(w, "ok: %s, %s, %s checked\n",
				plural(out.Runs, "run", "runs"), plural(out.Nodes, "node", "nodes"), plural(out.Events, "event", "events"))
		}
		for _, v := range vs {
			fmt.Fprintln(w, v.String())
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if !out.OK {
		return failedErrorf("check failed: %s in %s", plural(len(vs), "violation", "violations"), a.dbPath)
	}
	return nil
}

// countChecked fills in how many runs, nodes and events the file holds. On a
// damaged file it counts what it can: a fault reading a broken page stops the
// count, it does not crash the check that already ran.
func countChecked(db *store.DB, out *checkOutput) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() { _ = recover() }()
	_ = db.View(func(tx *store.Tx) error {
		// Only sound pages are counted: bbolt's Stats recurses over them.
		if _, err := tx.Check(&store.CheckOptions{Parts: store.CheckRunList}); err != nil {
			return nil
		}
		ids, err := tx.RunIDs()
		if err != nil {
			return err
		}
		out.Runs = len(ids)
		for _, id := range ids {
			if _, err := tx.Check(&store.CheckOptions{Run: id, Parts: store.CheckPages}); err != nil {
				continue
			}
			r, err := tx.Run(id)
			if err != nil {
				continue
			}
			s, err := r.Summary(model.SummaryOptions{})
			if err != nil {
				continue
			}
			out.Nodes += s.Nodes
			out.Events += int(s.Events)
		}
		return nil
	})
}
