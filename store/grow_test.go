package store_test

import (
	"os"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// Each time a commit grows the file, bbolt truncates and fsyncs it before
// writing the pages: a second flush in that commit. So a young file that
// takes commits of a few MiB grows ahead of them, by at least four times
// the commit: the three commits after one that grew the file never grow
// it again, and the file stays within a few commits of its data.
func TestFileGrowsAheadOfItsCommits(t *testing.T) {
	path := tempPath(t, "grow.db")
	db := storetest.OpenPath(t, path, storetest.Options())
	turn := textTurn("t")
	turn.ObservationTokens = make([]uint32, 2500) // 10 KB
	var node uint64
	update(t, db, func(tx *store.Tx) error {
		_, n, err := runWithRoot(tx)
		node = n.ID
		return err
	})
	size := func() int64 {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	const commits, perCommit = 10, 200 // ~2 MB a commit
	prev, grew := size(), make([]bool, commits)
	for i := range commits {
		inRun(t, db, true, "r", func(r *store.RunTx) error {
			turns := make([]model.Turn, perCommit)
			for j := range turns {
				turns[j] = turn
			}
			return r.AppendTurns(node, i*perCommit, turns...)
		})
		now := size()
		grew[i], prev = now != prev, now
		for j := max(i-3, 0); j < i; j++ {
			if grew[i] && grew[j] {
				t.Errorf("commits %d and %d of %d turns of 10 KB both grew the file (to %d bytes)", j+1, i+1, perCommit, now)
			}
		}
	}
	if data := int64(commits * perCommit * 10_000); prev > 3*data {
		t.Errorf("%d bytes of turns in a %d-byte file", data, prev)
	}
}
