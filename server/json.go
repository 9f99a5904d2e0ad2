package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// decodeBody reads exactly one JSON object into v: unknown fields, wrong
// types, trailing data and an over-long body are errors, and none of them
// reaches a handler's write path. The body is capped before it is read.
func decodeBody(w http.ResponseWriter, r *http.Request, max int64, v any) error {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		// Requiring JSON also forces a CORS preflight on any cross-site
		// request a browser might send to a loopback server, which this
		// server never approves: a web page cannot post to it.
		return withStatus(http.StatusUnsupportedMediaType, "unsupported_media_type",
			fmt.Errorf("%w: Content-Type %q, want application/json", ErrBadRequest, ct))
	}
	body := http.MaxBytesReader(w, r.Body, max)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		if err != nil {
			return jsonError(err)
		}
		return badRequest("trailing data after the JSON object")
	}
	return nil
}

// jsonError turns a decoding error into a 400 (or 413) that says where.
func jsonError(err error) error {
	var mbe *http.MaxBytesError
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &mbe):
		return withStatus(http.StatusRequestEntityTooLarge, "too_large",
			fmt.Errorf("%w: body larger than %d bytes", ErrBadRequest, mbe.Limit))
	case errors.As(err, &se):
		return badRequest("malformed JSON at byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		if te.Field == "" {
			return badRequest("the body must be a JSON object, got JSON %s", te.Value)
		}
		return badRequest("field %s: want %s, got JSON %s", te.Field, te.Type, te.Value)
	case errors.Is(err, io.EOF):
		return badRequest("empty body: want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("truncated JSON")
	}
	// Unknown fields and the rest come back as plain errors from the
	// decoder ("json: unknown field \"x\"").
	return badRequest("%s", strings.TrimPrefix(err.Error(), "json: "))
}

// marshal encodes v as compact JSON without HTML escaping (action and rubric
// text should read as written) and with a trailing newline.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeRaw(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// errorBody is the one-line JSON of every error response.
type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

func errorJSON(status int, code, msg string) []byte {
	b, _ := marshal(errorBody{Error: oneLine(msg), Code: code})
	return b
}

// queryUint reads an optional unsigned integer query parameter.
func queryUint(r *http.Request, name string, def uint64) (uint64, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, badRequest("query %s=%q: want a non-negative integer", name, s)
	}
	return v, nil
}

// pathID reads a positive integer path segment.
func pathID(r *http.Request, name string) (uint64, error) {
	s := r.PathValue(name)
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v == 0 {
		return 0, badRequest("%s %q: want a positive integer", name, s)
	}
	return v, nil
}
