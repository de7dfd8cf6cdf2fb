package suite_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/suite"
)

// The plan-building behaviours below were found unpinned by mutation
// testing (scripts/mutation.sh): each test is a suite a user could write
// and what Plans must make of it.

// A file with many broken cases lists its first 20 problems, in file
// order, and stops there: past that the rest are usually echoes.
func TestPlanListsTheFirstTwentyProblems(t *testing.T) {
	var src strings.Builder
	src.WriteString("cases:\n")
	for range 30 {
		src.WriteString("  - scenario: nope\n")
	}
	_, err := plans(t, src.String(), suite.Options{})
	var es suite.Errors
	if !errors.As(err, &es) {
		t.Fatalf("want suite.Errors, got %v", err)
	}
	if len(es) != 20 {
		t.Fatalf("%d problems listed, want the first 20 of 30", len(es))
	}
	for i, e := range es {
		if e.Line != i+2 {
			t.Fatalf("problem %d is at line %d, want %d (file order)", i, e.Line, i+2)
		}
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("%d problems in s.yaml", 20)) {
		t.Errorf("the message does not count the problems: %q", err.Error())
	}
}

// demoRegistry has one scenario whose catalog demonstrates three rows: a
// variant, a deploy between two waves, and a gap of its own.
func demoRegistry() *scenarios.Registry {
	r := scenarios.NewRegistry()
	r.AddBackend(scenarios.Backend{Name: "memory"})
	r.AddScenario(scenarios.Spec{Name: "rows", Lesson: "rows", Demo: []scenarios.DemoCase{
		{Label: "variant", Variant: "v1"},
		{Label: "deploy", Waves: 2, Deploy: true},
		{Label: "gap", Gap: 3 * time.Millisecond},
	}})
	r.Register("rows", "memory", func(context.Context, scenarios.Params) (runner.Target, error) {
		return nil, errors.New("stand-in")
	})
	return r
}

// demo: true runs each of the catalog's rows as the catalog shows it (its
// variant, its waves and deploy, its gap), except that a gap the user
// wrote, in the case or in the defaults, wins over the row's.
func TestDemoRowsKeepTheirShape(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want []string
	}{
		{"cases:\n  - {scenario: rows, demo: true}\n",
			[]string{"rows (variant) variant=v1 waves=1 deploy=false gap=0s", "rows (deploy) variant= waves=2 deploy=true gap=0s", "rows (gap) variant= waves=1 deploy=false gap=3ms"}},
		{"cases:\n  - {scenario: rows, demo: true, gap: 5ms}\n",
			[]string{"rows (variant) variant=v1 waves=1 deploy=false gap=5ms", "rows (deploy) variant= waves=2 deploy=true gap=5ms", "rows (gap) variant= waves=1 deploy=false gap=5ms"}},
		{"defaults: {gap: 7ms}\ncases:\n  - {scenario: rows, demo: true}\n",
			[]string{"rows (variant) variant=v1 waves=1 deploy=false gap=7ms", "rows (deploy) variant= waves=2 deploy=true gap=7ms", "rows (gap) variant= waves=1 deploy=false gap=7ms"}},
	} {
		s, err := suite.Parse("s.yaml", []byte(tc.src), env(nil), registry())
		if err != nil {
			t.Fatal(err)
		}
		ps, err := s.Plans(demoRegistry(), suite.Options{})
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		var got []string
		for _, p := range ps {
			got = append(got, fmt.Sprintf("%s variant=%s waves=%d deploy=%t gap=%s",
				p.Case.Name, p.Params.Variant, p.Config.Waves, p.Config.Deploy, p.Params.Gap))
		}
		if strings.Join(got, "; ") != strings.Join(tc.want, "; ") {
			t.Errorf("%s:\ngot  %q\nwant %q", tc.src, got, tc.want)
		}
	}
}

// demo: true takes the catalog's expectations: expect: catalog says just
// that and is accepted; any other expectation is refused where it is
// written.
func TestDemoTakesTheCatalogsExpectation(t *testing.T) {
	if _, err := plans(t, "cases:\n  - {scenario: memory-set, demo: true, expect: catalog}\n", suite.Options{}); err != nil {
		t.Errorf("expect: catalog with demo: true refused: %v", err)
	}
	_, err := plans(t, "cases:\n  - {scenario: memory-set, demo: true, expect: safe}\n", suite.Options{})
	if e := firstError(t, err); e.Line != 2 || !strings.Contains(e.Msg, "remove expect") {
		t.Errorf("expect: safe with demo: true: got %v", e)
	}
}

// A burst of several waves makes attempts × waves attempts: max_effects
// below that can fail, and max_effects at it can never fail and is refused
// with the number the user must go under.
func TestMaxEffectsCountsEveryWave(t *testing.T) {
	ok := "cases:\n  - {scenario: memory-set, attempts: 4, waves: 2, max_effects: 7}\n"
	if ps, err := plans(t, ok, suite.Options{}); err != nil || len(ps) != 1 || ps[0].Case.Expect.Max != 7 {
		t.Errorf("max_effects 7 of 4 attempts × 2 waves: %v", err)
	}
	_, err := plans(t, "cases:\n  - {scenario: memory-set, attempts: 4, waves: 2, max_effects: 8}\n", suite.Options{})
	want := "max_effects 8 can never fail: a burst makes at most 8 attempts; lower it below 8"
	if e := firstError(t, err); e.Line != 2 || e.Msg != want {
		t.Errorf("got %d: %q, want line 2: %q", e.Line, e.Msg, want)
	}
}

