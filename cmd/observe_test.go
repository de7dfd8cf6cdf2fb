package cmd

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/racetest/racetest/scenarios/conformance"
)

// --allowed reads N, MIN-MAX and successes the same on every command, and a
// bad value is exit 2 before anything connects (the addresses are never
// dialled).
func TestAllowedIsOneFlagEverywhere(t *testing.T) {
	noServer := []string{"--postgres-url", "postgres://nobody@127.0.0.1:1/x?connect_timeout=1", "--redis-url", "redis://127.0.0.1:1/0"}
	for _, args := range [][]string{
		{"sql", "-b", "postgres", "--attempt", "SELECT 1;", "--effects", "SELECT 1;", "--allowed", "0-x"},
		{"sql", "-b", "postgres", "--attempt", "SELECT 1;", "--effects", "SELECT 1;", "--allowed", "-1"},
		{"redis", "--attempt", "GET a", "--effects", "GET a", "--allowed", "2-1"},
		{"mongo", "--attempt", `{"ping": 1}`, "--effects", `{"count": "c"}`, "--allowed", "some"},
		{"http", "http://127.0.0.1:1/", "--allowed", "successes!"},
		{"explore", "sql", "-b", "postgres", "--attempt", "SELECT 1;", "--effects", "SELECT 1;", "--allowed", "1-0"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			_, stderr, code := execCmd(t, false, append(args, noServer...)...)
			if code != ExitUsage || !strings.Contains(stderr, "--allowed:") || !strings.Contains(stderr, "is not an allowance: write N") {
				t.Errorf("exit %d, stderr:\n%s", code, stderr)
			}
		})
	}
	// Accepted: the run goes on to connect (and fails there, exit 3).
	for _, allowed := range []string{"0", "0-1", "successes"} {
		_, stderr, code := execCmd(t, false, append([]string{"sql", "-b", "postgres", "--attempt", "SELECT 1;", "--effects", "SELECT 1;", "--allowed", allowed}, noServer...)...)
		if code != ExitSetup {
			t.Errorf("--allowed %s: exit %d, want %d (accepted, then the server is unreachable):\n%s", allowed, code, ExitSetup, stderr)
		}
	}
	_, stderr, code := execCmd(t, false, append([]string{"explore", "sql", "-b", "postgres", "--attempt", "SELECT 1;", "--effects", "SELECT 1;", "--allowed", "successes"}, noServer...)...)
	if code != ExitUsage || !strings.Contains(stderr, "accounting is for sql, redis, mongo and http") {
		t.Errorf("explore --allowed successes: exit %d\n%s", code, stderr)
	}
	_, stderr, code = execCmd(t, false, append([]string{"sql", "-b", "postgres", "--attempt", "SELECT 1;", "--invariant", "SELECT 0", "--allowed", "2"}, noServer...)...)
	if code != ExitUsage || !strings.Contains(stderr, "there is no --effects") {
		t.Errorf("--allowed without --effects: exit %d\n%s", code, stderr)
	}
}

