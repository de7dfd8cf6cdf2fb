package script

import (
	"strings"
	"testing"

	"github.com/racetest/racetest/report"
)

// Issue 25's own-code holes, on the real servers: each run is judged as
// 'racetest sql' judges it (report.Assess).

// `--effects 'SELECT 1;'` cannot see the naive redeem's double spend: the
// run must not read SAFE, and its one line asks about the check.
func TestConstantEffectsCheckIsNotSafe(t *testing.T) {
	for _, backend := range []string{"postgres", "mysql"} {
		t.Run(backend, func(t *testing.T) {
			spec := exampleSpec(backend, "naive")
			spec.Effects = "SELECT 1;"
			res, err := runSpec(t, backend, spec, 20)
			if err != nil {
				t.Fatal(err)
			}
			a := report.Assess(report.Case{Scenario: "naive", Backend: backend, Result: res})
			if a.Verdict == report.Safe {
				t.Fatalf("SELECT 1 as the effects check read SAFE: %+v", a)
			}
			if a.Verdict != report.Inconclusive || !strings.Contains(a.Why, "does the effects check (--effects) count what the attempt does?") {
				t.Errorf("verdict %s %q, want INCONCLUSIVE asking about the check", a.Verdict, a.Why)
			}
		})
	}
}

// A shared count (every redemption of the run, no token) is read as a
// change: the naive redeem still races, the conditional one is SAFE.
func TestSharedCountIsReadAsAChange(t *testing.T) {
	for _, backend := range []string{"postgres", "mysql"} {
		t.Run(backend, func(t *testing.T) {
			for _, tc := range []struct {
				attempt string
				want    report.Verdict
			}{{"naive", report.Race}, {"conditional", report.Safe}} {
				spec := exampleSpec(backend, tc.attempt)
				spec.Effects = "SELECT count(*) FROM redemptions_{{.RunID}};"
				res, err := runSpec(t, backend, spec, 20)
				if err != nil {
					t.Fatal(err)
				}
				a := report.Assess(report.Case{Backend: backend, Result: res})
				if a.Verdict != tc.want {
					t.Errorf("%s with a shared count: %s (%s), want %s", tc.attempt, a.Verdict, a.Why, tc.want)
				}
				if !strings.Contains(strings.Join(res.Notes, "\n"), "a shared count") {
					t.Errorf("%s: notes %q do not say the count is shared", tc.attempt, res.Notes)
				}
			}
		})
	}
}

// An overdraft invariant, with no effects check at all: the conditional
// withdraw is SAFE, the naive one (check the balance, then debit) breaks
// it and reads RACE, named after the invariant.
func TestOverdraftInvariant(t *testing.T) {
	const (
		setup    = "CREATE TABLE accounts_{{.RunID}} (id VARCHAR(64) PRIMARY KEY, balance INT NOT NULL);"
		subject  = "INSERT INTO accounts_{{.RunID}} (id, balance) VALUES ('{{.Token}}', 1);"
		teardown = "DROP TABLE IF EXISTS accounts_{{.RunID}};"
		naive    = `BEGIN;
SELECT balance FROM accounts_{{.RunID}} WHERE id = '{{.Token}}' \gset
\if :balance >= 1
  UPDATE accounts_{{.RunID}} SET balance = balance - 1 WHERE id = '{{.Token}}';
\else
  \decline insufficient funds
\endif
COMMIT;`
		conditional = `UPDATE accounts_{{.RunID}} SET balance = balance - 1 WHERE id = '{{.Token}}' AND balance >= 1;
\if :ROW_COUNT = 0
  \decline insufficient funds
\endif`
		overdraft = "SELECT count(*) FROM accounts_{{.RunID}} WHERE balance < 0"
	)
	for _, backend := range []string{"postgres", "mysql"} {
		t.Run(backend, func(t *testing.T) {
			for _, tc := range []struct {
				attempt string
				want    report.Verdict
			}{{naive, report.Race}, {conditional, report.Safe}} {
				spec := Spec{Setup: setup, Subject: subject, Attempt: []string{tc.attempt}, Teardown: teardown, Invariants: []string{overdraft}}
				res, err := runSpec(t, backend, spec, 30)
				if err != nil {
					t.Fatal(err)
				}
				if res.CleanupErr != nil {
					t.Errorf("teardown: %v", res.CleanupErr)
				}
				a := report.Assess(report.Case{Backend: backend, Result: res})
				if a.Verdict != tc.want {
					t.Fatalf("%s: %s (%s), want %s", strings.Fields(tc.attempt)[0], a.Verdict, a.Why, tc.want)
				}
				if tc.want == report.Race && !strings.Contains(a.Why, "invariant SELECT count(*) FROM accounts_{{.RunID}} WHERE balance < 0 broken after") {
					t.Errorf("the RACE is not named after the invariant: %q", a.Why)
				}
				if tc.want == report.Safe && a.Tested < 15 {
					t.Errorf("SAFE on %d tested bursts of 30", a.Tested)
				}
			}
		})
	}
}

// On Redis: an invariant command (EVAL_RO returning the keys below 0) catches
// the naive sale and holds for the atomic one, with no effects command.
func TestStockInvariantOnRedis(t *testing.T) {
	const (
		subject  = "SET stock:{{.Token}} 1 PX 60000"
		teardown = `EVAL "for _, k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('DEL', k) end return 0" 0 stock:{{.RunID}}-*`
		naive    = "GET stock:{{.Token}} \\gset left\n\\if :left >= 1\n  DECR stock:{{.Token}}\n\\else\n  \\decline sold out\n\\endif\n"
		atomic   = `EVAL "local n = tonumber(redis.call('GET', KEYS[1])) if n >= 1 then return redis.call('DECR', KEYS[1]) end return -1" 1 stock:{{.Token}} \gset left` +
			"\n\\if :left < 0\n  \\decline sold out\n\\endif\n"
		below = `EVAL_RO "if tonumber(redis.call('GET', KEYS[1]) or '0') < 0 then return 1 end return 0" 1 stock:{{.Token}}`
	)
	for _, tc := range []struct {
		name, attempt string
		want          report.Verdict
	}{{"naive", naive, report.Race}, {"atomic", atomic, report.Safe}} {
		res, err := runSpec(t, "redis", Spec{Subject: subject, Attempt: []string{tc.attempt}, Teardown: teardown, Invariants: []string{below}}, 30)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if res.CleanupErr != nil {
			t.Errorf("%s teardown: %v", tc.name, res.CleanupErr)
		}
		if a := report.Assess(report.Case{Backend: "redis", Result: res}); a.Verdict != tc.want {
			t.Errorf("%s sale on Redis: %s (%s), want %s", tc.name, a.Verdict, a.Why, tc.want)
		}
	}
}
