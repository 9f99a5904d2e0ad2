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

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/patrdb/patrdb/api"
)

// decodeBody reads exactly one JSON object into v: unknown fields, wrong
// types, trailing data and an over-long body are errors, and none of them
// reaches a handler's write path. The body is capped before it is read.
func decodeBody(w http.ResponseWriter, r *http.Request, max int64, v any) error {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if sr, ok := v.(*api.SubmitRequest); ok && err == nil && mt == api.FrameType {
		return decodeFrame(w, r, max, sr)
	}
	if err != nil || mt != "application/json" {
		// Requiring JSON also forces a CORS preflight on any cross-site
		// request a browser might send to a loopback server, which this
		// server never approves: a web page cannot post to it.
		return withStatus(http.StatusUnsupportedMediaType, "unsupported_media_type",
			fmt.Errorf("%w: Content-Type %q, want application/json", api.ErrBadRequest, ct))
	}
	body, err := readBody(w, r, max)
	if err != nil {
		return jsonError(err)
	}
	return unmarshalStrict(body, v)
}

// unmarshalStrict decodes one JSON object into v, as decodeBody's rules
// say.
func unmarshalStrict(body []byte, v any) error {
	// encoding/json turns invalid UTF-8 and unpaired surrogate escapes into
	// U+FFFD without a word; stored text must be what the client sent.
	if err := textError(body); err != nil {
		return err
	}
	// json v2's decoder reads the body in one pass (encoding/json scans
	// it whole before decoding it again): a packed submit of LLM turns
	// decodes ~4× faster (BenchmarkDecodeSubmit). Names match in any case,
	// as encoding/json matched them.
	if err := jsonv2.Unmarshal(body, v, jsonv2.RejectUnknownMembers(true), jsonv2.MatchCaseInsensitiveNames(true)); err != nil {
		return jsonError(err)
	}
	return nil
}

// decodeFrame reads a submit sent as a frame (api.FrameType): its JSON
// part under the JSON body's rules, its turns' text and tokens straight
// from the bytes after it.
func decodeFrame(w http.ResponseWriter, r *http.Request, max int64, req *api.SubmitRequest) error {
	body, err := readBody(w, r, max)
	if err != nil {
		return jsonError(err)
	}
	*req, err = api.ReadSubmitFrame(body, unmarshalStrict)
	var ae *apiError
	if err != nil && !errors.As(err, &ae) {
		return withStatus(http.StatusBadRequest, "bad_request", err) // api.ErrFrame
	}
	return err
}

// readBody reads r's body, up to max bytes, into one buffer of the size
// the request declares (io.ReadAll's doubling cost a submit of LLM turns
// several copies of its bytes).
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	body := http.MaxBytesReader(w, r.Body, max)
	if r.ContentLength <= 0 || r.ContentLength > max {
		return io.ReadAll(body)
	}
	var buf bytes.Buffer
	buf.Grow(int(r.ContentLength) + bytes.MinRead) // ReadFrom wants MinRead free to read the EOF
	_, err := buf.ReadFrom(body)
	return buf.Bytes(), err
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
		next := bytes.IndexByte(body[i:], '\\')
		if next < 0 {
			break
		}
		i += next
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
	var syn *jsontext.SyntacticError
	var sem *jsonv2.SemanticError
	switch {
	case errors.As(err, &mbe):
		return withStatus(http.StatusRequestEntityTooLarge, "too_large",
			fmt.Errorf("%w: body larger than %d bytes", api.ErrBadRequest, mbe.Limit))
	case errors.Is(err, io.ErrUnexpectedEOF) && errors.As(err, &syn) && syn.ByteOffset == 0:
		return badRequest("empty body: want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("truncated JSON")
	case errors.As(err, &syn):
		if errors.Is(syn.Err, jsontext.ErrDuplicateName) {
			return badRequest("field %s: given twice", fieldPath(syn.JSONPointer))
		}
		return badRequest("malformed JSON at byte %d: %v", syn.ByteOffset, syn.Err)
	case errors.As(err, &sem) && errors.Is(sem.Err, jsonv2.ErrUnknownName):
		return badRequest("unknown field %q", fieldPath(sem.JSONPointer))
	case errors.As(err, &sem) && sem.JSONPointer == "" && sem.GoType != nil:
		return badRequest("the body must be a JSON object, got JSON %s", kindName(sem.JSONKind))
	case errors.As(err, &sem) && sem.GoType != nil && sem.Err == nil:
		return badRequest("field %s: want %s, got JSON %s", fieldPath(sem.JSONPointer), sem.GoType, kindName(sem.JSONKind))
	case errors.As(err, &sem) && sem.Err != nil:
		return badRequest("field %s: %v", fieldPath(sem.JSONPointer), sem.Err)
	case errors.As(err, &se):
		return badRequest("malformed JSON at byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		if te.Field == "" {
			return badRequest("the body must be a JSON object, got JSON %s", te.Value)
		}
		return badRequest("field %s: want %s, got JSON %s", te.Field, te.Type, te.Value)
	case errors.Is(err, io.EOF):
		return badRequest("empty body: want a JSON object")
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
	writeBody(w, status, "application/json", body)
}

func writeBody(w http.ResponseWriter, status int, contentType string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
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

// fieldPath is a JSON pointer as the dotted path encoding/json named a
// field by (/submissions/0/turns → submissions.0.turns).
func fieldPath(p jsontext.Pointer) string {
	return strings.ReplaceAll(strings.TrimPrefix(string(p), "/"), "/", ".")
}

// kindName is the JSON kind as encoding/json named it in its errors.
func kindName(k jsontext.Kind) string {
	switch k {
	case '"':
		return "string"
	case '0':
		return "number"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return "value"
}
