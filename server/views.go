package server

import (
	"encoding/json"
	"math"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// The API sends store records as they are, with their own json tags, with
// two exceptions that would otherwise come out as base64: a run's config
// (JSON text, sent as a JSON value) and an event's payload (msgpack, sent
// decoded).

func runJSON(r model.Run) api.RunJSON {
	return api.RunJSON{Run: r, Config: rawJSON(r.Config)}
}

// rawJSON returns b as a JSON value when it is valid JSON, as a JSON string
// otherwise, and null when empty.
func rawJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	if json.Valid(b) {
		return json.RawMessage(append([]byte(nil), b...))
	}
	s, _ := json.Marshal(string(b))
	return s
}

// EventView is e as the events endpoint shows it.
func EventView(e model.Event) api.EventJSON {
	out := api.EventJSON{Event: e}
	if len(e.Payload) == 0 {
		return out
	}
	var v any
	var err error
	switch rec := store.RecordFor(e.Kind); {
	case rec != nil:
		if err = store.DecodePayload(e, rec); err == nil {
			v = rec
			if r, ok := rec.(*model.Run); ok {
				v = runJSON(*r)
			}
		}
	default:
		err = msgpack.Unmarshal(e.Payload, &v)
		v = jsonSafe(v)
	}
	if err != nil {
		// The event itself decoded (its CRC held), so keep it readable:
		// an undecodable payload is reported in place, not as a failure.
		v = map[string]string{"undecodable": err.Error()}
	}
	out.Payload = v
	return out
}

// jsonSafe turns what a generic msgpack decode produces (maps with
// non-string keys) into something encoding/json accepts.
func jsonSafe(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			t[k] = jsonSafe(x)
		}
		return t
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			ks, err := json.Marshal(k)
			key := string(ks)
			if s, ok := k.(string); ok {
				key = s
			} else if err != nil {
				key = "?"
			}
			m[key] = jsonSafe(x)
		}
		return m
	case []any:
		for i, x := range t {
			t[i] = jsonSafe(x)
		}
		return t
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			return nil // NaN or ±Inf cannot be JSON
		}
	case float32:
		return jsonSafe(float64(t))
	}
	return v
}
