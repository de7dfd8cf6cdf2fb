package suite_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/suite"
)

// A case's own knob wins over the suite's defaults, which win over
// racetest's: a gate that ran 100 bursts where the case says 7 (or 7 where
// it says 500) measured something nobody asked for.
func TestCaseKnobsWinOverDefaults(t *testing.T) {
	ps, err := plans(t, `defaults:
  attempts: 8
  bursts: 40
  replicas: 2
  waves: 3
  timeout: 2s
  gap: 3ms
  seed: 11
  keep: true
  isolation: serializable
  engine: innodb
  connections: {mysql: default}
cases:
  - scenario: check-then-write
    name: own
    backend: mysql
    attempts: 4
    bursts: 7
    replicas: 1
    waves: 1
    timeout: 0
    gap: 1ms
    seed: 5
    keep: false
    isolation: read-committed
    engine: memory
  - scenario: check-then-write
    name: defaults
    backend: mysql
  - scenario: check-then-write
    name: builtin
`, suite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	own, defs, builtin := ps[0], ps[1], ps[2]
	type knobs struct {
		attempts, bursts, replicas, waves int
		timeout, gap                      time.Duration
		seed                              int64
		keep                              bool
		isolation, engine                 string
	}
	of := func(p suite.Plan) knobs {
		return knobs{p.Config.Attempts, p.Config.Bursts, p.Config.Replicas, p.Config.Waves,
			p.Config.Timeout, p.Params.Gap, p.Params.Seed, p.Config.Keep, p.Params.Isolation, p.Params.Engine}
	}
	for _, tc := range []struct {
		name string
		got  knobs
		want knobs
	}{
		{"the case's own", of(own), knobs{4, 7, 1, 1, 0, time.Millisecond, 5, false, "read-committed", "memory"}},
		{"the suite's defaults", of(defs), knobs{8, 40, 2, 3, 2 * time.Second, 3 * time.Millisecond, 11, true, "serializable", "innodb"}},
		// isolation and engine in the defaults reach only the backends they mean something to.
		{"on memory", of(builtin), knobs{8, 40, 2, 3, 2 * time.Second, 3 * time.Millisecond, 11, true, "", ""}},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, tc.got, tc.want)
		}
	}
	if own.Params.Attempts != 4 || own.Params.Replicas != 1 {
		t.Errorf("params N=%d R=%d, want the case's 4 and 1: the scenario must be built for the run's shape", own.Params.Attempts, own.Params.Replicas)
	}
}

// Without defaults or knobs a case runs racetest's own defaults, the ones
// `racetest run` uses.
func TestCaseWithoutKnobsRunsTheBuiltinDefaults(t *testing.T) {
	ps, err := plans(t, "cases:\n  - scenario: unique-insert\n", suite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := ps[0].Config
	if c.Attempts != runner.DefaultAttempts || c.Bursts != runner.DefaultBursts || c.Replicas != runner.DefaultReplicas ||
		c.Waves != runner.DefaultWaves || c.Timeout != runner.DefaultTimeout || c.Keep || c.Deploy {
		t.Errorf("config %+v, want racetest's defaults", c)
	}
}

// keep: leaves a suite case's objects in the store; so does --keep for the
// whole suite; nothing else does.
func TestKeepReachesTheRun(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		opt       bool
		want      []bool
	}{
		{"case", "cases:\n  - {scenario: unique-insert, keep: true}\n  - {scenario: memory-set}\n", false, []bool{true, false}},
		{"defaults", "defaults: {keep: true}\ncases:\n  - {scenario: unique-insert}\n", false, []bool{true}},
		{"--keep", "cases:\n  - {scenario: unique-insert, keep: false}\n", true, []bool{true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps, err := plans(t, tc.src, suite.Options{Keep: tc.opt})
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range tc.want {
				if ps[i].Config.Keep != want {
					t.Errorf("case %d: keep %v, want %v", i, ps[i].Config.Keep, want)
				}
			}
		})
	}
}

