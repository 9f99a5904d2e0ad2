//go:build !windows

package replay

import (
	"context"
	"os"

	"github.com/gofrs/flock"
)

// dirLocks says whether folders can be locked here.
const dirLocks = true

// dirLock is an exclusive advisory lock (flock) on a folder.
type dirLock struct{ f *flock.Flock }

func newDirLock(dir string) dirLock {
	return dirLock{flock.New(dir, flock.SetFlag(os.O_RDONLY))}
}

func (l dirLock) lock(ctx context.Context) error {
	ok, err := l.f.TryLockContext(ctx, lakeLockRetry)
	if err == nil && !ok {
		err = ctx.Err()
	}
	return err
}

func (l dirLock) tryLock() (bool, error) { return l.f.TryLock() }

func (l dirLock) unlock() {
	if l.f != nil {
		_ = l.f.Unlock()
	}
}
