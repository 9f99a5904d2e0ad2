package store_test

import (
	"encoding/binary"
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/patrdb/patrdb/model"

	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// scalarRun creates run "r" with n completed steps (one closed group and a
// checkpoint each).
func scalarRun(t *testing.T, db *store.DB, n int) {
	t.Helper()
	update(t, db, func(tx *store.Tx) error {
		r, err := tx.CreateRun("r", nil, nil)
		if err != nil {
			return err
		}
		for step := uint64(1); step <= uint64(n); step++ {
			g, err := r.OpenGroup(store.GroupSpec{Step: step, Task: "t"})
			if err != nil {
				return err
			}
			if err := r.CloseGroup(step, g.ID); err != nil {
				return err
			}
			if err := r.PutCheckpoint(model.Checkpoint{Step: step, Inline: []byte{byte(step)}}); err != nil {
				return err
			}
		}
		return nil
	})
}

// A step's scalars merge: a name given again is replaced, the others
// stay; each write logs the record as it left it.
func TestPutScalarsMergesAStepsFigures(t *testing.T) {
	db := storetest.Open(t)
	scalarRun(t, db, 0)
	puts := []struct {
		step   uint64
		values map[string]float64
	}{
		{1, map[string]float64{"loss": 2.5, "kl": 0.01}},
		{3, map[string]float64{"loss": 1.25}},
		{1, map[string]float64{"loss": 2.0, "train/lr": 1e-6}},
	}
	for _, p := range puts {
		inRun(t, db, true, "r", func(r *store.RunTx) error { return r.PutScalars(p.step, p.values) })
	}
	want := map[uint64]map[string]float64{
		1: {"loss": 2.0, "kl": 0.01, "train/lr": 1e-6},
		3: {"loss": 1.25},
	}
	inRun(t, db, false, "r", func(r *store.RunTx) error {
		s, err := r.ScalarsAt(1)
		if err != nil || !reflect.DeepEqual(s.Values, want[1]) || s.Step != 1 || s.UpdatedAt == 0 {
			t.Fatalf("step 1: %+v %v, want %v", s, err, want[1])
		}
		if _, err := r.ScalarsAt(2); !errors.Is(err, model.ErrNotFound) {
			t.Fatalf("step 2 (never logged): %v, want ErrNotFound", err)
		}
		var steps []uint64
		err = r.ForEachScalars(0, func(s model.Scalars) error {
			steps = append(steps, s.Step)
			if !reflect.DeepEqual(s.Values, want[s.Step]) {
				t.Errorf("step %d: %v, want %v", s.Step, s.Values, want[s.Step])
			}
			return nil
		})
		if err != nil || !reflect.DeepEqual(steps, []uint64{1, 3}) {
			t.Fatalf("steps %v %v, want [1 3]", steps, err)
		}
		var logged []model.Scalars
		err = r.Events(0, func(e model.Event) error {
			if e.Kind != model.EvScalars {
				return nil
			}
			var s model.Scalars
			if err := store.DecodePayload(e, &s); err != nil {
				return err
			}
			if s.Step != e.Step {
				t.Errorf("event %d names step %d, its record step %d", e.Seq, e.Step, s.Step)
			}
			logged = append(logged, s)
			return nil
		})
		if err != nil || len(logged) != 3 || !reflect.DeepEqual(logged[2].Values, want[1]) {
			t.Fatalf("logged %+v %v: want three events, the last with step 1 merged", logged, err)
		}
		return nil
	})
}

// The same record encodes to the same bytes whatever the map's order:
// the log cross-check and the crash tests compare bytes.
func TestScalarsEncodeInNameOrder(t *testing.T) {
	values := map[string]float64{}
	for _, n := range strings.Fields("z y x w v u t s r q p o n m l k j i h g f e d c b a") {
		values[n] = float64(len(n))
	}
	var first []byte
	for i := range 20 {
		db := storetest.Open(t)
		scalarRun(t, db, 0)
		inRun(t, db, true, "r", func(r *store.RunTx) error { return r.PutScalars(1, values) })
		update(t, db, func(tx *store.Tx) error {
			raw := append([]byte(nil), rawBucket(t, tx, "r", "scalars").Get(u64(1))...)
			raw = raw[:len(raw)-9] // the time, which moves with the clock
			if i == 0 {
				first = raw
			} else if string(raw) != string(first) {
				t.Fatalf("write %d encoded differently:\n%x\n%x", i, raw, first)
			}
			return nil
		})
	}
}

// Bad input is ErrInvalid and leaves the file as it was.
func TestPutScalarsRefusesBadInput(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	db, err := store.Open(path, syncOptions())
	if err != nil {
		t.Fatal(err)
	}
	scalarRun(t, db, 3)
	full := map[string]float64{}
	for i := range store.MaxScalarsPerPut {
		full["m"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+string(rune('a'+i/26))] = 1
	}
	update(t, db, func(tx *store.Tx) error {
		r, err := tx.Run("r")
		if err != nil {
			return err
		}
		if err := r.PutScalars(4, full); err != nil {
			return err
		}
		if _, err := r.DropSteps(1); err != nil {
			return err
		}
		return nil
	})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before := fileDigest(t, path)
	tooMany := map[string]float64{}
	for i := range store.MaxScalarsPerPut + 1 {
		tooMany[strings.Repeat("n", 1+i%100)+string(rune('A'+i/100))] = 1
	}
	bad := []struct {
		name   string
		step   uint64
		values map[string]float64
	}{
		{"step 0", 0, map[string]float64{"loss": 1}},
		{"step past MaxStep", model.MaxStep + 1, map[string]float64{"loss": 1}},
		{"a dropped step", 1, map[string]float64{"loss": 1}},
		{"no values", 2, nil},
		{"NaN", 2, map[string]float64{"loss": math.NaN()}},
		{"+Inf", 2, map[string]float64{"loss": math.Inf(1)}},
		{"empty name", 2, map[string]float64{"": 1}},
		{"name with space around", 2, map[string]float64{" loss": 1}},
		{"name with a newline", 2, map[string]float64{"lo\nss": 1}},
		{"name not UTF-8", 2, map[string]float64{"lo\xffss": 1}},
		{"name too long", 2, map[string]float64{strings.Repeat("l", store.MaxScalarName+1): 1}},
		{"too many in one write", 2, tooMany},
	}
	db, err = store.Open(path, syncOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range bad {
		err := db.UpdateRun("r", func(r *store.RunTx) error {
			return r.PutScalars(c.step, c.values)
		})
		if !errors.Is(err, model.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", c.name, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if fileDigest(t, path) != before {
		t.Fatal("a refused write changed the file")
	}

	// The step bound, on a copy filled up to it.
	db = storetest.Open(t)
	scalarRun(t, db, 0)
	for k := range store.MaxScalarsInStep / store.MaxScalarsPerPut {
		part := map[string]float64{}
		for i := range store.MaxScalarsPerPut {
			part[strings.Repeat("p", k+1)+string(rune('a'+i%26))+string(rune('a'+i/26))] = 1
		}
		inRun(t, db, true, "r", func(r *store.RunTx) error { return r.PutScalars(1, part) })
	}
	err = db.UpdateRun("r", func(r *store.RunTx) error {
		return r.PutScalars(1, map[string]float64{"one-more": 1})
	})
	if !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("name %d of a step: %v, want ErrInvalid", store.MaxScalarsInStep+1, err)
	}
	inRun(t, db, true, "r", func(r *store.RunTx) error { return r.PutScalars(1, map[string]float64{"paa": 2}) }) // a name it has: fine
}

// Check holds scalars to their rule and to the log: a record no event
// wrote, or whose bytes were damaged, is a violation.
func TestCheckSeesScalarsOffTheLog(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(b *bolt.Bucket) error
		want   string
	}{
		{"moved", func(b *bolt.Bucket) error { return b.Put(u64(9), b.Get(u64(1))) }, "record does not match its key"},
		{"unlogged", func(b *bolt.Bucket) error {
			return b.Put(u64(7), b.Tx().Bucket([]byte("runs")).Bucket([]byte("other")).Bucket([]byte("scalars")).Get(u64(7)))
		}, "record is not in the event log"},
		{"flipped", func(b *bolt.Bucket) error {
			v := append([]byte(nil), b.Get(u64(1))...)
			v[len(v)-12] ^= 0x40
			return b.Put(u64(1), v)
		}, "CRC"},
		{"deleted", func(b *bolt.Bucket) error { return b.Delete(u64(1)) }, "record missing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			db, err := store.Open(filepath.Join(t.TempDir(), "s.db"), storetest.Options())
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			scalarRun(t, db, 1)
			inRun(t, db, true, "r", func(r *store.RunTx) error { return r.PutScalars(1, map[string]float64{"loss": 0.5}) })
			update(t, db, func(tx *store.Tx) error {
				r, err := tx.CreateRun("other", nil, nil)
				if err != nil {
					return err
				}
				return r.PutScalars(7, map[string]float64{"loss": 0.5})
			})
			if vs, err := db.Check(nil); err != nil || len(vs) != 0 {
				t.Fatalf("before the damage: %v %v", vs, err)
			}
			update(t, db, func(tx *store.Tx) error { return c.damage(rawBucket(t, tx, "r", "scalars")) })
			vs, err := db.Check(nil)
			if err != nil && !errors.Is(err, store.ErrCorrupt) {
				t.Fatal(err)
			}
			found := false
			for _, v := range vs {
				found = found || strings.Contains(v.String(), c.want)
			}
			if !found {
				t.Fatalf("violations %v: none says %q", vs, c.want)
			}
		})
	}
}

