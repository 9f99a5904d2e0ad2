package server

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"
)

var updateOpenAPI = flag.Bool("update", false, "rewrite openapi.json's components.schemas from ../docs/json-schema.json")

// vocabularyPath is the JSON vocabulary's schema, generated from the Go
// types (go test ./cmd/patrdb -run TestSchemaIsCurrent -update).
const vocabularyPath = "../docs/json-schema.json"

// openAPISchemas derives openapi.json's components.schemas: the
// vocabulary's objects the paths refer to, directly or through each
// other, with their references pointed into the document, beside the
// document's own Error. A request body's objects are the vocabulary's with
// every member optional but client_key (the server takes a missing member
// as its zero value or default), named <Object>Input where a reply uses
// the object too; the *Request objects keep their names.
func openAPISchemas(t *testing.T, doc map[string]any) map[string]any {
	t.Helper()
	b, err := os.ReadFile(vocabularyPath)
	if err != nil {
		t.Fatal(err)
	}
	var vocab struct {
		Defs map[string]any `json:"$defs"`
	}
	if err := json.Unmarshal(b, &vocab); err != nil {
		t.Fatal(err)
	}
	out := map[string]any{"Error": doc["components"].(map[string]any)["schemas"].(map[string]any)["Error"]}
	const here = "#/components/schemas/"
	nameOf := func(def string, input bool) string {
		if input && !strings.HasSuffix(def, "Request") {
			return def + "Input"
		}
		return def
	}
	// adopt copies v, pointing its references into the document and
	// adding each object it refers to.
	var adopt func(v any, input bool) any
	add := func(def string, input bool) string {
		name := nameOf(def, input)
		if _, done := out[name]; done {
			return name
		}
		v, ok := vocab.Defs[def]
		if !ok {
			t.Errorf("openapi.json refers to %s, which the vocabulary has no object for", def)
			return name
		}
		out[name] = true // taken, while its members are adopted
		out[name] = adopt(v, input)
		return name
	}
	adopt = func(v any, input bool) any {
		switch v := v.(type) {
		case map[string]any:
			c := make(map[string]any, len(v))
			for k, x := range v {
				switch {
				case k == "$ref":
					def, ok := strings.CutPrefix(x.(string), "#/$defs/")
					if !ok {
						t.Errorf("the vocabulary refers outside itself: %v", x)
					}
					c[k] = here + add(def, input)
				case k == "required" && input:
					var keep []any
					for _, r := range x.([]any) {
						if r == "client_key" {
							keep = append(keep, r)
						}
					}
					if keep != nil {
						c[k] = keep
					}
				default:
					c[k] = adopt(x, input)
				}
			}
			return c
		case []any:
			c := make([]any, len(v))
			for i, x := range v {
				c[i] = adopt(x, input)
			}
			return c
		}
		return v
	}
	// visit finds the document's own references: the request bodies'
	// objects are inputs.
	var visit func(v any, input bool)
	visit = func(v any, input bool) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				if def, ok := strings.CutPrefix(ref, here); ok && def != "Error" {
					if nameOf(def, input) != def {
						t.Errorf("openapi.json: a request body refers to %s, which is not a *Request object", def)
					}
					add(def, input)
				}
			}
			for k, x := range v {
				visit(x, input || k == "requestBody")
			}
		case []any:
			for _, x := range v {
				visit(x, input)
			}
		}
	}
	visit(doc["paths"], false)
	return out
}

func parseOpenAPI(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// The objects openapi.json describes the bodies with are the JSON
// vocabulary's, as generated from the Go types: a field added to a reply
// fails here until the document is regenerated.
func TestOpenAPISchemasAreCurrent(t *testing.T) {
	doc := parseOpenAPI(t, openAPIDoc)
	want := openAPISchemas(t, doc)
	got := doc["components"].(map[string]any)["schemas"]
	if reflect.DeepEqual(got, want) {
		return
	}
	if !*updateOpenAPI {
		t.Fatal("openapi.json's components.schemas differ from docs/json-schema.json: run go test ./server -run TestOpenAPISchemasAreCurrent -update")
	}
	if t.Failed() {
		return
	}
	doc["components"].(map[string]any)["schemas"] = want
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("openapi.json", buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Every JSON body the API answers or takes is described by a named object
// of the vocabulary or an object listing its members: a client generated
// from the document gets types, not "object".
func TestOpenAPIBodiesAreTyped(t *testing.T) {
	doc := parseOpenAPI(t, openAPIDoc)
	typed := func(s map[string]any) bool {
		_, ref := s["$ref"]
		_, props := s["properties"]
		return ref || props
	}
	var ops []string
	for path, methods := range doc["paths"].(map[string]any) {
		for method, op := range methods.(map[string]any) {
			op := op.(map[string]any)
			where := strings.ToUpper(method) + " " + path
			ops = append(ops, where)
			if rb, ok := op["requestBody"].(map[string]any); ok {
				if s := jsonSchemaOf(rb); s != nil && !typed(s) {
					t.Errorf("%s: the request body is untyped: %v", where, s)
				}
			}
			success := 0
			for code, r := range op["responses"].(map[string]any) {
				if !strings.HasPrefix(code, "2") {
					continue
				}
				success++
				s := jsonSchemaOf(r.(map[string]any))
				if s != nil && !typed(s) && path != "/api/v1/openapi.json" {
					t.Errorf("%s %s: the reply is untyped: %v", where, code, s)
				}
			}
			if success != 1 {
				t.Errorf("%s documents %d success statuses, want 1", where, success)
			}
		}
	}
	sort.Strings(ops)
	if len(ops) < 30 {
		t.Fatalf("only %d operations documented", len(ops))
	}
}

// jsonSchemaOf is the application/json schema of a body or reply, or nil
// when it has none (a file, the metrics' text).
func jsonSchemaOf(body map[string]any) map[string]any {
	content, _ := body["content"].(map[string]any)
	media, _ := content["application/json"].(map[string]any)
	s, _ := media["schema"].(map[string]any)
	return s
}
