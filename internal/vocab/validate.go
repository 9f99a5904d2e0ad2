package vocab

import (
	"bytes"
	"fmt"
	"os"

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
	c := jsonschema.NewCompiler()
	if err := c.AddResource(id, doc); err != nil {
		return nil, err
	}
	return &Validator{c: c, id: id, byID: map[string]*jsonschema.Schema{}}, nil
}

// Validate checks the JSON document b against the object named def.
func (v *Validator) Validate(def string, b []byte) error {
	s, ok := v.byID[def]
	if !ok {
		var err error
		if s, err = v.c.Compile(v.id + "#/$defs/" + def); err != nil {
			return err
		}
		v.byID[def] = s
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	return s.Validate(doc)
}
