package view

import "errors"

// ErrViewQuery: a viewer query is out of range (a page offset or limit, an
// unknown pool or sort key). Every error the package returns for bad input
// wraps it, so callers test with errors.Is.
var ErrViewQuery = errors.New("view: bad viewer query")
