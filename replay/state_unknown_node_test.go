package replay_test

import (
	"errors"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/replay/internal/replaytest"
)

// A node event (status, score, route, reward) about a node no node.add
// created is a broken log, not a node silently created by its update.
func TestApplyRejectsUpdateOfUnknownNode(t *testing.T) {
	spec := replaytest.SmallSpec("r")
	events := smallRunEvents(t, spec)
	var lost uint64 // the first node added: its node.add is dropped
	st := replay.NewState(spec.ID)
	for _, e := range events {
		if lost == 0 && e.Kind == model.EvNodeAdd {
			lost = e.Node
			continue
		}
		if lost == 0 || e.Node != lost {
			if err := st.Apply(e); err != nil {
				t.Fatalf("event %d (%s): %v", e.Seq, e.Kind, err)
			}
			continue
		}
		if _, isNode := e.Record.(*model.Node); !isNode {
			continue
		}
		if err := st.Apply(e); !errors.Is(err, replay.ErrLog) {
			t.Fatalf("event %d (%s) about node %d, never added: %v, want ErrLog", e.Seq, e.Kind, lost, err)
		}
		if _, ok := st.Nodes[lost]; ok {
			t.Errorf("the refused event created node %d", lost)
		}
		return
	}
	t.Fatal("no node event after the first node.add")
}
