package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/patrdb/patrdb/server"
	"github.com/patrdb/patrdb/store"
)

// versionOutput is `version --json`: the build, and the on-disk format and
// API version it speaks.
type versionOutput struct {
	Version  string `json:"version"`  // the module version: "v1.2.0", or "(devel)" for a build in a clone
	Commit   string `json:"commit"`   // the VCS commit, "" when not recorded
	Modified bool   `json:"modified"` // built from a work tree with changes
	Go       string `json:"go"`       // the Go toolchain
	Format   uint64 `json:"format"`   // the on-disk format it writes
	API      string `json:"api"`      // the HTTP API version patrdb serve speaks
}

// buildInfo is the module version and the VCS commit the binary was built
// from, as the Go toolchain recorded them: "v1.2.0" for go install …@v1.2.0,
// "(devel)" with the commit for a build in a clone.
func buildInfo() (versionOutput, bool) {
	out := versionOutput{Format: store.FormatVersion, API: server.APISpecVersion()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return out, false
	}
	out.Version, out.Go = bi.Main.Version, bi.GoVersion
	if out.Version == "" {
		out.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			out.Commit = s.Value
		case "vcs.modified":
			out.Modified = s.Value == "true"
		}
	}
	return out, true
}

func versionText() string {
	v, ok := buildInfo()
	if !ok {
		return "patrdb (no build information)"
	}
	out := "patrdb " + v.Version
	if rev := v.Commit; rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		modified := ""
		if v.Modified {
			modified = ", modified"
		}
		out += fmt.Sprintf(" (commit %s%s)", rev, modified)
	}
	return out + " " + v.Go
}

func newVersionCommand(app *App) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "The module version and commit this binary was built from",
		Long: `version names the build: the module version ("(devel)" for a build in a
clone), the commit and the Go toolchain; --json adds the on-disk format it
writes and the HTTP API version patrdb serve speaks.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if app.json {
				v, _ := buildInfo()
				return app.printJSON(v)
			}
			_, err := fmt.Fprintln(app.stdout, versionText())
			return err
		},
	}
}
