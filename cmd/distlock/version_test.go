package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	out, code := runCLI(t, nil, "version")
	if code != 0 || !strings.HasPrefix(out, "distlock ") || !strings.Contains(out, "(commit ") || strings.Count(out, "\n") != 1 {
		t.Errorf("distlock version: exit %d, %q", code, out)
	}
	if flag, code := runCLI(t, nil, "--version"); code != 0 || flag != out {
		t.Errorf("distlock --version: exit %d, %q; want exit 0 and %q", code, flag, out)
	}
}

func TestVersionFromBuildInfo(t *testing.T) {
	if got := vcsCommit(nil); got != "unknown" {
		t.Errorf("commit without VCS information: %q, want unknown", got)
	}
	settings := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "true"}}
	if got := vcsCommit(settings); got != "0123abcd, modified" {
		t.Errorf("commit of a modified tree: %q", got)
	}
	for _, tc := range []struct {
		deps []*debug.Module
		want string
	}{
		{nil, "(devel)"},
		{[]*debug.Module{{Path: libraryPath, Version: "v1.2.0"}}, "v1.2.0"},
		{[]*debug.Module{{Path: libraryPath, Version: "v0.0.0", Replace: &debug.Module{Path: "../.."}}}, "(devel)"},
		{[]*debug.Module{{Path: libraryPath, Version: "v1.2.0", Replace: &debug.Module{Path: "example.com/fork", Version: "v1.2.1"}}}, "v1.2.1"},
	} {
		if got := libraryVersion(tc.deps); got != tc.want {
			t.Errorf("libraryVersion(%+v) = %q, want %q", tc.deps, got, tc.want)
		}
	}
}
