package server

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/http"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
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
	var fp []byte
	var err error
	if sr, ok := req.(*api.SubmitRequest); ok {
		fp, err = submitFingerprint(r.Pattern, r.URL.Path, sr)
	} else {
		fp, err = fingerprint(r.Pattern, r.URL.Path, req)
	}
	*kp = key
	if err != nil {
		return err
	}
	j := &job{run: run, key: key, op: r.Pattern, fp: fp, fn: op, done: make(chan struct{}), lead: make(chan struct{}, 1)}
	j.arrival, _ = r.Context().Value(arrivalKey{}).(*arrival)
	if sr, ok := req.(*api.SubmitRequest); ok {
		// A reply stored by a server before submitFingerprint holds the
		// whole-request fingerprint: a retry across the upgrade still
		// matches it. Computed only when the new one does not match.
		j.fpBefore = func() ([]byte, error) {
			bare := *sr
			bare.ClientKey = ""
			return fingerprint(r.Pattern, r.URL.Path, &bare)
		}
	}
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

// submitFingerprint is fingerprint for a submit, without re-encoding its
// turns as JSON (their token arrays as numbers, ~17 % of the server's CPU
// under 16 rollout workers): the request with its turns left out,
// re-encoded, then each submission's turns field by field in binary. Like
// fingerprint, it does not depend on how the body was written — spacing,
// member order, token arrays packed or not.
func submitFingerprint(pattern, path string, req *api.SubmitRequest) ([]byte, error) {
	bare := *req
	bare.Submissions = make([]rollout.Submission, len(req.Submissions))
	for i, s := range req.Submissions {
		s.Turns = nil
		bare.Submissions[i] = s
	}
	b, err := marshal(&bare)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\nturns in binary\n", pattern, path)
	h.Write(b)
	var buf []byte
	for _, s := range req.Submissions {
		h.Write(binary.AppendUvarint(buf[:0], uint64(len(s.Turns))))
		for i := range s.Turns {
			t := &s.Turns[i]
			buf = appendBytes(buf[:0], t.Action)
			buf = model.AppendWords(binary.AppendUvarint(buf, uint64(len(t.ActionTokens))), t.ActionTokens)
			buf = model.AppendFloats(binary.AppendUvarint(buf, uint64(len(t.ActionLogprobs))), t.ActionLogprobs)
			buf = appendBytes(buf, t.Observation)
			buf = model.AppendWords(binary.AppendUvarint(buf, uint64(len(t.ObservationTokens))), t.ObservationTokens)
			buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(t.Reward))
			buf = binary.AppendUvarint(buf, t.PolicyVersion)
			if t.Done {
				buf = append(buf, 1)
			} else {
				buf = append(buf, 0)
			}
			h.Write(buf)
		}
	}
	return h.Sum(nil), nil
}

// appendBytes appends s with its length in front.
func appendBytes(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}
