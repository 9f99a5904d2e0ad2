package server

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/store"
)

// maxClientKey bounds a client key; keys are stored once per write.
const maxClientKey = 200

func validClientKey(k string) error {
	if k == "" {
		return badRequest("client_key is required on every write (any 1-%d printable ASCII bytes, the same on a retry)", maxClientKey)
	}
	if len(k) > maxClientKey {
		return badRequest("client_key is %d bytes, want at most %d", len(k), maxClientKey)
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return badRequest("client_key byte %d is not printable ASCII", i)
		}
	}
	return nil
}

// writeOp is one write endpoint's work inside the transaction. It returns
// the status and the value to answer with; the wrapper records them.
type writeOp func(tx *store.Tx) (status int, body any, err error)

// write runs op at most once per (run, client key): a first request runs op
// and stores its answer in the same transaction (store.RunTx.PutReply, so
// a write is never on disk without its answer, nor an answer without its
// write); a repeat gets the stored answer with the header
// Idempotent-Replay: true; a different request under a used key is a 409.
// Failed requests store nothing, so they can be retried with the same key
// after the cause is fixed.
func (s *server) write(w http.ResponseWriter, r *http.Request, run string, req api.KeyedRequest, op writeOp) error {
	if s.opts.ReadOnly {
		return withStatus(http.StatusForbidden, "read_only", errors.New("server: this server is read-only"))
	}
	kp := req.Key()
	key := *kp
	if err := validClientKey(key); err != nil {
		return err
	}
	*kp = ""
	fp, err := fingerprint(r.Pattern, r.URL.Path, req)
	*kp = key
	if err != nil {
		return err
	}
	j := &job{run: run, key: key, op: r.Pattern, fp: fp, fn: op, done: make(chan struct{}), lead: make(chan struct{}, 1)}
	s.submit(j)
	if j.err != nil {
		return j.err
	}
	if j.replay {
		w.Header().Set("Idempotent-Replay", "true")
	}
	writeRaw(w, j.status, j.body)
	return nil
}

// fingerprint identifies a request independently of its client key and of
// the JSON's spacing and member order: the route, the path, and the decoded
// request re-encoded (its ClientKey field blanked by the caller's type).
func fingerprint(pattern, path string, req any) ([]byte, error) {
	b, err := marshal(req)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", pattern, path)
	h.Write(b)
	return h.Sum(nil), nil
}
