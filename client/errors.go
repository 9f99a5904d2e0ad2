package client

import "errors"

// ErrIncompatibleServer: the server speaks another major version of the
// API than this client (or predates API versions), so its answers cannot
// be read as this client's types. Nothing was sent but the version check.
var ErrIncompatibleServer = errors.New("patrdb client: the server speaks an incompatible API version")
