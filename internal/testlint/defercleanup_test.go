package testlint

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// A deferred Close runs when the test function returns, before any
// t.Cleanup. A test that defers closing its connection and registers a
// cleanup that drops a table through it leaves the table behind: the drop
// runs on a closed connection and its error is lost. That shape left 14
// tables in MariaDB's test database on one machine. Close in a t.Cleanup
// registered before the drop instead (cleanups run last-in, first-out).
func TestNoDeferredCloseBeforeCleanup(t *testing.T) {
	root := filepath.Join("..", "..")
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		found = append(found, deferredCloseBeforeCleanup(t, path)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Error(f)
	}
}

// deferredCloseBeforeCleanup lists, in one file, the deferred Closes whose
// resource a t.Cleanup of the same function still uses: directly
// (defer st.Close(); t.Cleanup(func() { st.DB().Exec(…) })) or through a
// value taken from it (db := st.DB()).
func deferredCloseBeforeCleanup(t *testing.T, path string) []string {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	var found []string
	for _, decl := range file.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		closed := map[string]token.Pos{} // name → its deferred Close
		var cleanups []*ast.FuncLit
		derived := map[string][]string{} // name → names its value was taken from
		// Only the function's own defers: one inside a closure runs when
		// the closure returns.
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncLit:
				return false
			case *ast.DeferStmt:
				if name, ok := closeRoot(n.Call); ok {
					closed[name] = n.Pos()
				}
			}
			return true
		})
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				for _, lhs := range n.Lhs {
					if id, ok := lhs.(*ast.Ident); ok {
						for _, rhs := range n.Rhs {
							derived[id.Name] = append(derived[id.Name], idents(rhs)...)
						}
					}
				}
			case *ast.CallExpr:
				if isTestCleanup(n) && len(n.Args) == 1 {
					if lit, ok := n.Args[0].(*ast.FuncLit); ok {
						cleanups = append(cleanups, lit)
					}
				}
			}
			return true
		})
		// uses reports whether name is, or was taken from, a closed value.
		var uses func(name string, seen map[string]bool) (string, bool)
		uses = func(name string, seen map[string]bool) (string, bool) {
			if _, ok := closed[name]; ok {
				return name, true
			}
			if seen[name] {
				return "", false
			}
			seen[name] = true
			for _, from := range derived[name] {
				if root, ok := uses(from, seen); ok {
					return root, true
				}
			}
			return "", false
		}
		reported := map[string]bool{}
		for _, lit := range cleanups {
			for _, name := range idents(lit.Body) {
				root, ok := uses(name, map[string]bool{})
				if !ok || reported[root] {
					continue
				}
				reported[root] = true
				found = append(found, fmt.Sprintf("%s: %s defers %s.Close(), but a t.Cleanup uses %s afterwards: deferred calls run before cleanups, so the cleanup works on a closed connection and what it drops stays; close in a t.Cleanup registered before the others instead",
					fset.Position(closed[root]), fn.Name.Name, root, name))
			}
		}
	}
	return found
}

// closeRoot returns X for a call X.Close() or X.Y.Close().
func closeRoot(call *ast.CallExpr) (string, bool) {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Close" {
		return "", false
	}
	ids := idents(sel.X)
	if len(ids) == 0 {
		return "", false
	}
	return ids[0], true
}

// isTestCleanup matches t.Cleanup, b.Cleanup, tb.Cleanup, f.Cleanup.
func isTestCleanup(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Cleanup" {
		return false
	}
	recv, ok := sel.X.(*ast.Ident)
	return ok && (recv.Name == "t" || recv.Name == "b" || recv.Name == "tb" || recv.Name == "f")
}

// idents lists the identifiers n mentions, in order.
func idents(n ast.Node) []string {
	var names []string
	ast.Inspect(n, func(m ast.Node) bool {
		if id, ok := m.(*ast.Ident); ok {
			names = append(names, id.Name)
		}
		return true
	})
	return names
}

// The check must fail on the shape that leaked and stay quiet on the
// shapes that are right.
func TestCheckSeesTheLeak(t *testing.T) {
	found := deferredCloseBeforeCleanup(t, filepath.Join("testdata", "leak.go.txt"))
	if len(found) != 1 || !strings.Contains(found[0], "TestLeaks defers st.Close()") {
		t.Fatalf("found %q, want exactly TestLeaks", found)
	}
}
