package doccheck_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/memlock"
	"github.com/distlock/distlock/redislock"
	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/zklock"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// oneLine joins s's lines (and a comment's "//" prefixes) with spaces.
func oneLine(s string) string {
	s = regexp.MustCompile(`\n\s*(//)?\s*`).ReplaceAllString(s, " ")
	return s
}

// lists reports whether in, a nil driver, implements List: one that
// cannot answers ErrUnsupported without looking at its store; one that can
// reaches for its store and panics.
func lists(in backend.Inspector) (implements bool) {
	defer func() {
		if recover() != nil {
			implements = true
		}
	}()
	_, err := in.List(context.Background(), "", 1)
	return !errors.Is(err, backend.ErrUnsupported)
}

// TestDocsAgreeWithCode: the claims issue 27, item 8 found false.
func TestDocsAgreeWithCode(t *testing.T) {
	// multilock.go said 128 keys on etcd.
	if ml, want := oneLine(read(t, "multilock.go")), fmt.Sprintf("more than %d keys on etcd", etcdlock.MaxMultiKeys); !strings.Contains(ml, want) {
		t.Errorf("multilock.go does not say %q", want)
	}
	// docs/primitives.md listed `distlock elect` under "Not yet".
	if _, err := os.Stat(filepath.Join("..", "..", "cmd", "distlock", "elect.go")); err == nil {
		prim := read(t, "docs/primitives.md")
		if i := strings.Index(prim, "**Not yet**: Curator's `LeaderLatch`"); i < 0 {
			t.Errorf("docs/primitives.md: the election's Not yet paragraph is gone; update this test")
		} else if para, _, _ := strings.Cut(prim[i:], "\n\n"); strings.Contains(para, "distlock elect") || strings.Contains(para, "etcd's `Election`") {
			t.Errorf("docs/primitives.md lists `distlock elect` or etcd's Proclaim under Not yet: %s", para)
		}
	}
	// docs/architecture.md said only memlock implements Lister (now
	// Inspector.List).
	arch := oneLine(read(t, "docs/architecture.md"))
	_, lister, _ := strings.Cut(arch, "`List(ctx, prefix, limit)` — ")
	lister, _, _ = strings.Cut(lister, " ### ") // the last item of its list
	for name, d := range map[string]backend.Inspector{
		"mem": (*memlock.Driver)(nil), "Redis": (*redislock.Driver)(nil), "ZooKeeper": (*zklock.Driver)(nil),
		"etcd": (*etcdlock.Driver)(nil), "SQL": (*sqllock.Driver)(nil),
	} {
		implements := lists(d)
		says := strings.Contains(lister, name) && !strings.Contains(lister, name+" does not")
		if implements != says {
			t.Errorf("docs/architecture.md on List (%q): %s lists: %v", lister, name, implements)
		}
	}
	// The root package doc omitted PostgreSQL.
	first, _, _ := strings.Cut(read(t, "doc.go"), "\n//\n")
	for _, store := range []string{"Redis", "MySQL", "MariaDB", "PostgreSQL", "ZooKeeper", "etcd"} {
		if !strings.Contains(oneLine(first), store) {
			t.Errorf("doc.go's first paragraph does not name %s: %s", store, first)
		}
	}
}
