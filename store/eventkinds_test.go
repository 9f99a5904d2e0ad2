package store_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// The kind table is the store's log, whole: a run that writes every kind
// of record (a published version and a drop among them) logs exactly the
// table's kinds besides its own custom one, before and after the drop; each payload decodes into the
// record RecordFor names for its kind, the one the kind's record bucket
// holds; and a custom kind has no record.
func TestEventKindTableCoversTheLog(t *testing.T) {
	db := storetest.Open(t)
	f := buildFixture(t, db)
	var events []model.Event
	read := func() {
		inRun(t, db, false, f.Run, func(r *store.RunTx) error {
			return r.Events(1, func(e model.Event) error { events = append(events, e); return nil })
		})
	}
	read()
	inRun(t, db, true, f.Run, func(r *store.RunTx) error {
		if err := r.SetGroupInterval(f.G2.Step, f.G2.ID, 1); err != nil { // group.update
			return err
		}
		if err := r.SetEnvState(f.X, []byte("env")); err != nil { // node.env
			return err
		}
		rb, err := r.Rubric(f.RCand1)
		if err != nil {
			return err
		}
		rb.Support++
		if err := r.UpdateRubric(rb); err != nil { // rubric.update
			return err
		}
		if err := r.FailNode(f.X, "gave up"); err != nil {
			return err
		}
		if err := r.CloseGroup(f.G2.Step, f.G2.ID); err != nil { // group.close
			return err
		}
		if _, err := r.PutReply(store.Reply{Key: "k", Op: "POST /x", Status: 200, Body: []byte("{}")}); err != nil {
			return err
		}
		if err := r.PublishVersion(2); err != nil {
			return err
		}
		if err := r.PutScalars(2, map[string]float64{"loss": 0.5}); err != nil {
			return err
		}
		_, err = r.DropSteps(1)
		return err
	})
	mustCheck(t, db)
	kinds := store.EventKinds()
	if len(slices.Compact(slices.Sorted(slices.Values(kinds)))) != len(kinds) {
		t.Fatalf("the table names a kind twice: %v", kinds)
	}
	want := map[string]reflect.Type{"run.": reflect.TypeFor[*model.Run](), "group.": reflect.TypeFor[*model.Group](),
		"node.": reflect.TypeFor[*model.Node](), "adv.": reflect.TypeFor[*model.Advantage](),
		"rubric.": reflect.TypeFor[*model.Rubric](), "ckpt.": reflect.TypeFor[*model.Checkpoint](),
		"server.": reflect.TypeFor[*store.Reply](), "scalars.": reflect.TypeFor[*model.Scalars]()}
	seen := map[model.EventKind]bool{}
	read() // the drop deleted the first events
	for _, e := range events {
		rec := store.RecordFor(e.Kind)
		if e.Kind == "test.note" {
			if rec != nil {
				t.Errorf("a custom kind has record %T", rec)
			}
			continue
		}
		seen[e.Kind] = true
		if !slices.Contains(kinds, e.Kind) || rec == nil {
			t.Errorf("event %d: the store wrote kind %q, which its table lacks", e.Seq, e.Kind)
			continue
		}
		if err := store.DecodePayload(e, rec); err != nil {
			t.Errorf("event %d (%s): payload does not decode into %T: %v", e.Seq, e.Kind, rec, err)
		}
		wantType := want[string(e.Kind)[:strings.IndexByte(string(e.Kind), '.')+1]]
		if e.Kind == model.EvTurns {
			wantType = reflect.TypeFor[*model.TurnsPayload]()
		}
		if reflect.TypeOf(rec) != wantType {
			t.Errorf("%s: RecordFor gives %T, want %v", e.Kind, rec, wantType)
		}
	}
	for _, k := range kinds {
		if !seen[k] {
			t.Errorf("the table names kind %q, which the store never wrote here", k)
		}
	}
}
