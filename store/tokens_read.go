package store

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

// ViewTurns calls fn with the first count own turns of a node, in order,
// after checking each value's CRC. The view passed to fn is reused: copy
// what must outlive the call. A missing or damaged turn is ErrCorrupt, and
// an error returned by fn stops the walk and is returned.
func (r *RunTx) ViewTurns(id uint64, count int, fn func(i int, v *TurnView) error) error {
	var v TurnView
	return r.walkTurns(id, count, func(i int, path string, k, raw []byte) error {
		if err := viewTurn(path, k, raw, &v); err != nil {
			return err
		}
		return fn(i, &v)
	})
}

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
		m.err = errWrongFields
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
		m.err = errTokenLength
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
