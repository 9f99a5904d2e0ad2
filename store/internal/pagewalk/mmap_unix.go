//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package pagewalk

import (
	"os"
	"syscall"
)

// mapFile maps size bytes of f read-only when want is set; ok is false
// when it does not (the walk then reads page by page).
func mapFile(f *os.File, size int64, want bool) (data []byte, unmap func(), ok bool) {
	if !want || size <= 0 || int64(int(size)) != size {
		return nil, nil, false
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, false
	}
	return data, func() { _ = syscall.Munmap(data) }, true
}

// unmapPages drops data's pages from the process's page tables, not from
// the page cache: the next read of one maps it again.
func unmapPages(data []byte) { _ = syscall.Madvise(data, syscall.MADV_DONTNEED) }
