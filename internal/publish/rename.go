package publish

import (
	"errors"
	"io/fs"
	"os"
)

// renameChecked renames src to dst unless dst exists, where the file
// system has no renaming that refuses to replace: a file is hard-linked
// (which fails if dst exists) and its temporary name removed; a folder is
// renamed after a check that dst does not exist.
func renameChecked(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		err := os.Link(src, dst)
		if errors.Is(err, fs.ErrExist) {
			return ErrExists
		}
		if err == nil {
			return os.Remove(src)
		}
		// No hard links here either: the checked rename below.
	}
	if _, err := os.Lstat(dst); err == nil {
		return ErrExists
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.Rename(src, dst)
}