// Scalars outlive DropSteps, with the events that last wrote them: the
// trainer's curves cover the whole run, and the file still checks clean.
func TestScalarsSurviveDropSteps(t *testing.T) {
	db := storetest.Open(t)
	scalarRun(t, db, 0)
	update(t, db, func(tx *store.Tx) error {
		r, err := tx.Run("r")
		if err != nil {
			return err
		}
		for step := uint64(1); step <= 3; step++ {
			g, err := r.OpenGroup(store.GroupSpec{Step: step, Task: "t"})
			if err != nil {
				return err
			}
			if err := r.CloseGroup(step, g.ID); err != nil {
				return err
			}
			if err := r.PutScalars(step, map[string]float64{"loss": float64(step)}); err != nil {
				return err
			}
			if err := r.PutScalars(step, map[string]float64{"kl": float64(step) / 10}); err != nil {
				return err
			}
			if err := r.PutCheckpoint(model.Checkpoint{Step: step, Inline: []byte{1}}); err != nil {
				return err
			}
		}
		return nil
	})
	inRun(t, db, true, "r", func(r *store.RunTx) error {
		_, err := r.DropSteps(2)
		return err
	})
	inRun(t, db, false, "r", func(r *store.RunTx) error {
		n := 0
		err := r.ForEachScalars(0, func(s model.Scalars) error {
			n++
			if s.Values["loss"] != float64(s.Step) || s.Values["kl"] != float64(s.Step)/10 {
				t.Errorf("step %d after the drop: %v", s.Step, s.Values)
			}
			return nil
		})
		if err != nil || n != 3 {
			t.Fatalf("%d steps of scalars after dropping two, %v; want 3", n, err)
		}
		return nil
	})
	// storetest.Open's cleanup checks the file.
}

