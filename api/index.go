package api

// Endpoint is one entry of the API index.
type Endpoint struct {
	Method  string `json:"method"`
	Path    string `json:"path"`
	Summary string `json:"summary"`
}

// Index is the answer of GET /api/v1/.
type Index struct {
	API        string     `json:"api"`         // the path version, "v1"
	APIVersion string     `json:"api_version"` // "<major>.<minor>"
	Server     string     `json:"server"`      // the patrdb module version
	OpenAPI    string     `json:"openapi"`     // where the OpenAPI document is
	Metrics    string     `json:"metrics"`     // where the Prometheus metrics are
	Endpoints  []Endpoint `json:"endpoints"`
}
