package vocab

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Validator checks documents against the objects of a schema file.
type Validator struct {
	c    *jsonschema.Compiler
	id   string
	byID map[string]*jsonschema.Schema
}

// Load reads the schema document at path.
func Load(path string) (*Validator, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: not a JSON object", path)
	}
	id, _ := m["$id"].(string)
	if id == "" { // a document that is not a schema itself, such as OpenAPI's
		id = "urn:patrdb:" + filepath.Base(path)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(id, doc); err != nil {
		return nil, err
	}
	return &Validator{c: c, id: id, byID: map[string]*jsonschema.Schema{}}, nil
}

// Validate checks the JSON document b against the object named def.
func (v *Validator) Validate(def string, b []byte) error {
	return v.ValidateAt("/$defs/"+def, b)
}

// ValidateAt checks the JSON document b against the schema at pointer (a
// JSON pointer into the loaded document, such as an OpenAPI reply's).
func (v *Validator) ValidateAt(pointer string, b []byte) error {
	s, ok := v.byID[pointer]
	if !ok {
		var err error
		if s, err = v.c.Compile(v.id + "#" + pointer); err != nil {
			return err
		}
		v.byID[pointer] = s
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	return s.Validate(doc)
}
