package doccheck_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// maxUpCalls bounds the calls that go up docs/architecture.md's file map
// in a walk from one entry point (see callsUp).
const maxUpCalls = 3

// TestRootCallsGoDown: a reader who follows a call from one of the root
// package's entry points goes down the file map of docs/architecture.md
// ("What lives where"), not back up: of the calls reached from each entry
// point, at most maxUpCalls go to a file listed above the caller's.
func TestRootCallsGoDown(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH")
	}
	section := oneLine(read(t, "docs/architecture.md"))
	_, section, _ = strings.Cut(section, "## What lives where")
	section, _, _ = strings.Cut(section, " ## ")
	rank := map[string]int{}
	for i, m := range regexp.MustCompile("\\| `([a-z_]+\\.go)` \\|").FindAllStringSubmatch(section, -1) {
		rank[m[1]] = i
	}
	g := loadRoot(t, goTool)
	for _, entry := range []string{"Locker.Acquire", "Locker.TryAcquire", "Lease.Release", "Lease.Refresh", "Locker.Close",
		"Locker.AcquireAll", "Election.Campaign", "Semaphore.AcquireN", "RWMutex.Lock", "Locker.watch"} {
		up, reached := g.callsUp(t, entry, rank)
		if reached < 10 {
			t.Errorf("from %s: reached %d functions; the walk is broken", entry, reached)
		}
		if len(up) > maxUpCalls {
			t.Errorf("from %s: %d calls go up the file map (at most %d):\n%s", entry, len(up), maxUpCalls, strings.Join(up, "\n"))
		}
	}
}

// rootGraph is the root package's library files, type-checked.
type rootGraph struct {
	fset  *token.FileSet
	info  *types.Info
	decls map[types.Object]*ast.FuncDecl
	names map[string]types.Object // "Recv.Name" or "Name"
}

func loadRoot(t *testing.T, goTool string) *rootGraph {
	t.Helper()
	root := filepath.Join("..", "..")
	cmd := exec.Command(goTool, "list", "-export", "-deps", "-json", ".")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	exports := map[string]string{}
	var path string
	for dec := json.NewDecoder(strings.NewReader(string(out))); ; {
		var p struct{ ImportPath, Export, Dir string }
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath], path = p.Export, p.ImportPath // the root package comes last
	}
	g := &rootGraph{fset: token.NewFileSet(), decls: map[types.Object]*ast.FuncDecl{}, names: map[string]types.Object{},
		info: &types.Info{Uses: map[*ast.Ident]types.Object{}, Defs: map[*ast.Ident]types.Object{}}}
	names, err := filepath.Glob(filepath.Join(root, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(g.fset, n, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	imp := importer.ForCompiler(g.fset, "gc", func(p string) (io.ReadCloser, error) {
		if exports[p] == "" {
			return nil, fmt.Errorf("no export data for %s", p)
		}
		return os.Open(exports[p])
	})
	if _, err := (&types.Config{Importer: imp}).Check(path, g.fset, files, g.info); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				name := fd.Name.Name
				if fd.Recv != nil {
					rt := fd.Recv.List[0].Type
					if s, ok := rt.(*ast.StarExpr); ok {
						rt = s.X
					}
					name = rt.(*ast.Ident).Name + "." + name
				}
				o := g.info.Defs[fd.Name]
				g.decls[o], g.names[name] = fd, o
			}
		}
	}
	return g
}

// callsUp walks the functions entry reaches, depth-first in source order,
// each once, and returns the calls (and function values) that reach a
// function not yet seen in a file ranked above its caller's, and how many
// functions it reached.
func (g *rootGraph) callsUp(t *testing.T, entry string, rank map[string]int) (up []string, reached int) {
	t.Helper()
	start, ok := g.names[entry]
	if !ok {
		t.Fatalf("no function %s in the root package", entry)
	}
	file := func(o types.Object) string {
		f := filepath.Base(g.fset.Position(o.Pos()).Filename)
		if _, ok := rank[f]; !ok {
			t.Fatalf("docs/architecture.md's file map does not name %s", f)
		}
		return f
	}
	seen := map[types.Object]bool{}
	var walk func(o types.Object)
	walk = func(o types.Object) {
		seen[o] = true
		ast.Inspect(g.decls[o].Body, func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if !ok {
				return true
			}
			c := g.info.Uses[id]
			if _, isFunc := g.decls[c]; !isFunc || seen[c] {
				return true
			}
			if from, to := file(o), file(c); rank[to] < rank[from] {
				up = append(up, fmt.Sprintf("\t%s (%s) -> %s (%s)", o.Name(), from, c.Name(), to))
			}
			walk(c)
			return true
		})
	}
	walk(start)
	return up, len(seen)
}
