package cmd

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/scenarios/builtin"
)

// secretPostgresURL is the test server's URL with one distinctive
// password in it (the server trusts local connections, so any password
// connects), and that password.
func secretPostgresURL(t *testing.T) (string, string) {
	t.Helper()
	raw := testenv.Conn("postgres")
	if raw == "" {
		if !serverAnswers("127.0.0.1:5432") {
			testenv.Unavailable(t, "postgres", errors.New("nothing answers at 127.0.0.1:5432"))
		}
		raw = "postgres://postgres@127.0.0.1:5432/test"
	}
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		t.Skipf("RACETEST_POSTGRES_URL is no URL with a user: %v", err)
	}
	if pw, ok := u.User.Password(); ok {
		if len(pw) < 8 {
			t.Skipf("RACETEST_POSTGRES_URL has a password too short to look for in the output")
		}
		return raw, pw
	}
	const pw = "S3cr3tPw0rd"
	u.User = url.UserPassword(u.User.Username(), pw)
	return u.String(), pw
}

// No verb prints the password given in a connection flag or its
// RACETEST_* variable, in any format, on stdout or stderr (issue 42,
// item 9: explore and replay printed it in every replay command, four
// times in the table). Each verb runs a case that breaks, so that its
// Reproduce or replay lines are printed (table and json print no
// Reproduce line for run, sql, http and suite).
func TestNoVerbPrintsThePassword(t *testing.T) {
	pgURL, pw := secretPostgresURL(t)
	srv := httptest.NewServer(&counter{writes: map[string]int{}})
	defer srv.Close()
	dir := t.TempDir()
	suiteFile := filepath.Join(dir, "suite.yaml")
	suite := fmt.Sprintf(`defaults: {attempts: 4, bursts: 5}
cases:
  - {name: read then write, scenario: check-then-write, backend: postgres, connection: %q, expect: safe}
  - name: naive script
    backend: postgres
    connection: %q
    expect: safe
    sql:
      setup: "CREATE TABLE rt_pw_{{.RunID}} (token text);"
      attempt: |
        SELECT count(*) AS n FROM rt_pw_{{.RunID}} WHERE token = '{{.Token}}' \gset
        \if :n = 0
        \sleep 2 ms
        INSERT INTO rt_pw_{{.RunID}} VALUES ('{{.Token}}');
        \endif
      effects: "SELECT count(*) FROM rt_pw_{{.RunID}} WHERE token = '{{.Token}}';"
      teardown: "DROP TABLE rt_pw_{{.RunID}};"
`, pgURL, pgURL)
	if err := os.WriteFile(suiteFile, []byte(suite), 0o600); err != nil {
		t.Fatal(err)
	}
	script := []string{"--setup", "CREATE TABLE rt_pw_{{.RunID}} (token text);",
		"--attempt", "SELECT count(*) AS n FROM rt_pw_{{.RunID}} WHERE token = '{{.Token}}' \\gset\n\\if :n = 0\nINSERT INTO rt_pw_{{.RunID}} VALUES ('{{.Token}}');\n\\endif",
		"--effects", "SELECT count(*) FROM rt_pw_{{.RunID}} WHERE token = '{{.Token}}';",
		"--teardown", "DROP TABLE rt_pw_{{.RunID}};"}
	verbs := map[string][]string{
		"run":         {"run", "check-then-write", "-b", "postgres", "-n", "4", "--bursts", "5"},
		"sql":         append([]string{"sql", "-b", "postgres", "-n", "4", "--bursts", "5"}, script...),
		"http":        {"http", "POST", srv.URL + "/?k={{.Token}}", "-n", "4", "--bursts", "5", "--effects", "http:" + srv.URL + "/count?k={{.Token}}"},
		"explore":     {"explore", "check-then-write", "-b", "postgres"},
		"explore sql": append([]string{"explore", "sql", "-b", "postgres"}, script...),
		"replay":      {"replay", "check-then-write", "-b", "postgres", "--schedule", "A1 B1 A2 B2"},
		"replay sql":  append([]string{"replay", "sql", "-b", "postgres", "--schedule", "A1 B1 A2 B2"}, script...),
		"suite":       {"suite", suiteFile},
	}
	for name, args := range verbs {
		for _, format := range report.Formats() {
			for _, via := range []string{"flag", "env"} {
				if via == "env" && format != "table" {
					continue // the variable reaches the same flag: once is enough
				}
				argv := append(append([]string(nil), args...), "-o", format)
				if via == "flag" && name != "suite" {
					argv = append(argv, "--postgres-url", pgURL)
				} else {
					t.Setenv("RACETEST_POSTGRES_URL", pgURL)
				}
				out, errOut, code := execWith(t, builtin.Registry(), argv...)
				if code == exitSetup || code == exitUsage {
					t.Errorf("%s -o %s (%s): exit %d, want a run that reports\n%s%s", name, format, via, code, out, errOut)
					continue
				}
				if strings.Contains(out+errOut, pw) {
					t.Errorf("%s -o %s (%s): the password %s is printed:\n%s%s", name, format, via, pw, out, errOut)
				}
				if via == "flag" && format == "table" && (strings.HasPrefix(name, "explore") || strings.HasPrefix(name, "replay")) &&
					!strings.Contains(strings.Join(strings.Fields(out), " "), "leave out --postgres-url, which may hold a password") {
					t.Errorf("%s: no note that the replay commands leave out --postgres-url:\n%s", name, out)
				}
				echoes := strings.HasPrefix(name, "explore") || strings.HasPrefix(name, "replay") || format == "junit" || format == "markdown"
				if echoes && !strings.Contains(out, "racetest ") {
					t.Errorf("%s -o %s (%s): no command line echoed, so nothing was checked:\n%s%s", name, format, via, out, errOut)
				}
			}
		}
	}
}
