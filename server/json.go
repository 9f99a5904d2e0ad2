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
	"unicode/utf8"

	"github.com/patrdb/patrdb/api"
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
			fmt.Errorf("%w: Content-Type %q, want application/json", api.ErrBadRequest, ct))
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		return jsonError(err)
	}
	// encoding/json turns invalid UTF-8 and unpaired surrogate escapes into
	// U+FFFD without a word; stored text must be what the client sent.
	if err := textError(body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
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

// textError rejects a body that is not valid UTF-8 or that holds a \u
// escape of a UTF-16 surrogate not paired with its other half.
func textError(body []byte) error {
	if !utf8.Valid(body) {
		at := 0
		for at < len(body) {
			r, n := utf8.DecodeRune(body[at:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			at += n
		}
		return badRequest("invalid UTF-8 at byte %d: text must be UTF-8", at)
	}
	// A backslash only occurs inside strings in valid JSON (the decoder
	// rejects it elsewhere), and always starts a two-character escape.
	for i := 0; i < len(body); i++ {
		if body[i] != '\\' {
			continue
		}
		if i+1 < len(body) && body[i+1] == 'u' {
			hi, ok := hex4(body, i+2)
			switch {
			case ok && hi >= 0xDC00 && hi <= 0xDFFF:
				return badRequest("lone surrogate escape \\u%04X at byte %d: text must be valid Unicode", hi, i)
			case ok && hi >= 0xD800 && hi <= 0xDBFF:
				lo, ok := rune(0), i+7 < len(body) && body[i+6] == '\\' && body[i+7] == 'u'
				if ok {
					lo, ok = hex4(body, i+8)
				}
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return badRequest("lone surrogate escape \\u%04X at byte %d: text must be valid Unicode", hi, i)
				}
				i += 6
			}
		}
		i++ // the escaped character
	}
	return nil
}

// hex4 reads four hex digits at b[at:].
func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[at:at+4]), 16, 32)
	return rune(v), err == nil
}

// jsonError turns a decoding error into a 400 (or 413) that says where.
func jsonError(err error) error {
	var mbe *http.MaxBytesError
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &mbe):
		return withStatus(http.StatusRequestEntityTooLarge, "too_large",
			fmt.Errorf("%w: body larger than %d bytes", api.ErrBadRequest, mbe.Limit))
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

func errorJSON(status int, code, msg string) []byte {
	b, _ := marshal(api.ErrorBody{Error: oneLine(msg), Code: code})
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

// queryBool reads an optional boolean query parameter (false when absent).
func queryBool(r *http.Request, name string) (bool, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return false, nil
	}
	v, err := strconv.ParseBool(s)
	if err != nil {
		return false, badRequest("query %s=%q: want true or false", name, s)
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
