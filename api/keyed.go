package api

// Keyed is embedded in every write request: the client key that makes a
// retry safe.
type Keyed struct {
	ClientKey string `json:"client_key"`
}

// Key returns where a write request keeps its client key: a client fills
// in a fresh one when the caller left it empty, and the server blanks it
// while it fingerprints the request.
func (k *Keyed) Key() *string { return &k.ClientKey }

// KeyedRequest is a write request: one that embeds Keyed.
type KeyedRequest interface{ Key() *string }
