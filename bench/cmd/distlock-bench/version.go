package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// versionLine describes the binary from what the go command recorded in
// it: the bench module's version and the library's ("(devel)" when built
// from a checkout), and the Go release.
func versionLine() string {
	version, lib := "(devel)", "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		lib = moduleVersion(bi.Deps, "github.com/distlock/distlock")
	}
	return fmt.Sprintf("distlock-bench %s (library %s; %s)", version, lib, runtime.Version())
}

// moduleVersion is path's version among deps: "(devel)" when a replace
// points at a directory (the repository's own go.mod does), "" when path
// is not among them.
func moduleVersion(deps []*debug.Module, path string) string {
	for _, m := range deps {
		switch {
		case m.Path != path:
		case m.Replace == nil:
			return m.Version
		case m.Replace.Version != "":
			return m.Replace.Version
		default:
			return "(devel)"
		}
	}
	return ""
}
