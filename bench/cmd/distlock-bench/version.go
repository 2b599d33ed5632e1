package main

import (
	"cmp"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/distlock/distlock/bench/internal/peers"
)

// libraryPath is the library's module path.
const libraryPath = "github.com/distlock/distlock"

// versionLine describes the binary from what the go command recorded in
// it: the bench module's version and the library's ("(devel)" when built
// from a checkout), and the Go release.
func versionLine() string {
	version, lib := "(devel)", cmp.Or(peers.ModuleVersion(libraryPath), "(devel)")
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
	}
	return fmt.Sprintf("distlock-bench %s (library %s; %s)", version, lib, runtime.Version())
}
