package store

import "github.com/patrdb/patrdb/model"

// Exported for the black-box reliability tests (package store_test): the
// generic value codec, which the package keeps unexported because callers
// go through the typed methods.

// RecordKinds names the record types DecodeRecord understands, in a fixed
// order so a fuzz input can pick one by index.
var RecordKinds = []string{"run", "group", "node", "advantage", "rubric", "checkpoint", "event", "turns-payload"}

// NewRecord returns a pointer to a zero record of the named kind.
func NewRecord(kind string) any {
	switch kind {
	case "run":
		return new(model.Run)
	case "group":
		return new(model.Group)
	case "node":
		return new(model.Node)
	case "advantage":
		return new(model.Advantage)
	case "rubric":
		return new(model.Rubric)
	case "checkpoint":
		return new(model.Checkpoint)
	case "event":
		return new(model.Event)
	case "turns-payload":
		return new(model.TurnsPayload)
	}
	panic("store: unknown record kind " + kind)
}

// DecodeRecord decodes a framed value (format byte, CRC32C, msgpack) into a
// new record of the named kind, exactly as the store reads it from a bucket.
func DecodeRecord(kind string, raw []byte) (any, error) {
	v := NewRecord(kind)
	err := decodeValue("test/"+kind, nil, raw, v)
	return v, err
}

// EncodeRecord frames a record exactly as the store writes it.
func EncodeRecord(v any) ([]byte, error) { return encodeValue(v) }

// SetParallelCheckMin lowers the size at which ViewTurns checks turns on
// several goroutines, so tests cover that path; the func restores it.
func SetParallelCheckMin(n int) (restore func()) {
	old := parallelCheckMin
	parallelCheckMin = n
	return func() { parallelCheckMin = old }
}

// TurnKey is the key under which node id's own turn index is stored.
func TurnKey(r *RunTx, id uint64, index int) ([]byte, error) {
	n, err := r.nodeRef(id)
	if err != nil {
		return nil, err
	}
	spans, err := r.turnSpans(n, index, 1)
	if err != nil || len(spans) == 0 {
		return nil, notFoundf("turn %d of node %d", index, id)
	}
	return r.spanKey(id, spans[0], 0), nil
}
