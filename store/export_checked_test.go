package store

// CheckedPages is how many pages cr's reads have checked so far.
func CheckedPages(r *RunTx) int { return r.chk.paths.Pages() }
