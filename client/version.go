package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/model"
)

// APIVersion returns the server's API version ("<major>.<minor>", from
// GET /api/v1/), reading it on the first call only. It fails with
// ErrIncompatibleServer when the major number is not the one of this
// client's path prefix (api.PathVersion); every other request of the
// client makes this check first, unless SkipVersionCheck is set (then it
// returns ""). A failed read (the server is down) is not remembered, so a
// later call checks again.
func (c *Client) APIVersion(ctx context.Context) (string, error) {
	if c.SkipVersionCheck {
		return "", nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.version != "" {
		return c.version, nil
	}
	var ix api.Index
	err := c.send(ctx, http.MethodGet, "/api/"+api.PathVersion+"/", nil, &ix)
	if errors.Is(err, model.ErrNotFound) {
		return "", fmt.Errorf("%w: the server has no /api/%s/ index, so it predates API versions: upgrade patrdb on the server", ErrIncompatibleServer, api.PathVersion)
	}
	if err != nil {
		return "", err
	}
	want := strings.TrimPrefix(api.PathVersion, "v")
	major, _, _ := strings.Cut(ix.APIVersion, ".")
	if major != want {
		return "", fmt.Errorf("%w: the server speaks API %q; this client speaks %s.x: use a client and server of the same major version", ErrIncompatibleServer, ix.APIVersion, want)
	}
	c.version = ix.APIVersion
	return c.version, nil
}
