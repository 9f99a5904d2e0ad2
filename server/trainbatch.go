package server

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/patrdb/patrdb/batch/batchdb"
	"github.com/patrdb/patrdb/batch/sourcewire"

	"github.com/patrdb/patrdb/batch"
	"github.com/patrdb/patrdb/store"
)

// trainBatch is GET /api/v1/runs/{run}/steps/{step}/batch: the step's
// training batch (package batch) as a safetensors file, read in one
// transaction and streamed from its arrays; or, to a request whose Accept
// names sourcewire.MediaType, what the batch is built from (a
// batch.Source), for the client to build it. The query takes
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
	if accepts(r, sourcewire.MediaType) {
		return s.batchSource(w, r, step, opts)
	}
	var b batch.Batch
	if err := s.viewChecked(r, func(rt *store.RunTx) error { return batchdb.ReadInto(&b, rt, step, opts) }); err != nil {
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

// batchSource answers a step's batch.Source in the wire format (package
// sourcewire), for the client to build the batch. The source is copied out of
// the read transaction before a byte is sent, so a slow client holds no
// transaction open (bbolt cannot grow its mapping under one).
func (s *server) batchSource(w http.ResponseWriter, r *http.Request, step uint64, opts batch.Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	var body []byte
	err := s.viewChecked(r, func(rt *store.RunTx) error {
		src, err := batchdb.ReadSource(rt, step, opts.WithDefaults())
		if err == nil {
			body = sourcewire.Append(nil, src)
		}
		return err
	})
	if err != nil {
		return err
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	writeBody(w, http.StatusOK, sourcewire.MediaType, body)
	return nil
}
