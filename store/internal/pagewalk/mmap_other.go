//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package pagewalk

import "os"

// mapFile does not map on this platform: the walk reads page by page.
func mapFile(*os.File, int64, bool) ([]byte, func(), bool) { return nil, nil, false }

func unmapPages([]byte) {}
