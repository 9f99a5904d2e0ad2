package lake

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gofrs/flock"

	"github.com/patrdb/patrdb/internal/publish"
)

// localLake is a lake in a folder. Files are written into a hidden
// staging folder inside it (.export.partial-*, which readers skip) and
// renamed into place, so each appears whole; the staging folder of an
// export that was killed is removed by the next one (each holds a lock on
// a file in its own, which the system drops when the process dies).
type localLake struct{ root string }

func (l *localLake) String() string { return l.root }

func (l *localLake) path(key string) string { return filepath.Join(l.root, filepath.FromSlash(key)) }

// prepare makes the root if needed, and refuses a file in its place or a
// folder holding a run=/step= export, which readers would mix with the
// tables.
func (l *localLake) prepare() error {
	fi, err := os.Stat(l.root)
	switch {
	case err == nil && !fi.IsDir():
		return fmt.Errorf("%w: %s is a file", ErrLayout, l.root)
	case errors.Is(err, fs.ErrNotExist):
		return os.MkdirAll(l.root, 0o755)
	case err != nil:
		return err
	}
	entries, err := os.ReadDir(l.root)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "run=") {
			return fmt.Errorf("%w: %s holds %s, a run=/step= export: use another folder for the lake", ErrLayout, l.root, e.Name())
		}
	}
	return nil
}

func (l *localLake) put(_ context.Context, key, file string) error {
	dst := l.path(key)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.Rename(file, dst)
}

func (l *localLake) putBytes(_ context.Context, key string, b []byte) error {
	if err := l.prepare(); err != nil {
		return err
	}
	dst := l.path(key)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), dst)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}

func (l *localLake) get(_ context.Context, key string) ([]byte, error) {
	return os.ReadFile(l.path(key))
}

type localObject struct {
	*os.File
	n int64
}

func (o localObject) size() int64 { return o.n }

func (l *localLake) open(_ context.Context, key string) (object, error) {
	f, err := os.Open(l.path(key))
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return localObject{f, fi.Size()}, nil
}

// list walks the folders under prefix, skipping hidden ones (staging
// folders, temporary files).
func (l *localLake) list(_ context.Context, prefix string) ([]string, error) {
	var keys []string
	start := l.path(strings.TrimSuffix(prefix, "/"))
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if strings.HasPrefix(d.Name(), ".") && p != start {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !d.IsDir() {
			rel, err := filepath.Rel(l.root, p)
			if err != nil {
				return err
			}
			keys = append(keys, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(keys)
	return keys, err
}

// remove deletes the file and the folders it leaves empty up to the root.
func (l *localLake) remove(_ context.Context, key string) error {
	p := l.path(key)
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for d := filepath.Dir(p); d != l.root && strings.HasPrefix(d, l.root); d = filepath.Dir(d) {
		if os.Remove(d) != nil {
			break // not empty
		}
	}
	return nil
}

// fileLease is a lock on a file, which the system drops when the process
// dies: a killed exporter never keeps the run.
type fileLease struct{ f *flock.Flock }

func (fl fileLease) release()              { _ = fl.f.Unlock() }
func (fl fileLease) lost() <-chan struct{} { return nil }

func (l *localLake) lock(_ context.Context, name string) (lease, error) {
	if err := l.prepare(); err != nil {
		return nil, err
	}
	p := l.path(leaseKey(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, err
	}
	f := flock.New(p)
	ok, err := f.TryLock()
	if err != nil {
		return nil, err
	}
	if !ok {
		holder, _ := os.ReadFile(p + ".holder")
		return nil, &BusyError{Run: name, Holder: strings.TrimSpace(string(holder))}
	}
	_ = os.WriteFile(p+".holder", []byte(holderName()+"\n"), 0o644)
	return fileLease{f}, nil
}

func (l *localLake) stage() (string, func(), error) {
	if err := l.prepare(); err != nil {
		return "", nil, err
	}
	return stageIn(l.root, "export", ".export-")
}

// stageIn makes the folder an export stages its files in, in dir: a
// scratch folder of package publish, locked while its exporter lives and
// removed lock file last, so what a killed exporter leaves — even one
// killed while removing it — goes with the next export's. Staging folders
// of older builds (oldPrefix + random, never renamed) are swept too.
func stageIn(dir, name, oldPrefix string) (string, func(), error) {
	sweepOldStages(dir, oldPrefix)
	return publish.Scratch(dir, name)
}

// sweepOldStages removes the staging folders named oldPrefix* in dir that
// no process holds; one without its lock file may be being made, and stays.
func sweepOldStages(dir, oldPrefix string) {
	stale, _ := filepath.Glob(filepath.Join(dir, oldPrefix+"*"))
	for _, s := range stale {
		lf := filepath.Join(s, ".lock")
		if _, err := os.Stat(lf); err != nil {
			continue
		}
		l := flock.New(lf)
		if ok, err := l.TryLock(); err == nil && ok {
			_ = l.Unlock()
			_ = os.RemoveAll(s)
		}
	}
}

func holderName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("pid %d on %s", os.Getpid(), host)
}
