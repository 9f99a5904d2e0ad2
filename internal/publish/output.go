package publish

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gofrs/flock"
)

const (
	// partialMark and creatingMark name a temporary folder: ".NAME" +
	// mark + random. A folder is made under the creating name, locked,
	// then renamed to the partial one, so a sweep never meets an
	// unlocked partial folder of a live process.
	partialMark  = ".partial-"
	creatingMark = ".creating-"
	// lockName is the lock file inside a temporary folder.
	lockName = ".lock"
	// maxNameInTemp bounds how much of the destination's name the
	// temporary folder's name repeats (a name has at most 255 bytes).
	maxNameInTemp = 100
)

// Output is a file or folder being built for a destination. Build it at
// Path, then Publish it, or Abort.
type Output struct {
	g    *Guard
	dest string
	dir  string // the temporary folder beside dest
	lock *flock.Flock
	// Under g's mutex when g is not nil.
	state state
}

type state int

const (
	building state = iota
	published
	aborted
)

// Begin starts an output for dest, which is not touched until Publish:
// it removes what killed processes left beside dest (Sweep), then makes
// and locks the temporary folder the output is built in. The output is
// not a Guard's (a stop signal does not remove it); see Guard.Begin.
func Begin(dest string) (*Output, error) { return begin(nil, dest) }

func begin(g *Guard, dest string) (*Output, error) {
	parent, name := filepath.Split(filepath.Clean(dest))
	if parent == "" {
		parent = "."
	}
	_, _ = Sweep(parent) // best effort: what it cannot remove, the next run tries
	short := name
	if len(short) > maxNameInTemp {
		short = short[:maxNameInTemp]
	}
	// Another process's sweep may remove the new folder before it is
	// locked (it cannot tell it from a killed process's): then it is
	// made again.
	var err error
	for range 3 {
		var dir string
		var lock *flock.Flock
		if dir, lock, err = makeLocked(parent, "."+short); err == nil {
			return &Output{g: g, dest: dest, dir: dir, lock: lock}, nil
		}
	}
	return nil, err
}

// makeLocked makes a temporary folder in parent named prefix + partialMark
// + random, holding the lock file, locked. It is made under the creating
// name and renamed once locked, so an unlocked partial folder is always a
// dead process's.
func makeLocked(parent, prefix string) (string, *flock.Flock, error) {
	creating, err := os.MkdirTemp(parent, prefix+creatingMark+"*")
	if err != nil {
		return "", nil, err
	}
	lock := flock.New(filepath.Join(creating, lockName))
	if ok, err := lock.TryLock(); !ok || err != nil {
		_ = lock.Close()
		_ = os.RemoveAll(creating)
		if err == nil {
			err = errors.New("publish: a new temporary folder is locked by another process")
		}
		return "", nil, err
	}
	dir := filepath.Join(parent, strings.Replace(filepath.Base(creating), creatingMark, partialMark, 1))
	if err := os.Rename(creating, dir); err != nil {
		_ = lock.Close()
		_ = os.RemoveAll(creating)
		return "", nil, err
	}
	return dir, lock, nil
}

// Path is where the output is built: inside the temporary folder, under
// the destination's own name.
func (o *Output) Path() string { return filepath.Join(o.dir, filepath.Base(filepath.Clean(o.dest))) }

// Dest is the destination.
func (o *Output) Dest() string { return o.dest }

