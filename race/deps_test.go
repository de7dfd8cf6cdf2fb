package race

import (
	"os/exec"
	"strings"
	"testing"
)

// ours lists, per package, the only racetest packages it may import: a
// team's test binary that imports race must not pull in every database
// driver (or cobra, or mpb) with the rest of racetest.
var ours = map[string][]string{
	// internal/printable (report quotes its Reproduce lines with it) and
	// internal/sqldialect (sqlsnap's families) are the standard library's
	// only: they drag nothing in.
	".":          {"runner", "report", "explore", "internal/sqlsnap", "internal/sqldialect", "internal/printable"},
	"./lastbyte": {"runner", "release"},
}

func TestImportsNoDriver(t *testing.T) {
	const module = "github.com/racetest/racetest"
	for pkg, allowed := range ours {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		ok := map[string]bool{}
		for _, a := range allowed {
			ok[module+"/"+a] = true
		}
		self := module + "/race" + strings.TrimPrefix(pkg, ".")
		for _, dep := range strings.Fields(string(out)) {
			first, _, _ := strings.Cut(dep, "/")
			switch {
			case dep == self || ok[dep]:
			case strings.HasPrefix(dep, module):
				t.Errorf("%s imports %s; it may import only %v of racetest", self, dep, allowed)
			case strings.Contains(first, ".") && !strings.HasPrefix(dep, "vendor/"):
				// A module outside the standard library: a driver, a CLI
				// library, anything a user's test binary would drag in.
				t.Errorf("%s depends on %s; it must need nothing outside the standard library and %v", self, dep, allowed)
			}
		}
	}
}