// deploy: in a case or in the defaults restarts the replicas between waves.
func TestDeployReachesTheRun(t *testing.T) {
	ps, err := plans(t, `defaults: {waves: 2}
cases:
  - {scenario: memory-set, deploy: true}
  - {scenario: memory-set, name: plain}
`, suite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !ps[0].Config.Deploy || ps[1].Config.Deploy {
		t.Errorf("deploy %v and %v, want true for the case that asked and false for the other", ps[0].Config.Deploy, ps[1].Config.Deploy)
	}
	if ps[0].Case.Name != "memory-set (deploy)" {
		t.Errorf("name %q, want the deploy said in it", ps[0].Case.Name)
	}
}

// Only version 1 exists; any other number, 0 included, is refused with the
// line it is on.
func TestSuiteVersion(t *testing.T) {
	for _, v := range []string{"0", "2", "-1"} {
		_, err := plans(t, "version: "+v+"\ncases:\n  - scenario: unique-insert\n", suite.Options{})
		if err == nil {
			t.Errorf("version %s accepted", v)
			continue
		}
		if e := firstError(t, err); e.Line != 1 || !strings.Contains(e.Msg, "unknown suite version "+v) {
			t.Errorf("version %s: got %d %q", v, e.Line, e.Msg)
		}
	}
	if _, err := plans(t, "version: 1\ncases:\n  - scenario: unique-insert\n", suite.Options{}); err != nil {
		t.Errorf("version 1 refused: %v", err)
	}
}

// onServer plans a mongo case with the given on_server rules and resolves
// it on a run that measured server.
func onServer(t *testing.T, rules, server string) report.Case {
	t.Helper()
	ps, err := plans(t, `defaults:
  connections: {mongo: default}
cases:
  - scenario: conditional-update
    backend: mongo
    on_server:
`+rules, suite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := ps[0]
	return p.Resolve(report.Case{Expect: p.Case.Expect, Result: &runner.Result{Server: server}})
}

// match: is case-insensitive on both sides: "FerretDB", as the error
// message and the docs spell it, matches the server the report names.
func TestServerRuleMatchIgnoresCase(t *testing.T) {
	for _, match := range []string{"FerretDB", "ferretdb", "FERRETDB"} {
		c := onServer(t, "      - {match: "+match+", expect: race, why: findAndModify is read-modify-replace}\n",
			"FerretDB 1.24.2 (MongoDB 7.0.42 wire)")
		if c.Expect.Kind != "race" {
			t.Errorf("match: %s left the expectation at %s, want race", match, c.Expect)
		}
	}
}

// The first rule that matches wins, and only its reason is noted.
func TestFirstServerRuleWins(t *testing.T) {
	c := onServer(t, `      - {match: FerretDB 1., max_effects: 2, why: the 1.x series}
      - {match: FerretDB, expect: race, why: any FerretDB}
`, "FerretDB 1.24.2 (MongoDB 7.0.42 wire)")
	if c.Expect.Kind != "max" || c.Expect.Max != 2 {
		t.Errorf("expectation %s, want max=2 from the first rule", c.Expect)
	}
	if n := c.Result.Notes; len(n) != 1 || !strings.Contains(n[0], "the 1.x series") || !strings.Contains(n[0], "max=2 instead of safe") {
		t.Errorf("notes %q, want the first rule's reason only", n)
	}
}

// A run that named no server, or a case that did not run, keeps the
// expectation it was planned with.
func TestServerRuleNeedsAServer(t *testing.T) {
	c := onServer(t, "      - {match: FerretDB, expect: race, why: any FerretDB}\n", "")
	if c.Expect.Kind != "safe" || len(c.Result.Notes) != 0 {
		t.Errorf("no server: expectation %s notes %q, want safe and no note", c.Expect, c.Result.Notes)
	}
	ps, err := plans(t, "defaults:\n  connections: {mongo: default}\ncases:\n  - scenario: conditional-update\n    backend: mongo\n    on_server:\n      - {match: FerretDB, expect: race, why: x}\n", suite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c := ps[0].Resolve(report.Case{Expect: ps[0].Case.Expect}); c.Expect.Kind != "safe" {
		t.Errorf("a case with no result became %s", c.Expect)
	}
}

// Mistakes a suite author can make, each refused at its place with what to
// do instead.
func TestPlanRefusesContradictions(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		line, col int
		msg       string
	}{
		{"release on an http case", "cases:\n  - http: {url: http://x}\n    release: last-byte\n", 3, 14, "move it there"},
		{"expect max without a number", "cases:\n  - scenario: check-then-write\n    expect: max\n", 3, 13, "expect: max needs max_effects: N"},
		{"on_server expect catalog", "defaults:\n  connections: {mongo: default}\ncases:\n  - scenario: conditional-update\n    backend: mongo\n    on_server:\n      - {match: FerretDB, expect: catalog, why: x}\n",
			7, 35, "expect: catalog here would change nothing"},
		{"on_server without match", "cases:\n  - scenario: conditional-update\n    on_server:\n      - {match: ' ', expect: race, why: x}\n", 4, 9, "on_server needs match:"},
		{"on_server without expectation", "cases:\n  - scenario: conditional-update\n    on_server:\n      - {match: FerretDB, why: x}\n", 4, 9, `on_server for "FerretDB" needs expect: or max_effects:`},
		{"on_server with a bad expectation", "cases:\n  - scenario: conditional-update\n    on_server:\n      - {match: FerretDB, expect: raec, why: x}\n", 4, 35, `did you mean "race"?`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := plans(t, tc.src, suite.Options{})
			if err == nil {
				t.Fatal("no error")
			}
			e := firstError(t, err)
			if e.Line != tc.line || e.Column != tc.col || !strings.Contains(e.Msg, tc.msg) {
				t.Errorf("got %d:%d %q, want %d:%d containing %q", e.Line, e.Column, e.Msg, tc.line, tc.col, tc.msg)
			}
		})
	}
}

// A scenario the catalog knows but a backend does not implement is refused
// at the case's backend, naming the backends that do.
func TestPlanRefusesAScenarioTheBackendLacks(t *testing.T) {
	reg := registry()
	reg.AddBackend(scenarios.Backend{Name: "partial"})
	reg.Register(scenarios.UniqueInsert, "partial", func(context.Context, scenarios.Params) (runner.Target, error) {
		return nil, errors.New("stand-in")
	})
	s, err := suite.Parse("s.yaml", []byte("cases:\n  - scenario: check-then-write\n    backend: partial\n"), env(nil), registry())
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Plans(reg, suite.Options{})
	if err == nil {
		t.Fatal("a scenario the backend does not implement was planned")
	}
	if e := firstError(t, err); e.Line != 3 || !strings.Contains(e.Msg, "partial") {
		t.Errorf("got %d %q, want line 3 naming the backend", e.Line, e.Msg)
	}
}
