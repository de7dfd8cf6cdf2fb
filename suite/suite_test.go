package suite_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/memstore"
	"github.com/racetest/racetest/scenarios/mongostore"
	"github.com/racetest/racetest/scenarios/mysqlstore"
	"github.com/racetest/racetest/scenarios/pgstore"
	"github.com/racetest/racetest/scenarios/redisstore"
	"github.com/racetest/racetest/suite"
)

// registry is the catalog with the embedded backend and stand-ins for the
// server backends' scenarios: Plans never connects, so a stand-in that cannot run is
// enough to check names and connections.
func registry() *scenarios.Registry {
	r := testenv.Registry(memstore.Register)
	for _, b := range []scenarios.Backend{redisstore.Backend, mysqlstore.Backend, pgstore.Backend, mongostore.Backend} {
		r.AddBackend(b) // as the backend declares itself: its connection, its knobs
		for _, s := range scenarios.Core() {
			r.Register(s.Name, b.Name, func(context.Context, scenarios.Params) (runner.Target, error) {
				return nil, errors.New("stand-in")
			})
		}
	}
	return r
}

func env(vars map[string]string) suite.LookupEnv {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func parse(t *testing.T, src string, vars map[string]string) (*suite.Suite, error) {
	t.Helper()
	return suite.Parse("s.yaml", []byte(src), env(vars), registry())
}

func plans(t *testing.T, src string, o suite.Options) ([]suite.Plan, error) {
	t.Helper()
	s, err := parse(t, src, nil)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return s.Plans(registry(), o)
}

// firstError returns the first error's position and message.
func firstError(t *testing.T, err error) *suite.Error {
	t.Helper()
	var es suite.Errors
	if !errors.As(err, &es) || len(es) == 0 {
		t.Fatalf("want suite.Errors, got %T %v", err, err)
	}
	return es[0]
}

func TestParseErrorsCarryLineAndColumn(t *testing.T) {
	for _, tc := range []struct {
		name, src  string
		line, col  int
		msgContain string
	}{
		{"syntax", "cases: [\n", 1, 8, "']' not found"},
		{"unknown key with suggestion", "cases:\n  - scenario: check-then-write\n    atempts: 3\n", 3, 5, `unknown key "atempts" — did you mean "attempts"?`},
		{"unknown top-level key", "defualts: {}\ncases: []\n", 1, 1, `did you mean "defaults"?`},
		{"unknown key in defaults", "defaults:\n  bursts: 3\n  conections: {}\ncases: []\n", 3, 3, `did you mean "connections"?`},
		{"unknown connection", "defaults:\n  connections: {mysql: x, postgress: y}\ncases: []\n", 2, 27, `unknown key "postgress" — did you mean "postgres"?`},
		{"unknown replica, the first in the file", "defaults:\n  connections:\n    redis_reed: x\n    bogus: y\ncases: []\n", 3, 5, `unknown key "redis_reed" — did you mean "redis_read"?`},
		{"unknown connection through an alias", "base: &b {bogus: 1}\ndefaults:\n  connections: *b\ncases: []\n", 1, 11, `unknown key "bogus"`},
		{"wrong type", "cases:\n  - scenario: check-then-write\n    attempts: lots\n", 3, 15, `"lots" is not a whole number`},
		{"list for a scalar", "cases:\n  - scenario: [a, b]\n", 2, 15, "is not a single value"},
		{"repeated key", "cases:\n  - scenario: a\n    scenario: b\n", 3, 5, `"scenario" already defined`},
		{"two documents", "cases: []\n---\ncases: []\n", 2, 1, "one YAML document"},
		{"empty", "  \n", 0, 0, "the suite is empty"},
		{"not a mapping", "- scenario: x\n", 1, 1, "sequence was used where mapping is expected"},
		{"unset variable", "defaults:\n  connections:\n    mysql: ${NOPE_DSN}\ncases: []\n", 3, 12, "environment variable NOPE_DSN is not set"},
		{"unterminated variable", "cases:\n  - name: x ${OOPS\n    scenario: check-then-write\n", 2, 11, "unterminated ${"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, tc.src, nil)
			e := firstError(t, err)
			if e.Line != tc.line || e.Column != tc.col || !strings.Contains(e.Msg, tc.msgContain) {
				t.Errorf("got %d:%d %q, want %d:%d containing %q", e.Line, e.Column, e.Msg, tc.line, tc.col, tc.msgContain)
			}
			if tc.line > 0 && !strings.HasPrefix(err.Error(), "s.yaml:") {
				t.Errorf("error does not start with the file name: %q", err)
			}
		})
	}
}

