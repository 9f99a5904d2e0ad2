package publish

import (
	"errors"

	"golang.org/x/sys/unix"
)

// renameNoReplace renames src to dst unless dst exists (ErrExists), in one
// step where the file system can (renameat2 RENAME_NOREPLACE).
func renameNoReplace(src, dst string) error {
	err := unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
	switch {
	case errors.Is(err, unix.EEXIST):
		return ErrExists
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS):
		return renameChecked(src, dst) // a file system without the flag
	}
	return err
}

func isUnsupported(err error) bool { return errors.Is(err, unix.EINVAL) }