// On PostgreSQL, as a team runs it: `--effects 'SELECT 1;'` on the naive
// redeem is not SAFE, and its EXPECTED reads "safe unproven"; the overdraft
// invariant alone proves the conditional withdraw SAFE and catches the
// naive one, named; --allowed 0 runs.
func TestOwnCodeVerdictsOnPostgres(t *testing.T) {
	if _, _, code := execCmd(t, false, "sql", "-b", "postgres", "--attempt", "SELECT 1;", "--effects", "SELECT 0;", "-n", "1", "--bursts", "1"); code == ExitSetup {
		conformance.Unavailable(t, "postgres", nil)
	}
	dir := "../examples/redeem/scripts/"
	out, stderr, code := execCmd(t, false, "sql", "-b", "postgres", "--setup", "@"+dir+"schema.sql", "--subject", "@"+dir+"coupon.sql",
		"--attempt", "@"+dir+"naive.sql", "--effects", "SELECT 1;", "--teardown", "@"+dir+"drop.sql", "-n", "8", "--bursts", "20")
	if code != ExitOK || strings.Contains(out, "SAFE") || !strings.Contains(out, "INCONCLUSIVE") || !strings.Contains(out, "safe unproven") ||
		!strings.Contains(out, "count what the attempt does?") {
		t.Errorf("SELECT 1 on the naive redeem: exit %d\n%s\n%s", code, out, stderr)
	}

	const (
		setup    = "CREATE TABLE accounts_{{.RunID}} (id VARCHAR(64) PRIMARY KEY, balance INT NOT NULL);"
		subject  = "INSERT INTO accounts_{{.RunID}} (id, balance) VALUES ('{{.Token}}', 1);"
		teardown = "DROP TABLE IF EXISTS accounts_{{.RunID}};"
		naive    = "BEGIN;\nSELECT balance FROM accounts_{{.RunID}} WHERE id = '{{.Token}}' \\gset\n\\if :balance >= 1\n" +
			"UPDATE accounts_{{.RunID}} SET balance = balance - 1 WHERE id = '{{.Token}}';\n\\else\n\\decline\n\\endif\nCOMMIT;\n"
		conditional = "UPDATE accounts_{{.RunID}} SET balance = balance - 1 WHERE id = '{{.Token}}' AND balance >= 1;\n\\if :ROW_COUNT = 0\n\\decline\n\\endif\n"
		overdraft   = "SELECT count(*) FROM accounts_{{.RunID}} WHERE balance < 0"
	)
	run := func(attempt string, more ...string) (string, string, int) {
		return execCmd(t, false, append([]string{"sql", "-b", "postgres", "--setup", setup, "--subject", subject, "--attempt", attempt,
			"--invariant", overdraft, "--teardown", teardown, "-n", "8", "--bursts", "30"}, more...)...)
	}
	if out, stderr, code := run(conditional); code != ExitOK || !strings.Contains(out, "SAFE") || !strings.Contains(out, "0 of 30 tested bursts broke an invariant") {
		t.Errorf("conditional withdraw under the overdraft invariant: exit %d\n%s\n%s", code, out, stderr)
	}
	out, stderr, code = run(naive)
	if code != ExitViolated || !strings.Contains(out, "RACE") || !strings.Contains(out, "invariant "+overdraft+" broken after") {
		t.Errorf("naive withdraw under the overdraft invariant: exit %d\n%s\n%s", code, out, stderr)
	}

	out, stderr, code = execCmd(t, false, "sql", "-b", "postgres", "--setup", "@"+dir+"schema.sql", "--subject", "@"+dir+"coupon.sql",
		"--attempt", "@"+dir+"conditional.sql", "--effects", "@"+dir+"count.sql", "--teardown", "@"+dir+"drop.sql", "-n", "4", "--bursts", "5",
		"--allowed", "0", "--expect", "race")
	if code != ExitOK || !strings.Contains(out, "RACE") {
		t.Errorf("--allowed 0 on a redeem that redeems: exit %d\n%s\n%s", code, out, stderr)
	}
}

// A lost update over HTTP reads LOST through accounting, with no computed
// count: the shared counter is read as a change, and every 200 must have
// landed once.
func TestHTTPLostUpdateThroughAccounting(t *testing.T) {
	var mu sync.Mutex
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/count":
			mu.Lock()
			fmt.Fprint(w, hits)
			mu.Unlock()
		case "/hit":
			mu.Lock()
			read := hits
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
			mu.Lock()
			hits = read + 1
			mu.Unlock()
		default:
			w.WriteHeader(http.StatusBadRequest) // --release auto's h2c probe
		}
	}))
	defer srv.Close()
	out, stderr, code := execCmd(t, false, "http", "POST", srv.URL+"/hit", "--effects", "http:"+srv.URL+"/count",
		"--allowed", "successes", "-n", "8", "--bursts", "10", "--release", "last-byte")
	if code != ExitViolated || !strings.Contains(out, "LOST") || !strings.Contains(out, "its successes") {
		t.Errorf("a lost update under --allowed successes: exit %d\n%s\n%s", code, out, stderr)
	}
}