func TestErrorShowsTheLineWithACaret(t *testing.T) {
	_, err := parse(t, "cases:\n  - scenario: check-then-write\n    atempts: 3\n", nil)
	want := "s.yaml:3:5: unknown key \"atempts\" — did you mean \"attempts\"?\n" +
		"    3 |     atempts: 3\n" +
		"      |     ^"
	if err.Error() != want {
		t.Errorf("got\n%s\nwant\n%s", err, want)
	}
}

func TestEnvExpansion(t *testing.T) {
	src := `defaults:
  connections:
    mysql: ${DB_USER}:${DB_PASS}@tcp(db:3306)/app
    postgres: ${PG_URL:-default}
cases:
  - name: "cost $$5 ${TAG:-none} $HOME"
    scenario: conditional-update
    backend: mysql
  - scenario: unique-insert
    backend: postgres
`
	s, err := parse(t, src, map[string]string{"DB_USER": "app", "DB_PASS": "s3:c@r$t", "TAG": ""})
	if err != nil {
		t.Fatal(err)
	}
	c := s.File.Defaults.Connections
	if c["mysql"] != "app:s3:c@r$t@tcp(db:3306)/app" {
		t.Errorf("mysql = %q", c["mysql"])
	}
	if c["postgres"] != "default" {
		t.Errorf("postgres = %q: an unset variable with a default takes the default", c["postgres"])
	}
	if got := s.File.Cases[0].Name; got != "cost $5 none $HOME" {
		t.Errorf("name = %q: $$ is a $, an empty variable takes its default, a bare $NAME stays", got)
	}
	ps, err := s.Plans(registry(), suite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ps[0].Params.Conn.Get("mysql") != "app:s3:c@r$t@tcp(db:3306)/app" {
		t.Errorf("the expanded DSN does not reach the backend: %q", ps[0].Params.Conn.Get("mysql"))
	}
	if strings.Contains(ps[0].Conn.Value, "s3:c") {
		t.Errorf("the listing shows the password: %q", ps[0].Conn.Value)
	}
	if ps[1].Params.Conn.Get("postgres") != "" || !strings.Contains(ps[1].Conn.Source, "default local address") {
		t.Errorf("postgres: default should leave the connection empty (the backend's local default), got %+v", ps[1].Conn)
	}
}

func TestExpand(t *testing.T) {
	e := env(map[string]string{"A": "1", "EMPTY": ""})
	for in, want := range map[string]string{
		"${A}":           "1",
		"x${A}y":         "x1y",
		"${EMPTY:-d}":    "d",
		"${UNSET:-d:-e}": "d:-e",
		"$$A":            "$A",
		"$":              "$",
		"a$b":            "a$b",
		"${EMPTY}":       "",
	} {
		got, err := suite.Expand(in, e)
		if err != nil || got != want {
			t.Errorf("Expand(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"${UNSET}", "${", "${1A}", "${A B}", "${}"} {
		if _, err := suite.Expand(in, e); err == nil {
			t.Errorf("Expand(%q) should fail", in)
		}
	}
}

func TestPlansApplyDefaultsAndTheCatalog(t *testing.T) {
	ps, err := plans(t, `defaults:
  attempts: 8
  bursts: 40
  latency: 0
cases:
  - scenario: memory-set
  - scenario: memory-set
    replicas: 3
  - scenario: check-then-write
    attempts: 4
    gap: 1ms
  - scenario: conditional-update
    prove: 1%
  - scenario: unique-insert
    max_effects: 2
`, suite.Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name, expect     string
		attempts, bursts int
	}{
		{"memory-set", "safe", 8, 40},
		{"memory-set (replicas=3)", "race", 8, 40},
		{"check-then-write (gap=1ms)", "race", 4, 40},
		{"conditional-update", "safe", 8, report.BurstsFor(0.01)},
		{"unique-insert", "max=2", 8, 40},
	}
	for i, w := range want {
		p := ps[i]
		if p.Case.Name != w.name || p.Case.Expect.String() != w.expect || p.Config.Attempts != w.attempts ||
			p.Config.Bursts != w.bursts || p.Params.Attempts != w.attempts || !p.Case.Strict || p.Case.Backend != "memory" {
			t.Errorf("case %d: got name %q expect %s N=%d (params %d) bursts=%d strict=%v backend=%s; want %+v",
				i, p.Case.Name, p.Case.Expect, p.Config.Attempts, p.Params.Attempts, p.Config.Bursts, p.Case.Strict, p.Case.Backend, w)
		}
		if p.Params.Latency != 0 {
			t.Errorf("case %d: latency %s, want the default 0", i, p.Params.Latency)
		}
	}
	if ps[3].Prove != 0.01 || !ps[3].Config.StopOnViolation || ps[0].Config.StopOnViolation || !ps[3].Config.TopUp || ps[0].Config.TopUp {
		t.Errorf("prove: got %v stop=%v top-up=%v; a case without prove must not stop early or top up", ps[3].Prove, ps[3].Config.StopOnViolation, ps[3].Config.TopUp)
	}
	if ps[1].Config.Replicas != 3 || ps[1].Params.Replicas != 3 {
		t.Errorf("replicas not applied: %+v", ps[1].Config)
	}
	if ps[0].Params.RunID == ps[1].Params.RunID {
		t.Error("two cases share a run id: their objects would collide")
	}
}

func TestDemoExpandsToTheCatalogsVariants(t *testing.T) {
	ps, err := plans(t, "cases:\n  - {scenario: memory-set, demo: true, attempts: 4}\n  - {scenario: unique-insert, demo: true}\n", suite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, p := range ps {
		got = append(got, fmt.Sprintf("%s R=%d %s N=%d", p.Case.Name, p.Config.Replicas, p.Case.Expect, p.Config.Attempts))
	}
	want := []string{"memory-set (1 replica) R=1 safe N=4", "memory-set (3 replicas) R=3 race N=4", "unique-insert R=1 safe N=16"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("got %q, want %q", got, want)
	}
	_, err = plans(t, "cases:\n  - {scenario: memory-set, demo: true, replicas: 2}\n", suite.Options{})
	if e := firstError(t, err); e.Line != 2 || !strings.Contains(e.Msg, "remove replicas") {
		t.Errorf("got %v", e)
	}
}

func TestConnectionRule(t *testing.T) {
	src := func(defaults string) string {
		return "defaults:\n  connections:\n" + defaults + "cases:\n  - scenario: unique-insert\n    backend: mysql\n"
	}
	t.Run("nothing configured", func(t *testing.T) {
		_, err := plans(t, src("    redis: default\n"), suite.Options{})
		e := firstError(t, err)
		if e.Line != 6 || !strings.Contains(e.Msg, "no mysql connection is configured") || !strings.Contains(e.Msg, "RACETEST_MYSQL_DSN") {
			t.Errorf("got %v", e)
		}
	})
	for _, tc := range []struct {
		name, defaults string
		o              suite.Options
		dsn, source    string
	}{
		{"suite defaults", "    mysql: u:pw@tcp(a:1)/x\n", suite.Options{}, "u:pw@tcp(a:1)/x", "suite defaults"},
		{"explicit local default", "    mysql: default\n", suite.Options{}, "", "suite defaults: default local address"},
		{"env", "", suite.Options{Env: env(map[string]string{"RACETEST_MYSQL_DSN": "e@tcp(b:2)/y"})}, "e@tcp(b:2)/y", "env RACETEST_MYSQL_DSN"},
		{"flag beats file and env", "    mysql: u@tcp(a:1)/x\n", suite.Options{
			Conn: scenarios.NewConnections(map[string]string{"mysql": "f@tcp(c:3)/z"}),
			Env:  env(map[string]string{"RACETEST_MYSQL_DSN": "e@tcp(b:2)/y"}),
		}, "f@tcp(c:3)/z", "--mysql-dsn"},
		{"file beats env", "    mysql: u@tcp(a:1)/x\n", suite.Options{Env: env(map[string]string{"RACETEST_MYSQL_DSN": "e@tcp(b:2)/y"})}, "u@tcp(a:1)/x", "suite defaults"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := src(tc.defaults)
			if tc.defaults == "" {
				s = "cases:\n  - scenario: unique-insert\n    backend: mysql\n"
			}
			ps, err := plans(t, s, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if ps[0].Params.Conn.Get("mysql") != tc.dsn || ps[0].Conn.Source != tc.source {
				t.Errorf("got %q from %q, want %q from %q", ps[0].Params.Conn.Get("mysql"), ps[0].Conn.Source, tc.dsn, tc.source)
			}
			if strings.Contains(ps[0].Conn.Value, "pw") {
				t.Errorf("password shown: %s", ps[0].Conn.Value)
			}
		})
	}
	t.Run("case connection wins", func(t *testing.T) {
		ps, err := plans(t, "cases:\n  - scenario: unique-insert\n    backend: postgres\n    connection: postgres://u:secret@h/db\n",
			suite.Options{Conn: scenarios.NewConnections(map[string]string{"postgres": "postgres://flag/db"})})
		if err != nil {
			t.Fatal(err)
		}
		if ps[0].Params.Conn.Get("postgres") != "postgres://u:secret@h/db" || ps[0].Conn.Value != "postgres://u:xxxxx@h/db" {
			t.Errorf("got %q shown as %q", ps[0].Params.Conn.Get("postgres"), ps[0].Conn.Value)
		}
	})
}

func TestPlanErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		line, col int
		msg       string
	}{
		{"unknown scenario", "cases:\n  - scenario: check-then-wirte\n", 2, 15, `did you mean "check-then-write"?`},
		{"unknown backend", "cases:\n  - scenario: check-then-write\n    backend: postgress\n", 3, 14, `did you mean "postgres"?`},
		{"no scenario", "cases:\n  - backend: memory\n", 2, 5, "names no scenario"},
		{"no cases", "defaults:\n  attempts: 4\n", 0, 0, "no cases"},
		{"max effects 0", "cases:\n  - scenario: check-then-write\n    max_effects: 0\n", 3, 18, "can never be met"},
		{"max effects vacuous", "cases:\n  - scenario: check-then-write\n    attempts: 4\n    max_effects: 4\n", 4, 18, "can never fail"},
		{"expect and max", "cases:\n  - scenario: check-then-write\n    expect: safe\n    max_effects: 2\n", 4, 18, "contradict"},
		{"unknown expect", "cases:\n  - scenario: check-then-write\n    expect: saef\n", 3, 13, `did you mean "safe"?`},
		{"prove zero", "cases:\n  - scenario: unique-insert\n    prove: 0%\n", 3, 12, "strictly between"},
		{"prove one", "cases:\n  - scenario: unique-insert\n    prove: 1\n", 3, 12, "strictly between"},
		{"prove text", "cases:\n  - scenario: unique-insert\n    prove: often\n", 3, 12, "not a rate"},
		{"prove with bursts", "cases:\n  - scenario: unique-insert\n    bursts: 10\n    prove: 1%\n", 3, 13, "contradict"},
		{"prove a race", "cases:\n  - scenario: check-then-write\n    prove: 1%\n", 3, 12, "expects race"},
		{"one attempt", "defaults:\n  attempts: 1\ncases:\n  - scenario: unique-insert\n", 2, 13, "can never race"},
		{"bad duration", "cases:\n  - scenario: unique-insert\n    gap: 5\n", 3, 10, "with a unit"},
		{"negative duration", "cases:\n  - scenario: unique-insert\n    timeout: -1s\n", 3, 14, "cannot be negative"},
		{"deploy without waves", "cases:\n  - scenario: memory-set\n    deploy: true\n", 2, 5, "waves: 2"},
		{"isolation on redis", "defaults:\n  connections: {redis: default}\ncases:\n  - scenario: unique-insert\n    backend: redis\n    isolation: serializable\n", 6, 16, "applies to backend mysql and postgres"},
		{"retry on memory", "cases:\n  - scenario: unique-insert\n    retry: 3\n", 3, 12, "applies to backend mysql and postgres"},
		{"negative retry", "cases:\n  - scenario: unique-insert\n    backend: mysql\n    connection: default\n    retry: -1\n", 5, 12, "retry must be at least 0"},
		{"variant in defaults", "defaults:\n  variant: for-update\ncases:\n  - scenario: unique-insert\n", 2, 12, "move it into the case"},
		{"connection on memory", "cases:\n  - scenario: unique-insert\n    connection: x\n", 3, 17, "takes no connection"},
		{"duplicate names", "cases:\n  - scenario: unique-insert\n  - scenario: unique-insert\n", 3, 5, "both named"},
		{"server rule without why", "cases:\n  - scenario: conditional-update\n    on_server:\n      - match: FerretDB\n        expect: race\n", 4, 9, "needs why"},
		{"version", "version: 2\ncases:\n  - scenario: unique-insert\n", 1, 10, "unknown suite version 2"},
		{"scenario and http", "cases:\n  - scenario: unique-insert\n    http: {url: http://x}\n", 2, 5, "not both"},
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

func TestPlanReportsEveryProblem(t *testing.T) {
	_, err := plans(t, "cases:\n  - scenario: nope\n  - scenario: unique-insert\n    max_effects: 0\n  - scenario: memory-set\n", suite.Options{})
	var es suite.Errors
	if !errors.As(err, &es) || len(es) != 2 || es[0].Line != 2 || es[1].Line != 4 {
		t.Fatalf("want the two problems in file order, got %v", err)
	}
}

func TestHTTPCase(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "body.json"), []byte(`{"user":"u{{.Burst}}"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := suite.Parse("s.yaml", []byte(`defaults:
  connections: {postgres: "postgres://app:pw@db/app"}
cases:
  - name: reward pays once
    http:
      method: post
      url: http://127.0.0.1:8080/reward/{{.Burst}}
      headers: ["Authorization: Bearer ${TOKEN}"]
      body_file: body.json
      release: last-byte
      success: {status: [200, 2xx]}
      effects: "sql:postgres:SELECT count(*) FROM payouts WHERE burst = {{.Burst}}"
    prove: 2%
`), env(map[string]string{"TOKEN": "tk"}), registry())
	if err != nil {
		t.Fatal(err)
	}
	ps, err := s.Plans(registry(), suite.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	p := ps[0]
	h := p.HTTP
	if h == nil || h.Method != "POST" || h.BodyFile != filepath.Join(dir, "body.json") || h.Headers[0] != "Authorization: Bearer tk" ||
		h.Release != "last-byte" || h.Success.Status[0] != "200" || p.Case.Backend != "http" || p.Case.Expect.Kind != "safe" ||
		p.Config.Bursts != report.BurstsFor(0.02) || p.Params.Conn.Get("postgres") != "postgres://app:pw@db/app" || p.Params.RunID == "" {
		t.Errorf("plan: %+v\nhttp: %+v", p, h)
	}

	for _, tc := range []struct{ name, http, msg string }{
		{"no rule", "{url: http://h/x}", "needs a success rule"},
		{"empty rule", "{url: http://h/x, success: {}}", "needs a success rule"},
		{"bad url", "{url: ftp://h/x, success: {status: [200]}}", "must start with http"},
		{"no host", "{url: 'http:///x', success: {status: [200]}}", "names no host"},
		{"bad status", "{url: http://h/x, success: {status: [2000]}}", "not an HTTP status"},
		{"bad regexp", "{url: http://h/x, success: {body: '('}}", "not a regular expression"},
		{"unknown template field", "{url: 'http://h/{{.Burts}}', success: {status: [200]}}", "{{.Burts}}"},
		{"broken template", "{url: 'http://h/{{.Burst', success: {status: [200]}}", "template:"},
		{"bad release", "{url: http://h/x, release: fast, success: {status: [200]}}", "unknown release"},
		{"bad header", "{url: http://h/x, headers: [nocolon], success: {status: [200]}}", "not a header line"},
		{"bad effects kind", "{url: http://h/x, effects: 'sqlite:SELECT 1'}", "start it with"},
		{"effects with no connection", "{url: http://h/x, effects: 'redis:SCARD paid:{{.Burst}}'}", "no redis connection"},
		{"sql without backend", "{url: http://h/x, effects: 'sql:SELECT 1'}", "mysql or postgres"},
		{"mongo without collection", "{url: http://h/x, effects: 'mongo:{}'}", "DATABASE.COLLECTION"},
		{"missing body file", "{url: http://h/x, body_file: nope.json, success: {status: [200]}}", "cannot read"},
		{"catalog", "{url: http://h/x, success: {status: [200]}}\n    expect: catalog", "no catalog expectation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := plans(t, "cases:\n  - http: "+tc.http+"\n", suite.Options{Dir: dir})
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("got %v, want an error containing %q", err, tc.msg)
			}
		})
	}
}

func TestResolveOnServer(t *testing.T) {
	ps, err := plans(t, `defaults:
  connections: {mongo: default}
cases:
  - scenario: conditional-update
    backend: mongo
    on_server:
      - match: ferretdb
        expect: race
        why: findAndModify is read-modify-replace
`, suite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := ps[0]
	real := p.Resolve(report.Case{Expect: p.Case.Expect, Result: &runner.Result{Server: "MongoDB 7.0.14"}})
	if real.Expect.Kind != "safe" || len(real.Result.Notes) != 0 {
		t.Errorf("real MongoDB keeps the catalog's expectation: %+v", real)
	}
	ferret := p.Resolve(report.Case{Expect: p.Case.Expect, Result: &runner.Result{Server: "FerretDB 1.24.2 (MongoDB 7.0.42 wire)"}})
	if ferret.Expect.Kind != "race" || len(ferret.Result.Notes) != 1 || !strings.Contains(ferret.Result.Notes[0], "read-modify-replace") {
		t.Errorf("FerretDB: %+v notes %q", ferret.Expect, ferret.Result.Notes)
	}
}

func TestUnproven(t *testing.T) {
	ps, err := plans(t, "cases:\n  - scenario: unique-insert\n    prove: 5%\n", suite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := ps[0]
	n := p.Config.Bursts
	res := func(overlapped int) *runner.Result {
		r := &runner.Result{Attempts: 8, Allowed: 1, Planned: n}
		for i := range n {
			b := runner.Burst{Index: i, Effects: 1, Allowed: 1, Overlap: 1, Outcomes: [runner.NumClasses]int{1, 7}}
			if i < overlapped {
				b.Overlap = 8
			}
			r.Bursts = append(r.Bursts, b)
		}
		return r
	}
	if p.Prove != 0.05 {
		t.Fatalf("plan.Prove = %v, want 0.05", p.Prove)
	}
	proving := func(r *runner.Result) report.Assessment {
		return report.Assess(report.Case{Expect: p.Case.Expect, Prove: p.Prove, Result: r})
	}
	if a := proving(res(n)); a.Verdict != report.Safe {
		t.Errorf("every burst overlapped, yet %s: %s", a.Verdict, a.Why)
	}
	a := proving(res(n * 3 / 4))
	if a.Verdict != report.Inconclusive || !strings.Contains(a.Why, "only") {
		t.Errorf("a quarter of the bursts did not overlap: want INCONCLUSIVE, got %s %q", a.Verdict, a.Why)
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"root:secret@tcp(127.0.0.1:3306)/test":        "root:xxxxx@tcp(127.0.0.1:3306)/test",
		"root@tcp(127.0.0.1:3306)/test":               "root@tcp(127.0.0.1:3306)/test",
		"postgres://u:p%40ss@h:5432/db?sslmode=off":   "postgres://u:xxxxx@h:5432/db?sslmode=off",
		"redis://:pw@127.0.0.1:6379/0":                "redis://:xxxxx@127.0.0.1:6379/0",
		"mongodb://h:27017/?authSource=x&password=pw": "mongodb://h:27017/?authSource=x&password=xxxxx",
		"host=h user=u password=pw dbname=d":          "host=h user=u password=xxxxx dbname=d",
		"http://h:8080/r/{{.Token}}?a=1":              "http://h:8080/r/{{.Token}}?a=1",
		"mysql://u:p@ss@db:3306/x":                    "mysql://u:xxxxx@db:3306/x",
	} {
		if got := suite.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestReleaseMode(t *testing.T) {
	ps, err := plans(t, "defaults:\n  connections: {redis: default}\ncases:\n  - {scenario: check-then-write, backend: redis, release: last-byte}\n  - {scenario: check-then-write, release: last-byte}\n", suite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ps[0].Case.Release != "last-byte" || ps[0].Params.Dial == nil {
		t.Errorf("redis last-byte: release %q, dial set %v", ps[0].Case.Release, ps[0].Params.Dial != nil)
	}
	// memory has no wire: the gate, with a note saying so.
	if ps[1].Case.Release != "gate" || ps[1].Params.Dial != nil || len(ps[1].Config.Notes) == 0 {
		t.Errorf("memory last-byte: release %q, dial set %v, notes %q", ps[1].Case.Release, ps[1].Params.Dial != nil, ps[1].Config.Notes)
	}
	if _, err := plans(t, "cases:\n  - {scenario: check-then-write, release: sideways}\n", suite.Options{}); err == nil || !strings.Contains(err.Error(), "sideways") {
		t.Errorf("unknown mode: err = %v", err)
	}
}

// docs/http.md lists setup: for HTTP cases; the parser accepted none (issue 10 §6).
func TestHTTPCaseSetup(t *testing.T) {
	ps, err := plans(t, `cases:
  - http:
      method: POST
      url: http://127.0.0.1:8080/redeem?code={{.Token}}
      setup: PUT http://127.0.0.1:8080/coupons?code={{.Token}}
      success: {status: ["200"], declined: ["404"]}
      credentials_to: [127.0.0.1:9090]
    allow_inconclusive: true
`, suite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := ps[0].HTTP
	if h.Setup != "PUT http://127.0.0.1:8080/coupons?code={{.Token}}" || h.Success.Declined[0] != "404" || h.CredentialsTo[0] != "127.0.0.1:9090" {
		t.Errorf("http case = %+v", h)
	}
	if ps[0].Case.Strict {
		t.Error("allow_inconclusive: true, yet the case fails INCONCLUSIVE")
	}
}

// A gate fails a case that proved nothing unless told otherwise.
func TestSuiteStrictByDefault(t *testing.T) {
	for _, c := range []struct {
		o      suite.Options
		strict bool
	}{{suite.Options{}, true}, {suite.Options{AllowInconclusive: true}, false}, {suite.Options{AllowInconclusive: true, Strict: true}, true}} {
		ps, err := plans(t, "cases:\n  - scenario: unique-insert\n", c.o)
		if err != nil {
			t.Fatal(err)
		}
		if ps[0].Case.Strict != c.strict {
			t.Errorf("%+v: strict %v, want %v", c.o, ps[0].Case.Strict, c.strict)
		}
	}
}
