package tree

import "errors"

// ErrInvalidConfig is wrapped by every error Config.Validate returns, so
// callers can tell a bad parameter from a storage or runtime failure with
// errors.Is.
var ErrInvalidConfig = errors.New("tree: invalid config")
