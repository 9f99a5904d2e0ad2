//go:build windows

package replay

import "context"

// dirLocks says whether folders can be locked here: Windows cannot lock a
// folder, so exports into one lake are not coordinated there.
const dirLocks = false

type dirLock struct{}

func newDirLock(string) dirLock            { return dirLock{} }
func (dirLock) lock(context.Context) error { return nil }
func (dirLock) tryLock() (bool, error)     { return true, nil }
func (dirLock) unlock()                    {}
