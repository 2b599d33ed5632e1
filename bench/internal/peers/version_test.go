package peers

import (
	"runtime/debug"
	"testing"
)

// Every peer names its Go module and says what connections a lease
// holds; so does distlock on every store. (A test binary records no
// dependency versions: distlock-bench's TestBenchWritesReport checks the
// versions a real build reports.)
func TestPeersNameModuleAndConns(t *testing.T) {
	for _, raw := range []string{"redis://127.0.0.1:1/0", "redis://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/0?mode=redlock",
		"mysql://u:p@127.0.0.1:1/db", "postgres://u:p@127.0.0.1:1/db", "etcd://127.0.0.1:1/x", "zk://127.0.0.1:1/x"} {
		st, err := For(raw)
		if err != nil {
			t.Fatalf("For(%q): %v", raw, err)
		}
		if st.Conns == "" {
			t.Errorf("%s: no connections per lease for distlock", raw)
		}
		for _, p := range st.Peers {
			if p.Module == "" || p.Conns == "" {
				t.Errorf("%s: peer %q has module %q, conns %q", raw, p.Name, p.Module, p.Conns)
			}
		}
	}
}

func TestVersionIn(t *testing.T) {
	deps := []*debug.Module{
		{Path: "a", Version: "v1.2.3"},
		{Path: "b", Version: "v0.0.0", Replace: &debug.Module{Path: "../b"}},
		{Path: "c", Version: "v1.0.0", Replace: &debug.Module{Path: "fork/c", Version: "v1.0.1"}},
	}
	for path, want := range map[string]string{"a": "v1.2.3", "b": "(devel)", "c": "v1.0.1", "d": ""} {
		if got := versionIn(deps, path); got != want {
			t.Errorf("versionIn(%q) = %q, want %q", path, got, want)
		}
	}
}
