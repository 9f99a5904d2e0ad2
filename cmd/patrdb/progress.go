package main

import (
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progressBar returns a progress callback, for the libraries' OnProgress
// hooks, that draws a bar labelled desc on w, and a finish function that
// clears it. The bar is made on the first call, when the total is known.
func progressBar(w io.Writer, desc string) (update func(done, total int64), finish func()) {
	var bar *progressbar.ProgressBar
	update = func(done, total int64) {
		if bar == nil {
			bar = progressbar.NewOptions64(total,
				progressbar.OptionSetWriter(w),
				progressbar.OptionSetDescription(desc),
				progressbar.OptionShowCount(),
				progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionClearOnFinish(),
			)
		}
		_ = bar.Set64(done)
	}
	finish = func() {
		if bar != nil {
			_ = bar.Finish()
		}
	}
	return update, finish
}

// both calls f and g (either may be nil).
func both(f, g func(done, total int64)) func(done, total int64) {
	switch {
	case f == nil:
		return g
	case g == nil:
		return f
	}
	return func(done, total int64) { f(done, total); g(done, total) }
}
