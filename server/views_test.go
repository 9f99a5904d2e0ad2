package server

import (
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/tree"
)

// The events endpoint decodes a payload by the store's kind table alone: a
// kind defined above the store whose name looks like a store kind's
// (tree's group.filter) is shown as its writer stored it, not decoded as a
// group record and reported undecodable.
func TestEventViewDecodesByTheKindTable(t *testing.T) {
	payload, err := msgpack.Marshal(map[string]string{"reason": "zero outcome variance"})
	if err != nil {
		t.Fatal(err)
	}
	v := EventView(model.Event{Seq: 9, Kind: tree.EvGroupFilter, Step: 1, Group: 2, Payload: payload})
	m, ok := v.Payload.(map[string]any)
	if !ok || m["reason"] != "zero outcome variance" {
		t.Fatalf("group.filter payload shown as %#v, want its reason", v.Payload)
	}
	g, err := msgpack.Marshal(&model.Group{ID: 2, Step: 1, Task: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if rec, ok := EventView(model.Event{Seq: 3, Kind: model.EvGroupOpen, Payload: g}).Payload.(*model.Group); !ok || rec.ID != 2 || rec.Task != "t" {
		t.Fatalf("group.open payload shown as %#v, want the group", rec)
	}
}
