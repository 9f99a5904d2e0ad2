// Package vocab holds the machinery behind docs/json-schema.json, the JSON
// vocabulary every interface of patrdb speaks (the CLI's --json, the HTTP
// API, the Python client): it derives a JSON Schema from Go types by the
// rules encoding/json follows, and validates documents against the schema
// file. The schema is derived, then committed and reviewed like a golden
// file, so a renamed or dropped field shows up as a diff of the schema,
// and every output the tests produce is checked against it.
//
// Only tests import this package.
package vocab
