package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// A program that imports client builds none of the server side: not the
// server (and its embedded viewer), not the tree or rubric libraries, not
// replay. Package store does come in (and bbolt with it): the bodies carry
// its record types (store.Node, store.Turn, ...), which it defines beside
// their codecs.
func TestClientBuildsWithoutTheServer(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := map[string]bool{}
	for _, p := range []string{"server", "tree", "rubricpool", "replay", "grpo"} {
		forbidden["github.com/patrdb/patrdb/"+p] = true
	}
	for _, dep := range strings.Fields(string(out)) {
		if forbidden[dep] {
			t.Errorf("package client depends on %s", dep)
		}
	}
}
