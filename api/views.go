package api

import (
	"encoding/json"

	"github.com/patrdb/patrdb/store"
)

// RunJSON is a store.Run whose config is a JSON value.
type RunJSON struct {
	store.Run
	Config json.RawMessage `json:"config"`
}

// EventJSON is a store.Event whose payload is decoded: the record after the
// mutation for the store's own kinds, the client key and first answer for
// this server's replies, and a generic msgpack decoding for other kinds.
type EventJSON struct {
	store.Event
	Payload any `json:"payload,omitempty"`
}

// Record returns the store record with its config bytes.
func (r RunJSON) Record() store.Run {
	out := r.Run
	if len(r.Config) > 0 && string(r.Config) != "null" {
		out.Config = append([]byte(nil), r.Config...)
	}
	return out
}
