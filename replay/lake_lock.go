package replay

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Two exports into one lake at once (two trainers, or a scheduled export
// while someone exports by hand) must not both judge a partition absent
// and then both move theirs in: the second would replace the first's
// without Force. So an export holds the lake's lock while it compares and
// moves partitions in, and while it sweeps and makes its working folder;
// it writes its Parquet files, the long part, without it. The lock is an
// advisory lock on the lake's root folder itself, so the lake holds no
// lock file, and the kernel drops it when a process dies.
//
// Each export also locks its own hidden working folder (.export-*) for as
// long as it runs. A working folder nobody holds was left by an export
// that was killed, and the next export removes it.
//
// Where folders cannot be locked (Windows), exports are not coordinated
// and left-over working folders stay: see dirLocks.

// lakeLockRetry is how often a waiting export tries the lock again.
const lakeLockRetry = 50 * time.Millisecond

// lockLake waits, until ctx ends, for the lake's lock.
func lockLake(ctx context.Context, root string) (dirLock, error) {
	l := newDirLock(root)
	if err := l.lock(ctx); err != nil {
		return dirLock{}, fmt.Errorf("export: waiting for another export into %s: %w", root, err)
	}
	return l, nil
}

// newWorkDir sweeps the working folders of killed exports and makes this
// export's, locked. The caller holds the lake's lock, so no other export
// is between making its folder and locking it.
func newWorkDir(root string) (dir string, held dirLock, err error) {
	if dirLocks {
		stale, _ := filepath.Glob(filepath.Join(root, ".export-*"))
		for _, s := range stale {
			l := newDirLock(s)
			if ok, err := l.tryLock(); err == nil && ok {
				_ = os.RemoveAll(s)
				l.unlock()
			}
		}
	}
	dir, err = os.MkdirTemp(root, ".export-")
	if err != nil {
		return "", dirLock{}, fmt.Errorf("export: %w", err)
	}
	held = newDirLock(dir)
	ok, err := held.tryLock()
	if err == nil && !ok {
		err = fmt.Errorf("held by another process")
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", dirLock{}, fmt.Errorf("export: locking %s: %w", dir, err)
	}
	return dir, held, nil
}
