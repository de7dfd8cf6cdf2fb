package suite_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/script"
	"github.com/racetest/racetest/suite"
)

func TestScriptCases(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "s"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"s/redeem.sql": "BEGIN;\nUPDATE c SET used = 1 WHERE code = '{{.Token}}' AND used = 0;\n\\if :ROW_COUNT = 0\n\\decline\n\\endif\nCOMMIT;\n",
		"s/bad.sql": "SELECT 1;\n\\nope\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o := suite.Options{Dir: dir, Env: env(nil)}
	ps, err := plans(t, `cases:
  - backend: mysql
    connection: default
    attempts: 4
    isolation: serializable
    expect: safe
    sql:
      attempt: "@s/redeem.sql"
      effects: "SELECT count(*) FROM r WHERE code = '{{.Token}}';"
  - redis:
      attempt: "SET k:{{.Token}} 1 NX"
      effects: "EXISTS k:{{.Token}}"
      allowed: 2
    connection: default
    expect: race
`, o)
	if err != nil {
		t.Fatalf("plans: %v", err)
	}
	p := ps[0]
	if p.Script == nil || p.Case.Scenario != suite.ScriptScenario || p.Case.Backend != "mysql" || p.Params.Isolation != "serializable" ||
		p.Config.Attempts != 4 || p.Case.Name != "sql "+filepath.Join(dir, "s/redeem.sql") {
		t.Fatalf("sql plan: %+v (case %+v)", p.Script, p.Case)
	}
	if a := p.Script.Scripts.Attempt; a.Dialect != script.SQL || a.Statements() != 3 || p.Script.Scripts.Effects.Statements() != 1 {
		t.Errorf("attempt script %+v", a)
	}
	if r := ps[1]; r.Case.Backend != "redis" || r.Config.Allowed != 2 || r.Case.Expect.Kind != "race" || r.Script.Scripts.Attempt.Dialect != script.Redis {
		t.Errorf("redis plan: %+v %+v", r.Case, r.Config)
	}

	// One script per transaction: attempt: as a list, attempt i running
	// the i-th; more scripts than attempts is refused.
	ps, err = plans(t, "cases:\n  - redis:\n      attempt: [\"GET k:{{.Token}}\", \"SET k:{{.Token}} 1\"]\n      effects: \"EXISTS k:{{.Token}}\"\n    connection: default\n    attempts: 2\n", o)
	if err != nil {
		t.Fatalf("plans: %v", err)
	}
	if sc := ps[0].Script.Scripts; len(sc.Attempts) != 2 || sc.For(0).Steps[0].Text != "GET k:{{.Token}}" || sc.For(1).Steps[0].Text != "SET k:{{.Token}} 1" || sc.For(2) != sc.For(0) {
		t.Errorf("attempt list: %+v", sc.Attempts)
	}
	if _, err := plans(t, "cases:\n  - redis:\n      attempt: [\"GET a\", \"GET b\", \"GET c\"]\n      effects: \"EXISTS a\"\n    connection: default\n    attempts: 2\n", o); err == nil ||
		!strings.Contains(err.Error(), "3 attempt scripts but attempts: 2") {
		t.Errorf("three scripts for two attempts: %v", err)
	}

	for src, want := range map[string]string{
		"cases:\n  - backend: mysql\n    connection: default\n    sql:\n      attempt: \"@s/bad.sql\"\n      effects: \"SELECT 1;\"\n":                            "s/bad.sql:2:1: unknown meta-command \\nope",
		"cases:\n  - backend: redis\n    connection: default\n    sql:\n      attempt: \"SELECT 1;\"\n      effects: \"SELECT 1;\"\n":                             "a sql: case runs on backend postgres or mysql",
		"cases:\n  - backend: postgres\n    connection: default\n    sql:\n      attempt: \"SELECT 1;\"\n":                                                        "$.cases[0].sql.effects is required",
		"cases:\n  - scenario: check-then-write\n    redis:\n      attempt: \"GET a\"\n      effects: \"GET a\"\n":                                                "keep one",
		"cases:\n  - backend: postgres\n    connection: default\n    variant: for-update\n    sql:\n      attempt: \"SELECT 1;\"\n      effects: \"SELECT 1;\"\n": "not variant",
		"cases:\n  - connection: default\n    redis:\n      attempt: \"GET {{.Nope}}\"\n      effects: \"GET a\"\n":                                               "$.cases[0].redis.attempt:1:5: template",
	} {
		_, err := plans(t, src, o)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s\nerror %v, want …%s…", src, err, want)
		}
	}
}

