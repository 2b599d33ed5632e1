package doccheck_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Limits on the library files (issue 29).
const (
	maxFileLines = 400
	maxFuncLines = 80
)

// TestRootFileMap: docs/architecture.md's file map ("What lives where")
// names every library file of the root package once, and no other; and
// no such file is over maxFileLines lines nor any function over
// maxFuncLines.
func TestRootFileMap(t *testing.T) {
	arch := read(t, "docs/architecture.md")
	_, section, ok := strings.Cut(arch, "\n## What lives where\n")
	if !ok {
		t.Fatal("docs/architecture.md has no section \"What lives where\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+\\.go)` \\|")
	var mapped []string
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		if slices.Contains(mapped, m[1]) {
			t.Errorf("the file map names %s twice", m[1])
		}
		mapped = append(mapped, m[1])
	}
	root := filepath.Join("..", "..")
	names, err := filepath.Glob(filepath.Join(root, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	fset := token.NewFileSet()
	for _, n := range names {
		base := filepath.Base(n)
		if strings.HasSuffix(base, "_test.go") {
			continue
		}
		files = append(files, base)
		if !slices.Contains(mapped, base) {
			t.Errorf("docs/architecture.md's file map does not name %s", base)
		}
		src, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		if lines := strings.Count(string(src), "\n"); lines > maxFileLines {
			t.Errorf("%s is %d lines long, over %d: split it by idea", base, lines, maxFileLines)
		}
		f, err := parser.ParseFile(fset, n, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				if lines := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; lines > maxFuncLines {
					t.Errorf("%s: %s is %d lines long, over %d", base, fd.Name.Name, lines, maxFuncLines)
				}
			}
		}
	}
	for _, m := range mapped {
		if !slices.Contains(files, m) {
			t.Errorf("docs/architecture.md's file map names %s, which is not a library file of the root package", m)
		}
	}
	if len(files) < 10 {
		t.Fatalf("found %d library files in the root package: wrong directory?", len(files))
	}
}

// TestLibrarySizes: no library file of the root module (every package
// but the other modules below it: the command, bench, faults, the
// container broker) is over maxFileLines lines, and no function in one
// is over maxFuncLines (issue 29's bar, kept).
func TestLibrarySizes(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if p == root {
				return nil
			}
			name := e.Name()
			if strings.HasPrefix(name, ".") || name == "testdata" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		checked++
		if lines := strings.Count(string(src), "\n"); lines > maxFileLines {
			t.Errorf("%s is %d lines long, over %d: split it by idea", rel, lines, maxFileLines)
		}
		f, err := parser.ParseFile(fset, p, src, 0)
		if err != nil {
			return err
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				if lines := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; lines > maxFuncLines {
					t.Errorf("%s: %s is %d lines long, over %d", rel, fd.Name.Name, lines, maxFuncLines)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked %d library files: wrong directory?", checked)
	}
}
