package cmd

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The map (docs/layout.md) is checked against the code where a test can
// tell: every package has a line, every path the backend recipe names
// exists, and every file that names a backend or a SQL family is in the
// recipe, so a new place that switches on one cannot go unlisted.

// repoGoFiles walks the module (not tools/, its own module, nor testdata)
// and returns its .go files, slash-separated and relative to the root.
func repoGoFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, ".."+string(filepath.Separator)))
		if d.IsDir() {
			if p != ".." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || rel == "tools" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(rel, ".go") {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// mapped returns the directories docs/layout.md's tree names: a token
// ending in / at the start of a line names itself, and one on an indented
// line names itself under the last unindented line's first directory.
func mapped(text string) map[string]bool {
	names := map[string]bool{}
	top := ""
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
			continue
		}
		if !inFence {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		indented := line[0] == ' '
		if !indented && strings.HasSuffix(fields[0], "/") {
			top = fields[0]
		}
		for _, f := range fields {
			if !strings.HasSuffix(f, "/") || strings.ContainsAny(f, "(),:`'") {
				continue
			}
			names[f] = true
			if indented {
				names[top+f] = true
			}
		}
	}
	return names
}

func TestLayoutNamesEveryPackage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "layout.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := mapped(string(b))
	seen := map[string]bool{}
	for _, f := range repoGoFiles(t) {
		dir := path.Dir(f)
		if dir == "." || seen[dir] {
			continue
		}
		seen[dir] = true
		if !names[dir+"/"] {
			t.Errorf("package %s/ has no line in docs/layout.md's map", dir)
		}
	}
	if len(seen) < 30 {
		t.Fatalf("found %d package directories: the walk is broken", len(seen))
	}
}

// recipe returns the paths that docs/layout.md's "A new backend" section
// names in inline code, <name> read as any name.
func recipe(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "layout.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "\n## A new backend\n")
	if start < 0 {
		t.Fatal(`docs/layout.md has no "## A new backend" section`)
	}
	section := text[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	var paths []string
	for _, m := range regexp.MustCompile("`([A-Za-z0-9_.<>/-]+)`").FindAllStringSubmatch(section, -1) {
		if p := m[1]; strings.Contains(p, "/") && !strings.HasPrefix(p, "-") {
			paths = append(paths, strings.ReplaceAll(p, "<name>", "*"))
		}
	}
	return paths
}

func TestBackendRecipePathsExist(t *testing.T) {
	paths := recipe(t)
	if len(paths) < 20 {
		t.Fatalf("the recipe names %d paths: the reading is broken (%q)", len(paths), paths)
	}
	for _, p := range paths {
		m, err := filepath.Glob(filepath.Join("..", filepath.FromSlash(strings.TrimSuffix(p, "/"))))
		if err != nil || len(m) == 0 {
			t.Errorf("docs/layout.md's backend recipe names %s, which does not exist", p)
		}
	}
}

// backendNaming is a line of code that names a backend or a SQL family:
// a backend's name as a string, a family's constant, or a Pick.
var backendNaming = regexp.MustCompile(`"(mysql|mariadb|postgres|postgresql|pg|redis|mongo|mongodb)"|\b(sqldb|runs|sqldialect|sqlsnap|explore)\.(Postgres|MySQL)\b|sqldialect\.Pick\(|\b(case|==|!=)\s*(Postgres|MySQL)\b`)

// covered reports whether the recipe's paths name file: the file itself,
// or a directory it is in (either possibly with <name>).
func covered(file string, paths []string) bool {
	for _, p := range paths {
		if ok, _ := path.Match(p, file); ok {
			return true
		}
		if !strings.HasSuffix(p, "/") {
			continue
		}
		for dir := path.Dir(file); dir != "."; dir = path.Dir(dir) {
			if ok, _ := path.Match(strings.TrimSuffix(p, "/"), dir); ok {
				return true
			}
		}
	}
	return false
}

func TestBackendRecipeNamesEveryPlace(t *testing.T) {
	paths := recipe(t)
	var places []string
	for _, f := range repoGoFiles(t) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(strings.TrimSpace(line), "//") && backendNaming.MatchString(line) {
				places = append(places, f)
				break
			}
		}
	}
	if len(places) < 20 {
		t.Fatalf("found %d files that name a backend: the scan is broken", len(places))
	}
	for _, f := range places {
		if !covered(f, paths) {
			t.Errorf("%s names a backend or SQL family but docs/layout.md's \"A new backend\" recipe does not name it (or its directory)", f)
		}
	}
	if !slices.Contains(places, "scenarios/expect.go") {
		t.Error("scenarios/expect.go's rows name backends, yet the scan missed it")
	}
}