// LoadRun rebuilds a run's scalars from its events, as it does every
// record (Restore from the lake goes through it).
func TestLoadRunRebuildsScalars(t *testing.T) {
	src := storetest.Open(t)
	scalarRun(t, src, 2)
	inRun(t, src, true, "r", func(r *store.RunTx) error { return r.PutScalars(2, map[string]float64{"loss": 0.25, "kl": 0.5}) })
	inRun(t, src, true, "r", func(r *store.RunTx) error { return r.PutScalars(2, map[string]float64{"loss": 0.125}) })
	dst := storetest.Open(t)
	if err := loadCopy(t, src, dst, "r", "copy", nil); err != nil {
		t.Fatal(err)
	}
	inRun(t, dst, false, "copy", func(r *store.RunTx) error {
		s, err := r.ScalarsAt(2)
		if err != nil || !reflect.DeepEqual(s.Values, map[string]float64{"loss": 0.125, "kl": 0.5}) {
			t.Fatalf("loaded scalars %+v %v", s, err)
		}
		return nil
	})
}

// A format-4 file (every record as format 5 writes it, without scalars)
// reads as it is and becomes format 5 with its first write.
func TestFormat4UpgradesOnFirstWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v4.db")
	db, err := store.Open(path, syncOptions())
	if err != nil {
		t.Fatal(err)
	}
	scalarRun(t, db, 1)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	setFormat(t, path, 4)
	before := fileDigest(t, path)
	for _, ro := range []bool{true, false} {
		db, err := store.Open(path, &store.Options{ReadOnly: ro, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		inRun(t, db, false, "r", func(r *store.RunTx) error {
			return r.ForEachScalars(0, func(model.Scalars) error { t.Error("scalars in a format-4 file"); return nil })
		})
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if fileDigest(t, path) != before {
		t.Fatal("opening a format-4 file changed it")
	}
	db, err = store.Open(path, syncOptions())
	if err != nil {
		t.Fatal(err)
	}
	inRun(t, db, true, "r", func(r *store.RunTx) error { return r.PutScalars(1, map[string]float64{"loss": 1}) })
	storetest.MustCheckClose(t, db)
	if got := fileFormat(t, path); got != 5 {
		t.Fatalf("after the first write: format %d, want 5", got)
	}
}

func setFormat(t *testing.T, path string, format uint64) {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	if err := bdb.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("meta")).Put([]byte("format"), binary.BigEndian.AppendUint64(nil, format))
	}); err != nil {
		t.Fatal(err)
	}
}
