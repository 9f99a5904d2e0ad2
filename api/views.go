package api

import (
	"encoding/json"

	"github.com/patrdb/patrdb/model"
)

// RunJSON is a model.Run whose config is a JSON value.
type RunJSON struct {
	model.Run
	Config json.RawMessage `json:"config"`
}

// EventJSON is a model.Event whose payload is decoded: the record after the
// mutation for the store's own kinds, the client key and first answer for
// this server's replies, and a generic msgpack decoding for other kinds.
type EventJSON struct {
	model.Event
	Payload any `json:"payload,omitempty"`
}

// Record returns the store record with its config bytes.
func (r RunJSON) Record() model.Run {
	out := r.Run
	if len(r.Config) > 0 && string(r.Config) != "null" {
		out.Config = append([]byte(nil), r.Config...)
	}
	return out
}
