package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/patrdb/patrdb/batch"
	"github.com/patrdb/patrdb/batch/sourcewire"
)

// Batch is GET /api/v1/runs/{run}/steps/{step}/batch: the safetensors
// file's bytes, for batch.Decode or a file.
func (c *Client) Batch(ctx context.Context, run string, step uint64, opts batch.Options) ([]byte, error) {
	var out binaryReply
	return out.body, c.do(ctx, http.MethodGet, batchPath(run, step, opts), nil, &out)
}

// ReadBatch is the step's training batch, as batchdb.Read gives it in
// process: BatchInto a new batch.
func (c *Client) ReadBatch(ctx context.Context, run string, step uint64, opts batch.Options) (*batch.Batch, error) {
	b := new(batch.Batch)
	if err := c.BatchInto(ctx, b, run, step, opts); err != nil {
		return nil, err
	}
	return b, nil
}

// BatchInto builds the step's training batch into dst, reusing its arrays
// as batchdb.ReadInto does. It asks the server for what the batch is
// built from (batch.Source, package sourcewire; API 1.8), 12.4 MB where
// the rows batch is 225 MB on bench/batchbench's step, and builds it here with
// batch.Assemble, the rules the server's own reads use: the batch equals
// the server's file byte for byte. From an older server, which sends the
// file whatever the request asks, it decodes the file instead.
func (c *Client) BatchInto(ctx context.Context, dst *batch.Batch, run string, step uint64, opts batch.Options) error {
	path := batchPath(run, step, opts)
	var file []byte
	err := batch.Assemble(dst, opts, func(batch.Options) (*batch.Source, error) {
		reply := binaryReply{accept: sourcewire.MediaType}
		if err := c.do(ctx, http.MethodGet, path, nil, &reply); err != nil {
			return nil, err
		}
		if reply.mediaType != sourcewire.MediaType {
			file = reply.body
			return nil, errFileInstead
		}
		src, err := sourcewire.Decode(reply.body)
		if err != nil {
			return nil, fmt.Errorf("patrdb client: decoding GET %s: %w", path, err)
		}
		return src, nil
	})
	if !errors.Is(err, errFileInstead) {
		return err
	}
	b, err := batch.Decode(file)
	if err != nil {
		return fmt.Errorf("patrdb client: decoding GET %s: %w", path, err)
	}
	*dst = *b
	return nil
}

// errFileInstead ends BatchInto's Assemble when the server sent the file.
var errFileInstead = errors.New("the server sent the batch file")

func batchPath(run string, step uint64, opts batch.Options) string {
	path := runPath(run, "steps", u64(step), "batch")
	if q := opts.Query().Encode(); q != "" {
		path += "?" + q
	}
	return path
}
