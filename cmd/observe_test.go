package cmd

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/report"
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
			if code != exitUsage || !strings.Contains(stderr, "--allowed:") || !strings.Contains(stderr, "is not an allowance: write N") {
				t.Errorf("exit %d, stderr:\n%s", code, stderr)
			}
		})
	}
	// Accepted: the run goes on to connect (and fails there, exit 3).
	for _, allowed := range []string{"0", "0-1", "successes"} {
		_, stderr, code := execCmd(t, false, append([]string{"sql", "-b", "postgres", "--attempt", "SELECT 1;", "--effects", "SELECT 1;", "--allowed", allowed}, noServer...)...)
		if code != exitSetup {
			t.Errorf("--allowed %s: exit %d, want %d (accepted, then the server is unreachable):\n%s", allowed, code, exitSetup, stderr)
		}
	}
	_, stderr, code := execCmd(t, false, append([]string{"explore", "sql", "-b", "postgres", "--attempt", "SELECT 1;", "--effects", "SELECT 1;", "--allowed", "successes"}, noServer...)...)
	if code != exitUsage || !strings.Contains(stderr, "accounting is for sql, redis, mongo and http") {
		t.Errorf("explore --allowed successes: exit %d\n%s", code, stderr)
	}
	_, stderr, code = execCmd(t, false, append([]string{"sql", "-b", "postgres", "--attempt", "SELECT 1;", "--invariant", "SELECT 0", "--allowed", "2"}, noServer...)...)
	if code != exitUsage || !strings.Contains(stderr, "there is no --effects") {
		t.Errorf("--allowed without --effects: exit %d\n%s", code, stderr)
	}
}

