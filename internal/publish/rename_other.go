//go:build !linux

package publish

import "errors"

func renameNoReplace(src, dst string) error { return renameChecked(src, dst) }

func isUnsupported(err error) bool { return errors.Is(err, errors.ErrUnsupported) }
