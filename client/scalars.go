package client

import (
	"context"
	"github.com/patrdb/patrdb/model"
	"net/http"
	"strconv"

	"github.com/patrdb/patrdb/api"
)

// LogScalars is POST /api/v1/runs/{run}/scalars: the trainer's own figures
// of a step (loss, kl, ...), merged into what the step holds. It returns
// the step's record after the write.
func (c *Client) LogScalars(ctx context.Context, run string, req api.ScalarsRequest) (model.Scalars, error) {
	var out api.ScalarsResponse
	return out.Scalars, c.do(ctx, http.MethodPost, runPath(run, "scalars"), &req, &out)
}

// Scalars is GET /api/v1/runs/{run}/scalars: the figures of every step
// from step from on (0: all).
func (c *Client) Scalars(ctx context.Context, run string, from uint64) (api.ScalarsPage, error) {
	var out api.ScalarsPage
	path := runPath(run, "scalars")
	if from > 0 {
		path += "?from=" + strconv.FormatUint(from, 10)
	}
	return out, c.do(ctx, http.MethodGet, path, nil, &out)
}