// allowed: reads N, MIN-MAX and successes (0 included) on script and http
// cases alike, and invariant: lists what must hold (issue 25).
func TestAllowanceAndInvariantFields(t *testing.T) {
	o := suite.Options{Dir: t.TempDir(), Env: env(nil)}
	ps, err := plans(t, `cases:
  - backend: postgres
    connection: default
    sql:
      attempt: "UPDATE accounts SET balance = balance - 1 WHERE id = '{{.Token}}';"
      invariant: ["SELECT count(*) FROM accounts WHERE balance < 0"]
      allowed: 0
  - redis:
      attempt: "INCR hits"
      effects: "GET hits"
      allowed: successes
    connection: default
  - redis:
      attempt: "SET k:{{.Token}} 1 NX"
      effects: "EXISTS k:{{.Token}}"
      allowed: 0-1
    connection: default
  - http:
      url: http://127.0.0.1:9/hit
      method: POST
      effects: "http:http://127.0.0.1:9/count"
      invariant: ["http:http://127.0.0.1:9/ok"]
      allowed: successes
    expect: safe
`, o)
	if err != nil {
		t.Fatalf("plans: %v", err)
	}
	if p := ps[0]; p.Config.Allowed != 0 || p.Config.Required != 0 || len(p.Script.Scripts.Invariants) != 1 || p.Script.Scripts.Effects != nil {
		t.Errorf("sql with an invariant and allowed 0: config %+v, scripts %+v", p.Config, p.Script.Scripts)
	}
	if p := ps[1]; !p.Config.Accounting {
		t.Errorf("allowed: successes did not turn accounting on: %+v", p.Config)
	}
	if p := ps[2]; p.Config.Allowed != 1 || p.Config.Required != 0 {
		t.Errorf("allowed: 0-1 gave allowed %d required %d", p.Config.Allowed, p.Config.Required)
	}
	if p := ps[3]; !p.Config.Accounting || len(p.HTTP.Invariant) != 1 {
		t.Errorf("http: accounting %v invariants %q", p.Config.Accounting, p.HTTP.Invariant)
	}
	for src, want := range map[string]string{
		"cases:\n  - backend: postgres\n    connection: default\n    sql:\n      attempt: \"SELECT 1;\"\n      effects: \"SELECT 1;\"\n      allowed: 2-1\n": "7:16: \"2-1\" is not an allowance",
		"cases:\n  - http:\n      url: http://127.0.0.1:9/\n      effects: \"http:http://127.0.0.1:9/c\"\n      allowed: -1\n    expect: safe\n":             "\"-1\" is not an allowance",
		"cases:\n  - http:\n      url: http://127.0.0.1:9/\n      effects: \"http:http://127.0.0.1:9/c\"\n      invariant: [\"nope:x\"]\n    expect: safe\n": "5:19: invariant \"nope:x\": start it with sql:mysql:",
		"cases:\n  - backend: postgres\n    connection: default\n    sql:\n      attempt: \"SELECT 1;\"\n      invariant: [\" \"]\n":                         "is empty",
	} {
		_, err := plans(t, src, o)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s\nerror %v, want …%s…", src, err, want)
		}
	}
}

// A script that does not load is reported at the line of the field it
// came from (attempt:, an attempt list's entry, invariant:), not at its
// case's first script field (issue 29 §7).
func TestScriptErrorsPointAtTheirField(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad.sql"), []byte("SELECT 1;\n\\gsett x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := suite.Options{Dir: dir}
	for _, tc := range []struct {
		src  string
		line int
	}{
		{"cases:\n  - backend: postgres\n    connection: default\n    sql:\n      setup: \"SELECT 1;\"\n      attempt: \"@bad.sql\"\n      effects: \"SELECT 1;\"\n", 6},
		{"cases:\n  - backend: postgres\n    connection: default\n    attempts: 2\n    sql:\n      setup: \"SELECT 1;\"\n      attempt:\n        - \"SELECT 1;\"\n        - \"@bad.sql\"\n      effects: \"SELECT 1;\"\n", 9},
		{"cases:\n  - backend: postgres\n    connection: default\n    sql:\n      setup: \"SELECT 1;\"\n      attempt: \"SELECT 1;\"\n      invariant: [\"SELECT 0;\", \"@bad.sql\"]\n", 7},
	} {
		_, err := plans(t, tc.src, o)
		if err == nil {
			t.Fatalf("%s: no error", tc.src)
		}
		if e := firstError(t, err); e.Line != tc.line || !strings.Contains(e.Msg, "did you mean \\gset?") {
			t.Errorf("%s\nerror at line %d (%s), want line %d", tc.src, e.Line, e.Msg, tc.line)
		}
	}
}

// The suite's defaults reach each kind of case through one shape, and each
// kind drops the knobs it does not take: a script case runs one wave on
// one replica, keeps nothing and retries nothing; an HTTP case takes
// replicas, waves and keep, and retries nothing.
func TestDefaultsReachEachKindOfCase(t *testing.T) {
	ps, err := plans(t, `defaults:
  attempts: 6
  bursts: 9
  timeout: 3s
  replicas: 2
  waves: 2
  keep: true
  retry: 2
cases:
  - redis:
      attempt: "SET k:{{.Token}} 1 NX"
      effects: "EXISTS k:{{.Token}}"
    connection: default
  - http:
      url: http://127.0.0.1:1/x
      success: {status: ["200"]}
    expect: safe
  - scenario: check-then-write
    backend: mysql
    connection: default
    expect: race
`, suite.Options{Env: env(nil)})
	if err != nil {
		t.Fatalf("plans: %v", err)
	}
	for i, want := range []struct{ replicas, waves, retries int }{{1, 1, 0}, {2, 2, 0}, {2, 2, 2}} {
		c := ps[i].Config
		if c.Attempts != 6 || c.Bursts != 9 || c.Timeout != 3*time.Second || c.Replicas != want.replicas || c.Waves != want.waves ||
			c.Retries != want.retries || c.Keep != (i > 0) || ps[i].Shape.Attempts != 6 || ps[i].Shape.Retries != want.retries {
			t.Errorf("case %d (%s): config %+v, want 6×9, timeout 3s, replicas %d, waves %d, retries %d, keep %v",
				i, ps[i].Case.Name, c, want.replicas, want.waves, want.retries, i > 0)
		}
	}
}
