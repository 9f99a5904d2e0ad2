package store

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Backup writes a consistent copy of the whole file, as of one read
// transaction, to w (bbolt's Tx.WriteTo): writers go on while it runs. The
// copy is a patrdb file as it stood at that commit, free pages included,
// and as long as the data's high-water mark, not the file's size. size,
// when not nil, is told that length before anything is written (an HTTP
// answer's Content-Length). It returns the bytes written.
func (db *DB) Backup(w io.Writer, size func(int64)) (n int64, err error) {
	err = db.View(func(tx *Tx) error {
		if size != nil {
			size(tx.btx.Size())
		}
		n, err = tx.btx.WriteTo(w)
		return err
	})
	return n, err
}

// BackupFile is Backup into a new file at path, which must not exist
// (ErrExists): written under a temporary name beside it, synced, and
// renamed into place only when complete, so path holds a whole copy or
// nothing.
func (db *DB) BackupFile(path string) (n int64, err error) {
	if _, err := os.Lstat(path); err == nil {
		return 0, existsf("backup: %s exists", path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return 0, err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if n, err = db.Backup(f, nil); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("backup into %s: %w", path, err)
	}
	// A link fails where path appeared meanwhile: never overwrite a file.
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return 0, existsf("backup: %s exists", path)
		}
		return 0, fmt.Errorf("backup into %s: %w", path, err)
	}
	_ = os.Remove(tmp)
	return n, nil
}
