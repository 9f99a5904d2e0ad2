package main

import (
	"github.com/patrdb/patrdb/store"
)

// checkProgress draws a check's progress on stderr when it is a terminal,
// one bar per part of each run (a part whose size is not known ahead
// counts up without a total); otherwise report is nil and the check
// reports nothing as it goes.
func (a *App) checkProgress() (report func(store.CheckProgress), done func()) {
	if a.json || !a.isTerminal(a.stderr) {
		return nil, func() {}
	}
	var label string
	update, finish := func(int64, int64) {}, func() {}
	report = func(p store.CheckProgress) {
		if l := progressLabel(p); l != label {
			finish()
			label = l
			update, finish = progressBar(a.stderr, l)
		}
		total := p.Total
		if total <= 0 {
			total = -1 // a spinner with a count
		}
		update(p.Done, total)
	}
	return report, func() { finish() }
}

// progressLabel names the part of a check in progress: "check run r1:
// nodes".
func progressLabel(p store.CheckProgress) string {
	if p.Run == "" {
		return "check: " + p.Phase
	}
	return "check run " + p.Run + ": " + p.Phase
}
