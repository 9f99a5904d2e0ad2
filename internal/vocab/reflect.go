package vocab

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// SchemaURI is the $schema of the generated document.
const SchemaURI = "https://json-schema.org/draft/2020-12/schema"

// Def names a Go type as one object of the vocabulary.
type Def struct {
	Name string
	Type reflect.Type
}

// DefOf is a Def for the type of v.
func DefOf(name string, v any) Def { return Def{name, reflect.TypeOf(v)} }

// Schema derives the schema document of defs. A struct type reached from
// a def that is not itself listed becomes a def named package.Type, the
// package's name replaced by its entry in prefixes when it has one (keyed
// by import path); an anonymous struct is inlined.
func Schema(id string, defs []Def, prefixes map[string]string) (map[string]any, error) {
	g := &gen{names: map[reflect.Type]string{}, defs: map[string]any{}, prefixes: prefixes}
	for _, d := range defs {
		t := deref(d.Type)
		if prev, ok := g.names[t]; ok {
			return nil, fmt.Errorf("vocab: %s and %s are the same type %s", prev, d.Name, t)
		}
		g.names[t] = d.Name
	}
	for _, d := range defs {
		g.object(deref(d.Type))
	}
	if g.err != nil {
		return nil, g.err
	}
	return map[string]any{"$schema": SchemaURI, "$id": id, "$defs": g.defs}, nil
}

// Marshal renders a schema document as indented JSON, keys sorted.
func Marshal(doc map[string]any) ([]byte, error) {
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

type gen struct {
	prefixes map[string]string
	names    map[reflect.Type]string
	defs     map[string]any
	err      error
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func (g *gen) name(t reflect.Type) string {
	if n, ok := g.names[t]; ok {
		return n
	}
	pkg := t.PkgPath()
	prefix, ok := g.prefixes[pkg]
	if !ok {
		prefix = pkg[strings.LastIndex(pkg, "/")+1:]
	}
	n := prefix + "." + t.Name()
	g.names[t] = n
	return n
}

// object makes t's def, once, and returns a reference to it.
func (g *gen) object(t reflect.Type) map[string]any {
	n := g.name(t)
	ref := map[string]any{"$ref": "#/$defs/" + n}
	if _, done := g.defs[n]; done {
		return ref
	}
	g.defs[n] = nil // a recursive type refers to itself
	g.defs[n] = g.inline(t)
	return ref
}

var (
	rawMessage = reflect.TypeFor[json.RawMessage]()
	marshaler  = reflect.TypeFor[json.Marshaler]()
)

// value is the schema of one field's type; nullable says whether Go can
// encode it as null (a nil pointer, slice or map).
func (g *gen) value(t reflect.Type) map[string]any {
	if t == rawMessage || t.Kind() == reflect.Interface || t.Implements(marshaler) {
		return map[string]any{} // any JSON value
	}
	switch t.Kind() {
	case reflect.Pointer:
		return nullable(g.value(t.Elem()))
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer", "minimum": 0}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return nullable(map[string]any{"type": "string", "contentEncoding": "base64"})
		}
		return nullable(map[string]any{"type": "array", "items": g.value(t.Elem())})
	case reflect.Array:
		return map[string]any{"type": "array", "items": g.value(t.Elem())}
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			g.fail("vocab: map key %s of %s is not a string", t.Key(), t)
		}
		return nullable(map[string]any{"type": "object", "additionalProperties": g.value(t.Elem())})
	case reflect.Struct:
		if t.Name() == "" {
			return g.inline(t)
		}
		return g.object(t)
	}
	g.fail("vocab: no JSON for %s", t)
	return map[string]any{}
}

func nullable(s map[string]any) map[string]any {
	if typ, ok := s["type"].(string); ok {
		out := map[string]any{}
		for k, v := range s {
			out[k] = v
		}
		out["type"] = []any{typ, "null"}
		return out
	}
	if len(s) == 0 {
		return s // any value already admits null
	}
	return map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}
}

// inline is the object schema of struct t: its fields as encoding/json
// names them, embedded structs' fields promoted, a shallower field hiding
// a deeper one of the same name.
func (g *gen) inline(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	for _, f := range fields(t) {
		props[f.name] = g.value(f.typ)
		if !f.omitempty {
			required = append(required, f.name)
		}
	}
	sort.Strings(required)
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

type field struct {
	name      string
	typ       reflect.Type
	omitempty bool
	depth     int
}

func fields(t reflect.Type) []field {
	byName := map[string]field{}
	var order []string
	var walk func(t reflect.Type, depth int)
	walk = func(t reflect.Type, depth int) {
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			tag := sf.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if sf.Anonymous && name == "" && deref(sf.Type).Kind() == reflect.Struct {
				walk(deref(sf.Type), depth+1)
				continue
			}
			if !sf.IsExported() {
				continue
			}
			if name == "" {
				name = sf.Name
			}
			f := field{name: name, typ: sf.Type, omitempty: strings.Contains(","+opts+",", ",omitempty,"), depth: depth}
			prev, seen := byName[name]
			if !seen {
				order = append(order, name)
			}
			if !seen || depth < prev.depth {
				byName[name] = f
			}
		}
	}
	walk(t, 0)
	out := make([]field, 0, len(order))
	for _, n := range order {
		out = append(out, byName[n])
	}
	return out
}

func (g *gen) fail(format string, args ...any) {
	if g.err == nil {
		g.err = fmt.Errorf(format, args...)
	}
}
