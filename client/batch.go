package client

import (
	"context"
	"net/http"

	"github.com/patrdb/patrdb/batch"
)

// Batch is GET /api/v1/runs/{run}/steps/{step}/batch: the safetensors
// file's bytes, for batch.Decode or a file.
func (c *Client) Batch(ctx context.Context, run string, step uint64, opts batch.Options) ([]byte, error) {
	var out []byte
	path := runPath(run, "steps", u64(step), "batch")
	if q := opts.Query().Encode(); q != "" {
		path += "?" + q
	}
	return out, c.do(ctx, http.MethodGet, path, nil, &out)
}
