// Package deps pins modules that packages under construction will import,
// so concurrent work does not race on go.mod. Removed once they are used.
package deps

import (
	_ "github.com/chromedp/chromedp"
	_ "github.com/parquet-go/parquet-go"
	_ "github.com/schollz/progressbar/v3"
	_ "github.com/spf13/cobra"
	_ "modernc.org/sqlite"
	_ "pgregory.net/rapid"
)
