package replay_test

import (
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/replay/internal/replaytest"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// boltWalk is the anchor: a bare bbolt cursor over runs/<id>/events,
// touching each value and decoding nothing.
func boltWalk(db *store.DB, run string) (n int, err error) {
	err = storetest.Bolt(db).View(func(tx *bolt.Tx) error {
		c := tx.Bucket([]byte("runs")).Bucket([]byte(run)).Bucket([]byte("events")).Cursor()
		sum := 0
		for k, v := c.First(); k != nil; k, v = c.Next() {
			sum += len(v)
			n++
		}
		if sum == 0 {
			n = 0
		}
		return nil
	})
	return n, err
}

func iterateAll(db *store.DB, run string) (n int, err error) {
	err = db.View(func(tx *store.Tx) error {
		r, err := tx.Run(run)
		if err != nil {
			return err
		}
		return replay.Iterate(r, 0, 0, func(replay.Event) error { n++; return nil })
	})
	return n, err
}

func storeEvents(db *store.DB, run string) (n int, err error) {
	err = db.View(func(tx *store.Tx) error {
		r, err := tx.Run(run)
		if err != nil {
			return err
		}
		return r.Events(1, func(model.Event) error { n++; return nil })
	})
	return n, err
}

// BenchmarkScan measures, side by side in each iteration so a noisy
// machine affects both alike, the bare bbolt walk of the events bucket,
// the store's event decoding (frame, CRC, msgpack header), replay's typed
// iteration (plus each payload decoded into its record), and a full
// state rebuild. Reported: events/s of each and replay's ratio to the
// bare walk (the replay target asks ≥ 1,000,000 events/s and ≥ 0.5×).
func BenchmarkScan(b *testing.B) {
	db, run, last := replaytest.BenchRun(b)
	type way struct {
		name string
		fn   func(*store.DB, string) (int, error)
		dur  time.Duration
	}
	ways := []*way{
		{name: "bolt", fn: boltWalk},
		{name: "store", fn: storeEvents},
		{name: "iterate", fn: iterateAll},
		{name: "state", fn: func(db *store.DB, run string) (int, error) {
			n := 0
			err := db.View(func(tx *store.Tx) error {
				r, err := tx.Run(run)
				if err != nil {
					return err
				}
				st, err := replay.StateAt(r, r.LastSeq())
				n = int(st.Seq)
				return err
			})
			return n, err
		}},
	}
	for b.Loop() {
		for _, w := range ways {
			start := time.Now()
			n, err := w.fn(db, run)
			w.dur += time.Since(start)
			if err != nil || uint64(n) != last {
				b.Fatalf("%s: %d events of %d, %v", w.name, n, last, err)
			}
		}
	}
	events := float64(last) * float64(b.N)
	for _, w := range ways {
		b.ReportMetric(events/w.dur.Seconds(), w.name+"-events/s")
	}
	b.ReportMetric(float64(ways[0].dur)/float64(ways[2].dur), "iterate/bolt")
	b.ReportMetric(float64(ways[0].dur)/float64(ways[1].dur), "store/bolt")
	b.ReportMetric(float64(last), "events")
	b.ReportMetric(0, "ns/op") // the per-way figures above are the result
}
