package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// A program that imports client builds none of the server side — not the
// server (and its embedded viewer), not the tree or rubric libraries, not
// replay — and none of the storage engine: the bodies carry package
// model's records, which import only the standard library, so a worker
// links neither the store nor bbolt, msgpack or the node cache.
func TestClientBuildsWithoutTheServerOrTheStore(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := []string{
		"github.com/patrdb/patrdb/server", "github.com/patrdb/patrdb/tree",
		"github.com/patrdb/patrdb/rubricpool", "github.com/patrdb/patrdb/replay",
		"github.com/patrdb/patrdb/grpo", "github.com/patrdb/patrdb/store",
		"github.com/patrdb/patrdb/batch/batchdb",
		"go.etcd.io/bbolt", "github.com/vmihailenco/msgpack", "github.com/hashicorp/golang-lru",
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("package client depends on %s", dep)
			}
		}
	}
}
