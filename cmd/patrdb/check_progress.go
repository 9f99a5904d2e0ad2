package main

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/term"

	"github.com/patrdb/patrdb/store"
)

// checkProgress renders a check's progress as one line rewritten in place
// on stderr, when stderr is a terminal; otherwise it is nil and the check
// reports nothing as it goes.
func (a *App) checkProgress() (report func(store.CheckProgress), done func()) {
	f, ok := a.stderr.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil, func() {}
	}
	var last time.Time
	report = func(p store.CheckProgress) {
		if now := time.Now(); now.Sub(last) >= 100*time.Millisecond || p.Done == 0 {
			last = now
			fmt.Fprintf(f, "\r\033[K%s", progressLine(p))
		}
	}
	return report, func() { fmt.Fprint(f, "\r\033[K") }
}

// progressLine is a check's progress in words: "checking run r1: nodes
// 120000 of 1000438 (12%)".
func progressLine(p store.CheckProgress) string {
	where := "checking"
	if p.Run != "" {
		where += " run " + p.Run
	}
	switch {
	case p.Total > 0:
		return fmt.Sprintf("%s: %s %d of %d (%d%%)", where, p.Phase, p.Done, p.Total, min(100, p.Done*100/p.Total))
	case p.Done > 0:
		return fmt.Sprintf("%s: %s %d", where, p.Phase, p.Done)
	}
	return fmt.Sprintf("%s: %s", where, p.Phase)
}