// Create creates the output as a file at Path with mode perm (before the
// umask), for writing.
func (o *Output) Create(perm fs.FileMode) (*os.File, error) {
	return os.OpenFile(o.Path(), os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
}

// Publish puts the finished output at the destination. What is at Path,
// a file or a folder, is synced first; then it is renamed to the
// destination — replacing a file there when replace is set, otherwise
// ErrExists if anything is there — and the destination's folder is
// synced. The temporary folder is removed either way. ErrInterrupted
// when a stop signal removed the output first.
func (o *Output) Publish(replace bool) error {
	defer o.Abort() // the temporary folder, emptied by the rename
	if err := syncPath(o.Path()); err != nil {
		if o.interrupted() {
			return ErrInterrupted // a stop signal removed it meanwhile
		}
		return err
	}
	if err := o.rename(replace); err != nil {
		return err
	}
	return syncPath(filepath.Dir(filepath.Clean(o.dest)))
}

// interrupted reports whether the output was removed unpublished.
func (o *Output) interrupted() bool {
	if o.g != nil {
		o.g.mu.Lock()
		defer o.g.mu.Unlock()
	}
	return o.state == aborted
}

// rename moves the output to the destination, unless a stop signal
// removed it first (the Guard's removal and this exclude each other).
func (o *Output) rename(replace bool) error {
	if o.g != nil {
		o.g.mu.Lock()
		defer o.g.mu.Unlock()
		delete(o.g.pending, o)
	}
	switch o.state {
	case aborted:
		return ErrInterrupted
	case published:
		return errors.New("publish: published twice")
	}
	var err error
	if replace {
		err = os.Rename(o.Path(), o.dest)
	} else {
		err = renameNoReplace(o.Path(), o.dest)
	}
	if err == nil {
		o.state = published
	}
	return err
}

// Abort removes the temporary folder and what was built in it, unless the
// output was published. It may be called more than once, and after
// Publish (a no-op then but for the emptied folder).
func (o *Output) Abort() {
	if o.g != nil {
		o.g.mu.Lock()
		defer o.g.mu.Unlock()
		delete(o.g.pending, o)
	}
	o.remove()
}

// remove removes the temporary folder and releases its lock; an output
// not yet published is aborted.
func (o *Output) remove() {
	if o.state == building {
		o.state = aborted
	}
	if o.lock == nil {
		// Removed before — by a stop signal, while the command could still
		// write into the folder (its copy stops when it sees the context
		// end). Its owner's Abort, once the writing is over, removes what
		// came after; the sweep would leave a folder without its lock.
		if o.state == aborted {
			_ = os.RemoveAll(o.dir)
		}
		return
	}
	_ = removeTemp(o.dir)
	_ = o.lock.Close()
	o.lock = nil
}

// removeTemp removes a temporary folder, its lock file last: a process
// killed while removing it leaves a folder that a sweep still knows for
// a dead process's (its lock file is there and free), or an empty one.
func removeTemp(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, e := range entries {
		if e.Name() != lockName {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return os.RemoveAll(dir)
}

// syncPath syncs a file's data, or a folder's entries.
func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil && !isUnsupported(err) {
		return err
	}
	return nil
}

// Sweep removes, in folder dir, the temporary folders whose process has
// died: those whose lock is free, and those left half made (killed
// between making the folder and locking it). It returns what it removed.
// A live process's outputs are locked, and left alone.
func Sweep(dir string) (removed []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, ".") {
			continue
		}
		path := filepath.Join(dir, name)
		if (strings.Contains(name, creatingMark) || strings.Contains(name, partialMark)) && sweep(path) {
			removed = append(removed, path)
		}
	}
	return removed, nil
}

// sweep removes the temporary folder at path if its lock is free. Without
// its lock file, a folder of this package's is empty: made by a process
// killed before it locked it (a creating folder), or one whose removal was
// cut short after the lock file, which goes last (a partial one). So such
// a folder is removed only if empty: one with anything in it is not this
// package's (a folder of that name in a shared one, such as /tmp).
func sweep(path string) bool {
	lf := filepath.Join(path, lockName)
	if _, err := os.Lstat(lf); err != nil {
		return errors.Is(err, fs.ErrNotExist) && os.Remove(path) == nil
	}
	lock := flock.New(lf)
	ok, err := lock.TryLock()
	if !ok || err != nil {
		return false
	}
	defer lock.Close()
	return removeTemp(path) == nil
}

// Scratch makes a temporary folder in dir for a process's own work (files
// staged before they are uploaded, say), named for name and locked while
// the process lives, and returns it with the function that removes it.
// It is an output's folder that is never published: one a killed process
// left, or a removal cut short, goes with the next Scratch or Begin in dir.
func Scratch(dir, name string) (path string, release func(), err error) {
	o, err := Begin(filepath.Join(dir, name))
	if err != nil {
		return "", nil, err
	}
	return o.dir, o.Abort, nil
}
