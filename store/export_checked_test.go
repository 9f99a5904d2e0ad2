package store

// CheckedPages is how many pages cr's reads have checked so far.
func CheckedPages(cr *CheckedRun) int { return cr.paths.Pages() }
