package rubricpool

import "errors"

// ErrInvalidConfig is wrapped by every error Config.Validate returns, so
// callers can test with errors.Is and still read which field was wrong from
// the message.
var ErrInvalidConfig = errors.New("rubricpool: invalid config")
