package cmd

import (
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/scenarios/builtin"
)

// shellWords splits a command line as bash does, so that a Reproduce line
// is run exactly as a person who pastes it would run it.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash to read the Reproduce lines with")
	}
	out, err := exec.Command(bash, "-c", `printf '%s\0' `+line).Output()
	if err != nil {
		t.Fatalf("bash cannot read %s: %v", line, err)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
}

var reproduceLine = regexp.MustCompile(`(?m)^Reproduce: (.+)$`)

// reproduceLines runs racetest with args and returns the Reproduce lines
// of its JUnit report (written to file, or to stdout with -o junit).
func reproduceLines(t *testing.T, junit string, args ...string) []string {
	t.Helper()
	out, errOut, code := execWith(t, builtin.Registry(), args...)
	if code != exitOK {
		t.Fatalf("racetest %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	if junit != "" {
		out = string(readFile(t, junit))
	}
	var lines []string
	for _, m := range reproduceLine.FindAllStringSubmatch(out, -1) {
		lines = append(lines, m[1])
	}
	return lines
}

// Every Reproduce line of every kind of case runs as printed (issue 29): a
// built-in scenario, an HTTP case and a script case of a suite, and the
// http and sql verbs, each one met its expectation, and its line, pasted
// into a shell, runs it again and meets it again. A sql: case printed
// 'racetest run script', an unknown scenario; an HTTP case printed none.
func TestEveryReproduceLineRuns(t *testing.T) {
	srv := httptest.NewServer(&counter{writes: map[string]int{}})
	defer srv.Close()
	postgres := testenv.Set("postgres") || serverAnswers("127.0.0.1:5432")
	if !postgres && testenv.Required() {
		t.Fatal("no PostgreSQL: RACETEST_REQUIRE_SERVERS=1 requires it")
	}
	sqlCase := ""
	if postgres {
		sqlCase = `  - name: "naive insert, it's a race"
    backend: postgres
    connection: ${RACETEST_POSTGRES_URL:-default}
    expect: race
    sql:
      setup: "CREATE TABLE rt_repro_{{.RunID}} (token text);"
      attempt: |
        SELECT count(*) AS n FROM rt_repro_{{.RunID}} WHERE token = '{{.Token}}' \gset
        \if :n = 0
        \sleep 2 ms
        INSERT INTO rt_repro_{{.RunID}} VALUES ('{{.Token}}');
        \endif
      effects: "SELECT count(*) FROM rt_repro_{{.RunID}} WHERE token = '{{.Token}}';"
      teardown: "DROP TABLE rt_repro_{{.RunID}};"
`
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "my suite.yaml") // a space: the line must quote it
	src := fmt.Sprintf(`defaults: {attempts: 6, bursts: 8}
cases:
  - {name: "read; then write", scenario: check-then-write, expect: race}
  - name: the endpoint double-redeems
    expect: race
    http:
      url: "%s/?k={{.Token}}"
      method: POST
      effects: "http:%s/count?k={{.Token}}"
%s`, srv.URL, srv.URL, sqlCase)
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	junit := filepath.Join(dir, "r.xml")
	lines := reproduceLines(t, junit, "suite", file, "--junit", junit, "-q")
	want := 2
	if postgres {
		want = 3
	}
	lines = append(lines, reproduceLines(t, "", "http", "POST", srv.URL+"/?k={{.Token}}", "-n", "6", "--bursts", "8",
		"--effects", "http:"+srv.URL+"/count?k={{.Token}}", "--expect", "race", "-o", "junit")...)
	want++
	if postgres {
		lines = append(lines, reproduceLines(t, "", "sql", "-b", "postgres", "-n", "6", "--bursts", "8", "--expect", "race", "-o", "junit",
			"--setup", "CREATE TABLE rt_repro2_{{.RunID}} (token text);",
			"--attempt", "SELECT count(*) AS n FROM rt_repro2_{{.RunID}} WHERE token = '{{.Token}}' \\gset\n\\if :n = 0\n\\sleep 2 ms\nINSERT INTO rt_repro2_{{.RunID}} VALUES ('{{.Token}}');\n\\endif",
			"--effects", "SELECT count(*) FROM rt_repro2_{{.RunID}} WHERE token = '{{.Token}}';",
			"--teardown", "DROP TABLE rt_repro2_{{.RunID}};")...)
		want++
	}
	if len(lines) != want {
		t.Fatalf("%d Reproduce lines, want one per case (%d):\n%s", len(lines), want, strings.Join(lines, "\n"))
	}
	for _, line := range lines {
		words := shellWords(t, line)
		if words[0] != "racetest" {
			t.Errorf("%s: does not start with racetest", line)
			continue
		}
		out, errOut, code := execWith(t, builtin.Registry(), words[1:]...)
		if code != exitOK {
			t.Errorf("Reproduce: %s\nexit %d\n%s%s", line, code, out, errOut)
		}
	}
}

// serverAnswers reports whether something accepts connections at addr.
func serverAnswers(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
