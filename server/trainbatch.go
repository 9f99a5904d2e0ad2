package server

import (
	"fmt"
	"github.com/patrdb/patrdb/batch/batchdb"
	"net/http"
	"strconv"

	"github.com/patrdb/patrdb/batch"
)

// trainBatch is GET /api/v1/runs/{run}/steps/{step}/batch: the step's
// training batch (package batch) as a safetensors file, read in one
// transaction and streamed from its arrays. The query takes
// batch.Options.Query's parameters (layout, credit, norm, the filters).
func (s *server) trainBatch(w http.ResponseWriter, r *http.Request) error {
	step, err := pathID(r, "step")
	if err != nil {
		return err
	}
	opts, err := batch.ParseQuery(r.URL.Query())
	if err != nil {
		return err
	}
	var b batch.Batch
	if err := s.viewChecked(r, func(rt runReads) error { return batchdb.ReadInto(&b, rt, step, opts) }); err != nil {
		return err
	}
	size, err := b.FileLen()
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.FormatInt(size, 10))
	h.Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", fmt.Sprintf("%s-step%d-%s-%s.safetensors", b.Run, step, b.Layout, b.Credit)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if _, err := b.WriteTo(w); err != nil {
		// The status is sent: the client sees a short body, which its
		// Content-Length and the file's own offsets reveal.
		s.opts.Logger.Debug("server: batch body not sent whole", "path", r.URL.Path, "err", err)
	}
	return nil
}
