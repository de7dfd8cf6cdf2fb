package suite_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/racetest/racetest/suite"
)

// FuzzParse feeds arbitrary bytes through Parse and Plans: no input may
// panic, and every rejection must be an Errors list whose entries name the
// file and a position inside it.
// Run it for real with
//
//	go test -run '^$' -fuzz '^FuzzParse$' -fuzzminimizetime 50x ./suite
//
// The Go fuzzer minimizes each new input for up to 60 s by default and
// counts none of those runs: on suite files (KBs of YAML) that took whole
// minutes, 27 executions in two (issue 27); capped, 200-800 a second at
// load 20-27 on 2 shared cores.
func FuzzParse(f *testing.F) {
	examples, _ := filepath.Glob(filepath.Join("..", "testdata", "suites", "*.yaml"))
	for _, name := range examples {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		"cases:\n  - scenario: check-then-write\n    atempts: 3\n",
		"defaults: &d {attempts: 4}\ncases:\n  - <<: *d\n    scenario: unique-insert\n",
		"cases: [{scenario: memory-set, replicas: 3, max_effects: 3}]\n",
		"cases:\n  - http: {url: 'http://h/{{.Burst}}', success: {status: [2xx]}, effects: 'redis:GET {{.Key}}'}\n",
		"cases:\n  - {scenario: conditional-update, backend: mongo, on_server: [{match: F, expect: race, why: w}]}\n",
		"defaults:\n  connections: {mysql: '${DSN:-default}'}\ncases:\n  - {scenario: ttl-lease, prove: 0.5%}\n",
		"cases: [\n",
		"a: b: c\n",
		"--- \n...\n---\n",
		"cases:\n  - name: \"\\x00\"\n",
	} {
		f.Add([]byte(s))
	}
	// Issue 11's hostile files: the alias bomb, deep nesting, and what
	// /dev/zero gives (its first 64 KiB; a whole 4 MiB seed would slow
	// every mutation, and TestReadStopsAtTheCap covers the cap).
	f.Add([]byte(billionLaughs()))
	f.Add([]byte(strings.Repeat("[", 100_000)))
	f.Add([]byte(strings.Repeat("- ", 1_000)))
	f.Add(make([]byte, 64<<10))
	reg := registry()
	dir := f.TempDir()
	vars := env(map[string]string{"DSN": "root@tcp(127.0.0.1:3306)/test", "EMPTY": ""})
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := strings.Count(strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(string(data)), "\n") + 1
		check := func(err error) {
			var es suite.Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("error is not a suite.Errors list: %T %v", err, err)
			}
			for _, e := range es {
				if e.File != "fuzz.yaml" || e.Line < 0 || e.Line > lines || e.Column < 0 || e.Msg == "" {
					t.Fatalf("error without a sound position: %+v (input has %d lines)", e, lines)
				}
				_ = e.Excerpt()
			}
			_ = err.Error()
		}
		s, err := suite.Parse("fuzz.yaml", data, vars, registry())
		if err != nil {
			check(err)
			return
		}
		ps, err := s.Plans(reg, suite.Options{Dir: dir})
		if err != nil {
			check(err)
			return
		}
		// A demo: true case runs each variant its scenario demonstrates
		// (memory-set: 1 and 3 replicas); any other case is one plan.
		want := 0
		for _, k := range s.File.Cases {
			want++
			if spec, err := reg.Scenario(k.Scenario); err == nil && k.Demo && len(spec.Demo) > 1 {
				want += len(spec.Demo) - 1
			}
		}
		if len(ps) != want {
			t.Fatalf("%d cases gave %d plans, want %d", len(s.File.Cases), len(ps), want)
		}
		for _, p := range ps {
			if p.Config.Validate() != nil || p.Config.Attempts < 2 || p.Case.Name == "" {
				t.Fatalf("a plan that cannot run passed the checks: %+v", p)
			}
		}
	})
}

func TestExampleSuitesAreValid(t *testing.T) {
	names, err := filepath.Glob(filepath.Join("..", "testdata", "suites", "*.yaml"))
	if err != nil || len(names) < 3 {
		t.Fatalf("example suites: %v %v", names, err)
	}
	for _, name := range names {
		t.Run(filepath.Base(name), func(t *testing.T) {
			switch filepath.Base(name) {
			case "catalog.yaml":
				t.Skip("the catalog gate names every built-in scenario: cmd's TestCatalogSuiteCoversTheCatalog checks it against the full catalog")
			case "clusters.yaml":
				t.Skip("the cluster gate names the clustered incidents: cmd's TestExampleSuitesList lists it with the full catalog")
			}
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			s, err := suite.Parse(name, b, env(nil), registry())
			if err != nil {
				t.Fatal(err)
			}
			ps, err := s.Plans(reg(), suite.Options{Dir: filepath.Dir(name)})
			if err != nil {
				t.Fatal(err)
			}
			if len(ps) == 0 {
				t.Fatal("no plans")
			}
		})
	}
}

var reg = registry
