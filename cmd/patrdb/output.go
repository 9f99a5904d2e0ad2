package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// printJSON writes v as one indented JSON object and a newline. HTML
// escaping is off: rubric and action text should read as written.
func (a *App) printJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// isTerminal reports whether w is a character device (a terminal), the
// usual test for "a person is reading this" without a terminal library.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// colorOn reports whether output may carry ANSI colours: stdout is a
// terminal and NO_COLOR (https://no-color.org) is unset or empty.
func (a *App) colorOn() bool {
	return a.getenv("NO_COLOR") == "" && a.isTerminal(a.stdout)
}

// ANSI SGR codes used for statuses.
const (
	ansiRed     = "31"
	ansiGreen   = "32"
	ansiYellow  = "33"
	ansiBlue    = "34"
	ansiMagenta = "35"
	ansiDim     = "2"
)

// paint wraps s in an ANSI colour when colour is on, and returns it
// unchanged otherwise. Never use it inside a tabwriter table: the escape
// bytes would count as width.
func (a *App) paint(code, s string) string {
	if code == "" || !a.colorOn() {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

// newTable returns a writer that aligns tab-separated columns; Flush it.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// fmtNum prints a value with at most four decimals and no trailing zeros:
// rewards of 1 and 0 read as "1" and "0", a mean as "0.4167".
func fmtNum(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	s := strconv.FormatFloat(x, 'f', 4, 64)
	s = strings.TrimRight(s, "0")
	s = strings.TrimSuffix(s, ".")
	if s == "-0" {
		s = "0"
	}
	return s
}

// fmtSigned is fmtNum with an explicit sign, for centred values
// (advantages, rubric scores).
func fmtSigned(x float64) string {
	s := fmtNum(x)
	if !strings.HasPrefix(s, "-") && s != "0" {
		s = "+" + s
	}
	return s
}

// fmtScore prints a process score in [0,1] with two decimals.
func fmtScore(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) }

// fmtBytes prints a size in binary units: 512 B, 96.0 KiB, 1.2 MiB.
func fmtBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// fmtTime prints a stored unix-nanosecond time in UTC, RFC 3339 with
// milliseconds; zero prints as "-".
func fmtTime(ns int64) string {
	if ns == 0 {
		return "-"
	}
	return time.Unix(0, ns).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// jsonTime is fmtTime for JSON: RFC 3339 with nanoseconds, "" for zero.
func jsonTime(ns int64) string {
	if ns == 0 {
		return ""
	}
	return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
}

// truncate shortens s to at most n runes on one line, marking the cut with
// an ellipsis.
func truncate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// plural returns "1 node", "3 nodes".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// rawJSON returns b as a JSON value when it is valid JSON (a run's config
// is), and as a JSON string otherwise, so --json never emits base64.
func rawJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	if json.Valid(b) {
		return json.RawMessage(b)
	}
	s, _ := json.Marshal(string(b))
	return s
}
