package export

import "errors"

// Sentinel errors: every error the package returns for bad input wraps one
// of these, so callers test with errors.Is.
var (
	// ErrOutExists: the export target exists and is not an empty folder,
	// and Force was not set.
	ErrOutExists = errors.New("export: target exists and is not empty")

	// ErrExportOptions: an ExportOptions field is out of range (no Out, an
	// unknown Format).
	ErrExportOptions = errors.New("export: bad export options")
)
