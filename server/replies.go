package server

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/store"
)

// KindReply is the event kind in which the server keeps the first answer to
// every write, keyed by the request's client key. A retry with the same key
// finds it and gets that answer back, byte for byte, without writing again;
// because the reply is appended in the same transaction as the write, a
// write is never on disk without its reply, nor a reply without its write.
const KindReply = "server.reply"

// replyRecord is the payload of a KindReply event.
type replyRecord struct {
	_msgpack    struct{} `msgpack:",as_array"`
	Key         string
	Op          string // e.g. "POST /api/v1/runs/{run}/groups"
	Fingerprint []byte // sha256 of the request with its client key removed
	Status      int
	Body        []byte
}

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

// replyIndex maps client keys to the sequence number of their reply event,
// per run. A run's index is built by one scan of its event log the first
// time a write names the run, then kept up to date by the writes
// themselves; only the batch leader touches it (batch.go).
type replyIndex struct {
	runs map[string]map[string]uint64
}

// load returns the index of run, scanning its log if needed. A run that
// does not exist yet has an empty index that is not kept.
func (ix *replyIndex) load(db *store.DB, run string) (map[string]uint64, error) {
	if m, ok := ix.runs[run]; ok {
		return m, nil
	}
	m := map[string]uint64{}
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run(run)
		if errors.Is(err, store.ErrNotFound) {
			m = nil
			return nil
		}
		if err != nil {
			return err
		}
		return r.Events(1, func(e store.Event) error {
			if e.Kind != KindReply {
				return nil
			}
			var rr replyRecord
			if err := store.DecodePayload(e, &rr); err != nil {
				return err
			}
			m[rr.Key] = e.Seq
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	if m == nil {
		return map[string]uint64{}, nil
	}
	ix.runs[run] = m
	return m, nil
}

// reply reads the reply event at seq.
func readReply(db *store.DB, run string, seq uint64) (replyRecord, error) {
	var rr replyRecord
	found := false
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run(run)
		if err != nil {
			return err
		}
		stop := errors.New("stop")
		err = r.Events(seq, func(e store.Event) error {
			if e.Seq == seq && e.Kind == KindReply {
				found = true
				if err := store.DecodePayload(e, &rr); err != nil {
					return err
				}
			}
			return stop
		})
		if err == stop {
			return nil
		}
		return err
	})
	if err == nil && !found {
		err = fmt.Errorf("%w: reply event %d of run %q vanished", store.ErrCorrupt, seq, run)
	}
	return rr, err
}

// writeOp is one write endpoint's work inside the transaction. It returns
// the status and the value to answer with; the wrapper records them.
type writeOp func(tx *store.Tx) (status int, body any, err error)

// write runs op at most once per (run, client key): a first request runs op
// and stores its answer in the same transaction; a repeat gets the stored
// answer with the header Idempotent-Replay: true; a different request under
// a used key is a 409. Failed requests store nothing, so they can be retried
// with the same key after the cause is fixed.
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
