package race_test

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var updateAPI = flag.Bool("update-api", false, "rewrite testdata/api.txt from the code")

// The public API of race and race/lastbyte is what a team's tests call:
// every exported name is listed in testdata/api.txt, so that a name is
// added or removed on purpose, in the same commit as the list
// (go test ./race -run TestPublicAPI -update-api rewrites it).
func TestPublicAPI(t *testing.T) {
	var got []string
	for _, dir := range []string{".", "lastbyte"} {
		got = append(got, exported(t, dir)...)
	}
	sort.Strings(got)
	text := strings.Join(got, "\n") + "\n"
	path := filepath.Join("testdata", "api.txt")
	if *updateAPI {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != text {
		wantSet := map[string]bool{}
		for _, l := range strings.Split(strings.TrimSpace(string(want)), "\n") {
			wantSet[l] = true
		}
		for _, l := range got {
			if !wantSet[l] {
				t.Errorf("exported but not in %s: %s", path, l)
			}
			delete(wantSet, l)
		}
		for l := range wantSet {
			t.Errorf("in %s but not exported: %s", path, l)
		}
		t.Log("a change of the public API is deliberate: update the list with go test ./race -run TestPublicAPI -update-api")
	}
}

// exported lists dir's exported declarations: "pkg.Name kind", methods
// as "pkg.Type.Method method", exported fields as "pkg.Type.Field field".
func exported(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		pkg := af.Name.Name
		for _, d := range af.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					out = append(out, pkg+"."+d.Name.Name+" func")
					continue
				}
				recv := d.Recv.List[0].Type
				if s, ok := recv.(*ast.StarExpr); ok {
					recv = s.X
				}
				if id, ok := recv.(*ast.Ident); ok && id.IsExported() {
					out = append(out, pkg+"."+id.Name+"."+d.Name.Name+" method")
				}
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					switch sp := sp.(type) {
					case *ast.TypeSpec:
						if !sp.Name.IsExported() {
							continue
						}
						out = append(out, pkg+"."+sp.Name.Name+" type")
						if st, ok := sp.Type.(*ast.StructType); ok {
							for _, fl := range st.Fields.List {
								for _, n := range fl.Names {
									if n.IsExported() {
										out = append(out, pkg+"."+sp.Name.Name+"."+n.Name+" field")
									}
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range sp.Names {
							if n.IsExported() {
								out = append(out, pkg+"."+n.Name+" "+d.Tok.String())
							}
						}
					}
				}
			}
		}
	}
	return out
}
