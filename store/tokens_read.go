package store

import (
	"runtime"
	"sync"

	"github.com/patrdb/patrdb/model"
)

// TurnView is one stored turn's token data as it lies in the file: token
// ids and logprobs are packed little-endian 32-bit words that alias the
// transaction's pages. A batch reader copies them straight into its own
// buffers, so reading a step's turns costs one CRC and one copy per token
// array, with no per-turn allocation. The slices are valid only until the
// transaction ends and must not be modified; text is not exposed (a
// trainer's batch needs only the tokens).
type TurnView struct {
	ActionTokens      []byte // 4 bytes per token id
	ActionLogprobs    []byte // 4 bytes per logprob (float32 bits); empty when the writer gave none
	ObservationTokens []byte
	Reward            float64
	Done              bool
	PolicyVersion     uint64
}

// ViewTurns returns the views of the first Count own turns of each
// segment's node, segment after segment, every value's CRC checked. The
// cursor walk is one pass; the checks, which cost most of it, run on up to
// GOMAXPROCS goroutines (they touch only the mapped bytes). A missing or
// damaged turn is ErrCorrupt (the first in segment order).
func (r *RunTx) ViewTurns(segs []model.Segment) ([]TurnView, error) {
	if r.checking() {
		return r.chk.ViewTurns(segs)
	}
	total := 0
	for _, s := range segs {
		total += s.Count
	}
	type rawTurn struct{ key, val []byte }
	raws := make([]rawTurn, 0, total)
	size := 0
	for _, s := range segs {
		err := r.walkTurns(s.Node, s.Count, func(_ int, _ string, k, v []byte) error {
			raws = append(raws, rawTurn{k, v})
			size += len(v)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	path := r.bpath(bTurns)
	views := make([]TurnView, total)
	check := func(lo, hi int) error {
		for j := lo; j < hi; j++ {
			if err := viewTurn(path, raws[j].key, raws[j].val, &views[j]); err != nil {
				return err
			}
		}
		return nil
	}
	p := min(runtime.GOMAXPROCS(0), total)
	if size < parallelCheckMin || p <= 1 {
		return views, check(0, total)
	}
	errs := make([]error, p)
	var wg sync.WaitGroup
	for k := range p {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			errs[k] = check(total*k/p, total*(k+1)/p)
		}(k)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return views, nil
}

// parallelCheckMin is the size of turn values below which one goroutine
// checks them all.
var parallelCheckMin = 1 << 20

// viewTurn is decodeTurn without copies: the same checks, with the token
// blobs left aliasing raw and the strings skipped.
func viewTurn(bucket string, key, raw []byte, v *TurnView) error {
	payload, err := checkCRC(bucket, key, raw)
	if err != nil {
		return err
	}
	m := msgpReader{b: payload}
	fields := m.arrayLen()
	if m.err == nil && fields != turnFields && fields != turnFieldsV1 {
		m.fail(errWrongFields)
	}
	m.bytes() // action text
	v.ActionTokens, _ = m.bytes()
	v.ActionLogprobs, _ = m.bytes()
	m.bytes() // observation text
	v.ObservationTokens, _ = m.bytes()
	v.Reward = m.float64()
	v.Done = m.bool()
	v.PolicyVersion = 0
	if fields == turnFields {
		v.PolicyVersion = m.uint64()
	}
	if m.err == nil && (len(v.ActionTokens)%4 != 0 || len(v.ActionLogprobs)%4 != 0 || len(v.ObservationTokens)%4 != 0) {
		m.fail(errTokenLength)
	}
	if m.err != nil {
		return &CorruptError{Bucket: bucket, Key: cloneBytes(key), Reason: "turn: " + m.err.Error()}
	}
	return nil
}

var (
	errWrongFields = corruptReason("not a 7- or 8-field array")
	errTokenLength = corruptReason("a token array's length is not a multiple of 4")
)

type corruptReason string

func (e corruptReason) Error() string { return string(e) }
