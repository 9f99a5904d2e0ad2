package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The benchmarks and the mutation tool are modules of their own, so a
// program that imports patrdb's packages never links what only they
// need: SQLite (the bench's contender) and golang.org/x/tools (the
// mutation tool's coverage parser). The root module is listed on its own
// (GOWORK=off), as a user's build sees it.
func TestTheLibraryLinksNoneOfTheBenchsDependencies(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "./...")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./... in the root module: %v", err)
	}
	var pkgs int
	for _, dep := range strings.Fields(string(out)) {
		pkgs++
		for _, f := range []string{"modernc.org/", "golang.org/x/tools/", "github.com/patrdb/patrdb/bench", "github.com/patrdb/patrdb/tools/"} {
			if strings.HasPrefix(dep, f) {
				t.Errorf("the library depends on %s", dep)
			}
		}
	}
	if pkgs < 100 {
		t.Fatalf("go list -deps ./... listed %d packages: not the root module", pkgs)
	}
}
