package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// libraryPath is the library's module path, a dependency of the command's.
const libraryPath = "github.com/distlock/distlock"

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the command's version and VCS commit (same as --version)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), versionLine())
			return err
		},
	}
}

// versionLine describes the binary from what the go command recorded in
// it: the command module's version ("(devel)" when built from a checkout
// or unknown), the VCS commit and whether the tree had local changes, the
// library's version, and the Go release, e.g.
//
//	distlock v1.2.0 (commit unknown; library v1.2.0; go1.26.0)
//	distlock (devel) (commit 0123abcd..., modified; library (devel); go1.26.0)
func versionLine() string {
	version, commit, lib := "(devel)", "unknown", "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		commit, lib = vcsCommit(bi.Settings), libraryVersion(bi.Deps)
	}
	return fmt.Sprintf("distlock %s (commit %s; library %s; %s)", version, commit, lib, runtime.Version())
}

// vcsCommit is the commit the binary was built from, with ", modified"
// when the tree had local changes; "unknown" when not recorded (a build
// outside a checkout, or with -buildvcs=false).
func vcsCommit(settings []debug.BuildSetting) string {
	commit, modified := "unknown", false
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified {
		commit += ", modified"
	}
	return commit
}

// libraryVersion is the library's version among deps: "(devel)" when a
// replace points at a directory (the repository's own go.mod does).
func libraryVersion(deps []*debug.Module) string {
	for _, m := range deps {
		switch {
		case m.Path != libraryPath:
		case m.Replace == nil:
			return m.Version
		case m.Replace.Version != "":
			return m.Replace.Version
		default:
			return "(devel)"
		}
	}
	return "(devel)"
}
