package cmd

import (
	"strings"
	"testing"

	"github.com/racetest/racetest/scenarios/conformance"
)

// --effects auto's flags are checked before anything connects.
func TestEffectsAutoBadInput(t *testing.T) {
	noServer := []string{"--postgres-url", "postgres://nobody@127.0.0.1:1/x?connect_timeout=1", "--redis-url", "redis://127.0.0.1:1/0"}
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"watch without auto": {[]string{"sql", "-b", "postgres", "--attempt", "SELECT 1;", "--effects", "SELECT 1;", "--watch", "t"}, "--watch names what --effects auto measures"},
		"solo every 0":       {[]string{"sql", "-b", "postgres", "--attempt", "SELECT 1;", "--effects", "auto", "--solo-every", "0"}, "--solo-every must be at least 1 (got 0)"},
		"redis needs watch":  {[]string{"redis", "--attempt", "GET a", "--effects", "auto"}, "--effects auto on Redis measures the keys --watch names"},
		"http watch alone":   {[]string{"http", "http://127.0.0.1:1/", "--watch", "t"}, "--watch"},
		"http unknown store": {[]string{"http", "http://127.0.0.1:1/", "--effects", "auto:oracle"}, "auto:postgres, auto:mysql, auto:redis or auto:mongo"},
	} {
		t.Run(name, func(t *testing.T) {
			_, stderr, code := execCmd(t, false, append(tc.args, noServer...)...)
			if code != ExitUsage || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d (want %d), stderr does not say %q:\n%s", code, ExitUsage, tc.want, stderr)
			}
		})
	}
}

// 'racetest sql --effects auto' on each SQL server: the naive redeem is a
// RACE named by the redemptions table, the oversell by the stock column,
// the lost update LOST by the balance column; the fixed scripts are SAFE.
// No effects query is written.
func TestEffectsAutoSQLCommand(t *testing.T) {
	dir := "../examples/auto/"
	t.Setenv("COLUMNS", "250")
	for _, backend := range []string{"postgres", "mysql"} {
		t.Run(backend, func(t *testing.T) {
			if _, stderr, code := execCmd(t, false, "sql", "-b", backend, "--attempt", "SELECT 1;", "--effects", "SELECT 1;", "--bursts", "1", "-n", "1"); code == ExitSetup {
				conformance.Unavailable(t, backend, nil)
			} else if code != ExitOK && code != ExitInconclusive {
				t.Fatalf("probe: exit %d\n%s", code, stderr)
			}
			for _, c := range []struct {
				attempt, expect string
				want            []string
			}{
				{"redeem-naive", "race", []string{"RACE", "`redemptions_", "+1 row solo, +"}},
				{"buy-naive", "race", []string{"RACE", ".stock`", "-3 solo, -"}},
				{"deposit-naive", "lost", []string{"LOST", ".balance`", "+60 solo, +"}},
				{"redeem-fixed", "safe", []string{"SAFE", "0 of 10 tested bursts changed the database otherwise"}},
				{"buy-fixed", "safe", []string{"SAFE"}},
				{"deposit-fixed", "safe", []string{"SAFE"}},
			} {
				t.Run(c.attempt, func(t *testing.T) {
					out, stderr, code := execCmd(t, false, "sql", "-b", backend, "--setup", "@"+dir+"schema.sql", "--subject", "@"+dir+"subject.sql",
						"--attempt", "@"+dir+c.attempt+".sql", "--effects", "auto", "--teardown", "@"+dir+"drop.sql",
						"--watch", "coupons_{{.RunID}},redemptions_{{.RunID}},items_{{.RunID}},accounts_{{.RunID}}",
						"-n", "6", "--bursts", "10", "--expect", c.expect)
					if code != ExitOK {
						t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
					}
					for _, w := range c.want {
						if !strings.Contains(out, w) {
							t.Errorf("the report does not say %q:\n%s", w, out)
						}
					}
					if !strings.Contains(stderr, "effects   auto: rows and numeric sums of coupons_{{.RunID}}") {
						t.Errorf("the banner does not name auto:\n%s", stderr)
					}
				})
			}
		})
	}
}
