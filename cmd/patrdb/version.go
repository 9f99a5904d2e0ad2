package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// versionText is the module version and the VCS commit the binary was
// built from, as the Go toolchain recorded them: "v1.2.0" for
// go install …@v1.2.0, "(devel)" with the commit for a build in a clone.
func versionText() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "patrdb (no build information)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	out := "patrdb " + v
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		out += fmt.Sprintf(" (commit %s%s)", rev, modified)
	}
	return out + " " + bi.GoVersion
}

func newVersionCommand(app *App) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "The module version and commit this binary was built from",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(app.stdout, versionText())
			return err
		},
	}
}
