package publish

import (
	"errors"
	"fmt"
	"io/fs"
)

var (
	// ErrExists: the destination exists and the output may not replace
	// it. It matches fs.ErrExist too.
	ErrExists = fmt.Errorf("publish: the destination exists: %w", fs.ErrExist)

	// ErrInterrupted: a stop signal removed the output before it was
	// published; nothing was written to the destination.
	ErrInterrupted = errors.New("publish: interrupted by a stop signal")
)
