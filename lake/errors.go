package lake

import (
	"errors"
	"fmt"
)

// Sentinel errors; every error the package returns about the lake wraps one
// of these (or a store error), so callers test with errors.Is.
var (
	// ErrURL: the lake's URL is neither a folder nor s3://bucket[/prefix].
	ErrURL = errors.New("lake: bad lake URL")
	// ErrConflict: the lake holds a run under that name from another file
	// (or another export of patrdb's) and the export would mix the two.
	// RunConflictError says which.
	ErrConflict = errors.New("lake: the lake holds another run under that name")
	// ErrBusy: another process is exporting the same run into the lake.
	ErrBusy = errors.New("lake: another exporter holds the run")
	// ErrLayout: the folder holds something that is not a lake (a
	// run=/step= export, a file).
	ErrLayout = errors.New("lake: not a lake")
	// ErrDropped: the file dropped steps (retention) that the lake does not
	// hold, so exporting it would leave a run with a hole.
	ErrDropped = errors.New("lake: the file dropped steps the lake lacks")
	// ErrNoRun: the lake holds no run under that name.
	ErrNoRun = errors.New("lake: no such run in the lake")
	// ErrOptions: an option is out of range.
	ErrOptions = errors.New("lake: bad options")
)

// RunConflictError is ErrConflict with what the lake holds.
type RunConflictError struct {
	Run  string // the name in the lake
	Have Source // the file the lake's run came from; zero when unknown (no manifest)
	Want Source // the file being exported
}

func (e *RunConflictError) Error() string {
	if e.Have.Run == "" && e.Have.CreatedAt == 0 {
		return fmt.Sprintf("%v: run=%s holds data this export did not write (another patrdb version, or another tool): export under another name, or replace it", ErrConflict, e.Run)
	}
	return fmt.Sprintf("%v: run=%s came from run %q created at %d, this is run %q created at %d: export under another name, or replace it",
		ErrConflict, e.Run, e.Have.Run, e.Have.CreatedAt, e.Want.Run, e.Want.CreatedAt)
}

func (e *RunConflictError) Unwrap() error { return ErrConflict }

// BusyError is ErrBusy with who holds the run.
type BusyError struct {
	Run    string
	Holder string // host and process, as the holder wrote them; "" when unknown
}

func (e *BusyError) Error() string {
	who := ""
	if e.Holder != "" {
		who = " (" + e.Holder + ")"
	}
	return fmt.Sprintf("%v: run %s is being exported into this lake by another process%s", ErrBusy, e.Run, who)
}

func (e *BusyError) Unwrap() error { return ErrBusy }