// A case that names no expectation, or expect: catalog, takes the
// catalog's, which the command resolves again once the run names its
// server (Plan.Catalog); a case that writes its own keeps it.
func TestOnlyACatalogExpectationIsResolvedAgain(t *testing.T) {
	for src, want := range map[string]bool{
		"{scenario: unique-insert}":                  true,
		"{scenario: unique-insert, expect: catalog}": true,
		"{scenario: unique-insert, expect: safe}":    false,
		"{scenario: unique-insert, max_effects: 1}":  false,
	} {
		ps, err := plans(t, "cases:\n  - "+src+"\n", suite.Options{})
		if err != nil || len(ps) != 1 {
			t.Fatalf("%s: %v", src, err)
		}
		if ps[0].Catalog != want {
			t.Errorf("%s: Catalog %t, want %t", src, ps[0].Catalog, want)
		}
	}
}

// engine: names a MySQL storage engine; on any other backend it would test
// nothing, so it is refused there. An empty engine: sets nothing.
func TestEngineOnlyOnMySQL(t *testing.T) {
	_, err := plans(t, "cases:\n  - scenario: unique-insert\n    engine: innodb\n", suite.Options{})
	if e := firstError(t, err); e.Line != 3 || !strings.Contains(e.Msg, "engine applies to backend mysql, not memory") {
		t.Errorf("engine on memory: got %d: %q", e.Line, e.Msg)
	}
	if _, err := plans(t, "cases:\n  - {scenario: unique-insert, engine: \"\"}\n", suite.Options{}); err != nil {
		t.Errorf("an empty engine on memory refused: %v", err)
	}
}

// A zero duration may be written with its unit: gap: 0s is no gap, not a
// negative one.
func TestZeroDurationWithAUnit(t *testing.T) {
	ps, err := plans(t, "cases:\n  - {scenario: unique-insert, gap: 0s, timeout: 0ms}\n", suite.Options{})
	if err != nil || len(ps) != 1 || ps[0].Params.Gap != 0 || ps[0].Config.Timeout != 0 {
		t.Fatalf("gap: 0s, timeout: 0ms: %v", err)
	}
}

// retry: 0 is no retry, the default: a suite may write it on any backend
// (in its defaults, say, for a file that mixes backends). Only a positive
// retry, which a backend without conflicts would ignore, is refused there.
func TestRetryZeroOnAnyBackend(t *testing.T) {
	ps, err := plans(t, "cases:\n  - {scenario: unique-insert, retry: 0}\n", suite.Options{})
	if err != nil || len(ps) != 1 || ps[0].Config.Retries != 0 {
		t.Fatalf("retry: 0 on memory: %v", err)
	}
	_, err = plans(t, "cases:\n  - {scenario: unique-insert, retry: 1}\n", suite.Options{})
	if e := firstError(t, err); e.Line != 2 || !strings.Contains(e.Msg, "retry applies to backend mysql and postgres, not memory") {
		t.Errorf("retry: 1 on memory: got %d: %q", e.Line, e.Msg)
	}
}

// demo: true on a case that also names an http target is not expanded
// into the catalog's rows: the case is refused once, as it stands, not once
// per row (memory-set's catalog shows two).
func TestDemoWithAnHTTPTargetIsRefusedOnce(t *testing.T) {
	_, err := plans(t, "cases:\n  - scenario: memory-set\n    demo: true\n    http: {url: http://x}\n", suite.Options{})
	var es suite.Errors
	if !errors.As(err, &es) || len(es) != 1 || !strings.Contains(es[0].Msg, "not both") {
		t.Fatalf("got %v, want one problem: a scenario and an http target (not both)", err)
	}
}

// A server backend the registry gives no way to connect to (a custom
// registry's) is refused with a message, never dereferenced.
func TestServerBackendWithoutAConnectionIsRefused(t *testing.T) {
	r := scenarios.NewRegistry()
	r.AddBackend(scenarios.Backend{Name: "custom", Server: true})
	r.AddScenario(scenarios.Spec{Name: "rows", Lesson: "rows"})
	r.Register("rows", "custom", func(context.Context, scenarios.Params) (runner.Target, error) {
		return nil, errors.New("stand-in")
	})
	s, err := suite.Parse("s.yaml", []byte("cases:\n  - {scenario: rows, backend: custom}\n"), env(nil), r)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Plans(r, suite.Options{})
	if e := firstError(t, err); !strings.Contains(e.Msg, "does not know how to connect to backend custom") {
		t.Errorf("got %v, want: does not know how to connect to backend custom", e)
	}
}
