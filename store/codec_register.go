package store

import (
	"reflect"

	"github.com/patrdb/patrdb/model"
	"github.com/vmihailenco/msgpack/v5"
)

// The records live in package model, which imports nothing, so their
// msgpack forms cannot be methods of theirs: the store registers them with
// msgpack/v5, once, for its reflective encoder and decoder (the records
// without a hand-written codec, and the tests that hold the hand-written
// ones to msgpack/v5's bytes). A registration is msgpack/v5's process-wide
// table, the equivalent of the methods; nothing else writes to it.
func init() {
	msgpack.Register(model.TokenIDs(nil), byValue(msgpackEncodeTokenIDs), byPointer(msgpackDecodeTokenIDs))
	msgpack.Register(model.TurnRanges(nil), byValue(msgpackEncodeTurnRanges), byPointer(msgpackDecodeTurnRanges))
	msgpack.Register(model.Scalars{}, byPointer(msgpackEncodeScalars), byPointer(msgpackDecodeScalars))
	// Runs, groups and turns payloads grew fields at their end: msgpack/v5
	// encodes them as it does any as_array struct, and decodes either
	// shape through these (codec_compat.go).
	msgpack.Register(model.Run{}, nil, byPointer(msgpackDecodeRun))
	msgpack.Register(model.Group{}, nil, byPointer(msgpackDecodeGroup))
	msgpack.Register(model.TurnsPayload{}, nil, byPointer(msgpackDecodeTurnsPayload))
}

// byValue adapts a codec function of a T to msgpack/v5's registered form.
func byValue[T any, C any](f func(C, T) error) func(C, reflect.Value) error {
	return func(c C, v reflect.Value) error { return f(c, v.Interface().(T)) }
}

// byPointer adapts a codec function of a *T: the value is addressable when
// msgpack/v5 decodes (it decodes into a pointer's target) and may not be
// when it encodes, when a copy is taken.
func byPointer[T any, C any](f func(C, *T) error) func(C, reflect.Value) error {
	return func(c C, v reflect.Value) error {
		if v.CanAddr() {
			return f(c, v.Addr().Interface().(*T))
		}
		t := v.Interface().(T)
		if err := f(c, &t); err != nil {
			return err
		}
		if v.CanSet() {
			v.Set(reflect.ValueOf(t))
		}
		return nil
	}
}