// On PostgreSQL, as a team runs it: `--effects 'SELECT 1;'` on the naive
// redeem is not SAFE, and its EXPECTED reads "safe unproven"; the overdraft
// invariant alone proves the conditional withdraw SAFE and catches the
// naive one, named; --allowed 0 runs.
func TestOwnCodeVerdictsOnPostgres(t *testing.T) {
	if _, _, code := execCmd(t, false, "sql", "-b", "postgres", "--attempt", "SELECT 1;", "--effects", "SELECT 0;", "-n", "1", "--bursts", "1"); code == exitSetup {
		testenv.Unavailable(t, "postgres", nil)
	}
	dir := "../examples/redeem/scripts/"
	out, stderr, code := execCmd(t, false, "sql", "-b", "postgres", "--setup", "@"+dir+"schema.sql", "--subject", "@"+dir+"coupon.sql",
		"--attempt", "@"+dir+"naive.sql", "--effects", "SELECT 1;", "--teardown", "@"+dir+"drop.sql", "-n", "8", "--bursts", "20")
	if code != exitOK || strings.Contains(out, "SAFE") || !strings.Contains(out, "INCONCLUSIVE") || !strings.Contains(out, "safe unproven") ||
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
	if out, stderr, code := run(conditional); code != exitOK || !strings.Contains(out, "SAFE") || !strings.Contains(out, "0 of 30 tested bursts broke an invariant") {
		t.Errorf("conditional withdraw under the overdraft invariant: exit %d\n%s\n%s", code, out, stderr)
	}
	out, stderr, code = run(naive)
	if code != exitViolated || !strings.Contains(out, "RACE") || !strings.Contains(out, "invariant "+overdraft+" broken after") {
		t.Errorf("naive withdraw under the overdraft invariant: exit %d\n%s\n%s", code, out, stderr)
	}

	out, stderr, code = execCmd(t, false, "sql", "-b", "postgres", "--setup", "@"+dir+"schema.sql", "--subject", "@"+dir+"coupon.sql",
		"--attempt", "@"+dir+"conditional.sql", "--effects", "@"+dir+"count.sql", "--teardown", "@"+dir+"drop.sql", "-n", "4", "--bursts", "5",
		"--allowed", "0", "--expect", "race")
	if code != exitOK || !strings.Contains(out, "RACE") {
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
	if code != exitViolated || !strings.Contains(out, "LOST") || !strings.Contains(out, "its successes") {
		t.Errorf("a lost update under --allowed successes: exit %d\n%s\n%s", code, out, stderr)
	}
}

// Issue 42, item 8, on PostgreSQL: the docs' boolean invariant over a table
// with one old overdraft read false after every burst and said SAFE; it
// judged nothing, and says so (INCONCLUSIVE, exit 4 under --expect safe).
// On a clean table a naive withdraw breaks it and every later burst starts
// broken: RACE, its rate over the bursts it judged, not over all 30.
func TestBooleanInvariantBrokenBeforeOnPostgres(t *testing.T) {
	if _, _, code := execCmd(t, false, "sql", "-b", "postgres", "--attempt", "SELECT 1;", "--effects", "SELECT 0;", "-n", "1", "--bursts", "1"); code == exitSetup {
		testenv.Unavailable(t, "postgres", nil)
	}
	const (
		setup    = "CREATE TABLE acct_{{.RunID}} (id VARCHAR(64) PRIMARY KEY, balance INT NOT NULL);"
		old      = "INSERT INTO acct_{{.RunID}} (id, balance) VALUES ('old', -5);"
		subject  = "INSERT INTO acct_{{.RunID}} (id, balance) VALUES ('{{.Token}}', 1);"
		teardown = "DROP TABLE IF EXISTS acct_{{.RunID}};"
		naive    = "BEGIN;\nSELECT balance FROM acct_{{.RunID}} WHERE id = '{{.Token}}' \\gset\nSELECT pg_sleep(0.005);\n\\if :balance >= 1\n" +
			"UPDATE acct_{{.RunID}} SET balance = balance - 1 WHERE id = '{{.Token}}';\n\\else\n\\decline\n\\endif\nCOMMIT;\n"
		conditional = "UPDATE acct_{{.RunID}} SET balance = balance - 1 WHERE id = '{{.Token}}' AND balance >= 1;\n\\if :ROW_COUNT = 0\n\\decline\n\\endif\n"
		never       = "SELECT bool_and(balance >= 0) FROM acct_{{.RunID}}"
	)
	run := func(setup, attempt string, more ...string) (report.RunJSON, string, string, int) {
		t.Helper()
		out, stderr, code := execCmd(t, false, append([]string{"sql", "-b", "postgres", "--setup", setup, "--subject", subject, "--attempt", attempt,
			"--invariant", never, "--teardown", teardown, "-n", "8", "--bursts", "30", "-o", "json"}, more...)...)
		var doc report.Document
		if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Runs) != 1 {
			t.Fatalf("exit %d, not one run of JSON (%v):\n%s\n%s", code, err, out, stderr)
		}
		return doc.Runs[0], out, stderr, code
	}

	// An old overdraft, a correct withdraw: nothing judged.
	j, out, stderr, code := run(setup+"\n"+old, conditional, "--expect", "safe")
	why := "invariant " + never + " was already broken before 30 of 30 bursts: nothing it could judge"
	if code != exitInconclusive || j.Verdict != report.Inconclusive || !strings.Contains(j.Why, why) || j.Tested != 0 || j.Unjudged != 30 {
		t.Errorf("an old overdraft, --expect safe: exit %d, %s (tested %d, unjudged %d) %q; want exit 4, INCONCLUSIVE saying %q\n%s\n%s",
			code, j.Verdict, j.Tested, j.Unjudged, j.Why, why, out, stderr)
	}
	if !slices.Contains(j.Notes, "invariant "+never+": already broken before every burst (30), so it judged none: fix the data, or scope it to the burst's subject ({{.Token}} in a script)") {
		t.Errorf("notes %q do not say the invariant judged none", j.Notes)
	}

	// A clean table, a naive withdraw: RACE over the bursts it judged.
	j, out, stderr, code = run(setup, naive)
	judged := j.Bursts - j.Unjudged
	if code != exitViolated || j.Verdict != report.Race || j.Violations != 1 || j.Unjudged < 1 || judged < 1 ||
		j.ViolationRate != 1/float64(judged) {
		t.Errorf("a naive withdraw on a clean table: exit %d, %s, %d violations, rate %v over %d judged (%d unjudged); want RACE, 1 violation, its rate over the judged bursts\n%s\n%s",
			code, j.Verdict, j.Violations, j.ViolationRate, judged, j.Unjudged, out, stderr)
	}
}

// http --expect safe: a run that proved nothing (every request refused)
// fails it with exit 4; --allow-inconclusive lets it through (issue 42,
// item 10).
func TestHTTPExpectSafeFailsInconclusive(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNotFound) }))
	defer srv.Close()
	for _, tc := range []struct {
		flags []string
		code  int
	}{
		{nil, exitOK},
		{[]string{"--expect", "safe"}, exitInconclusive},
		{[]string{"--expect", "safe", "--allow-inconclusive"}, exitOK},
	} {
		out, errOut, code := execCmd(t, false, append([]string{"http", "POST", srv.URL + "/redeem", "-n", "4", "--bursts", "3", "--release", "barrier"}, tc.flags...)...)
		if code != tc.code || !strings.Contains(out, "INCONCLUSIVE") {
			t.Errorf("%q: exit %d, want %d on an INCONCLUSIVE:\n%s\n%s", tc.flags, code, tc.code, out, errOut)
		}
	}
}
