package cmd

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/racetest/racetest/internal/testenv"
)

// Bad input stops 'racetest sql' and 'racetest redis' with exit 2 and a
// message that says where and what; nothing reaches a server (the address
// below is never dialled: every case fails before it would be).
func TestScriptBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "redeem.sql")
	if err := os.WriteFile(bad, []byte("BEGIN;\nSELECT 1 AS used \\gset\n\\iff :used = 0\n\\endif\nCOMMIT;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unparsable := filepath.Join(dir, "broken.sql")
	if err := os.WriteFile(unparsable, []byte("SELECT 1;\nSELECT 'oops;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	noServer := []string{"--postgres-url", "postgres://nobody@127.0.0.1:1/x?connect_timeout=1", "--mysql-dsn", "nobody@tcp(127.0.0.1:1)/x", "--redis-url", "redis://127.0.0.1:1/0"}
	for name, tc := range map[string]struct {
		args []string
		want []string
	}{
		"unknown meta-command": {[]string{"sql", "-b", "postgres", "--attempt", "@" + bad, "--effects", "SELECT 1;"},
			[]string{bad + ":3:1: unknown meta-command \\iff", `supported: \gset, \if, \elif, \else, \endif, \sleep, \decline`}},
		"does not parse": {[]string{"sql", "-b", "mysql", "--attempt", "@" + unparsable, "--effects", "SELECT 1;"},
			[]string{unparsable + ":2:8: unterminated ' quote"}},
		"inline script": {[]string{"sql", "-b", "mysql", "--attempt", "SELECT 1\n\\sleep 1 ms", "--effects", "SELECT 1"},
			[]string{`--attempt:2:1: \sleep inside an unfinished statement (begun at line 1) — end the statement with ';' first`}},
		"no backend": {[]string{"sql", "--attempt", "SELECT 1;", "--effects", "SELECT 1;"},
			[]string{"racetest sql needs -b postgres or -b mysql"}},
		"wrong backend": {[]string{"sql", "-b", "redis", "--attempt", "SELECT 1;", "--effects", "SELECT 1;"},
			[]string{"racetest sql runs on postgres or mysql"}},
		"no effects": {[]string{"redis", "--attempt", "GET a"},
			[]string{"--effects is required", "or auto"}},
		"template field": {[]string{"sql", "-b", "postgres", "--setup", "CREATE TABLE t_{{.Token}} (a int);", "--attempt", "SELECT 1;", "--effects", "SELECT 1;"},
			[]string{"--setup:1:16: template:", "Token", "--setup knows {{.RunID}}"}},
		"missing file": {[]string{"redis", "--attempt", "@" + filepath.Join(dir, "nope.redis"), "--effects", "SCARD a"},
			[]string{"--attempt: cannot read the script", "nope.redis"}},
		"redis gset": {[]string{"redis", "--attempt", "GET a \\gset", "--effects", "SCARD a"},
			[]string{"--attempt:1:7: \\gset needs a variable name"}},
		"bad expect": {[]string{"redis", "--attempt", "GET a", "--effects", "SCARD a", "--expect", "sometimes"},
			[]string{"unknown expectation"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, stderr, code := execCmd(t, false, append(tc.args, noServer...)...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, exitUsage, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not say %q:\n%s", w, stderr)
				}
			}
		})
	}
}

// A server that cannot be reached is exit 3, before any banner.
func TestScriptUnreachableServer(t *testing.T) {
	_, stderr, code := execCmd(t, false, "redis", "--attempt", "GET a", "--effects", "SCARD a", "--redis-url", "redis://127.0.0.1:1/0")
	if code != exitSetup || !strings.Contains(stderr, "cannot connect to 127.0.0.1:1") || strings.Contains(stderr, "running your scripts") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
}

// Against a server: a template that leaves the subject empty, and a first
// burst whose statement fails in every attempt, are exit 2 with the line;
// the naive example is a RACE and the banner names what runs.
func TestScriptOnServers(t *testing.T) {
	if _, _, code := execCmd(t, false, "redis", "--attempt", "PING", "--effects", "DBSIZE", "--bursts", "1", "-n", "1"); code == exitSetup {
		testenv.Unavailable(t, "redis", nil)
	}
	_, stderr, code := execCmd(t, false, "redis", "--subject", "{{if false}}SET x{{end}}", "--attempt", "PING", "--effects", "EXISTS nothing:{{.Token}}", "-n", "2", "--bursts", "3")
	if code != exitUsage || !strings.Contains(stderr, "--subject:1:1") || !strings.Contains(stderr, "empty once its templates are expanded") {
		t.Errorf("empty subject: exit %d\n%s", code, stderr)
	}
	_, stderr, code = execCmd(t, false, "redis", "--attempt", "GET a:{{.Token}}\nHSET a:{{.Token}}\n", "--effects", "EXISTS a:{{.Token}}", "-n", "2", "--bursts", "3")
	if code != exitUsage || !strings.Contains(stderr, "every attempt (2 of 2) failed") || !strings.Contains(stderr, "--attempt:2:") {
		t.Errorf("failing statement: exit %d\n%s", code, stderr)
	}
	dir := "../examples/redeem/scripts/"
	out, stderr, code := execCmd(t, false, "redis", "--attempt", "@"+dir+"naive.redis", "--effects", "SCARD redeemed:{{.Token}}",
		"--teardown", "@"+dir+"drop.redis", "-n", "8", "--bursts", "30", "--expect", "race", "--release", "last-byte")
	if code != exitOK || !strings.Contains(out, "RACE") || !strings.Contains(out, "steps: 1 naive.redis:3") {
		t.Errorf("naive redis: exit %d\n%s\n%s", code, out, stderr)
	}
	for _, w := range []string{"running your scripts on Redis", "attempt   " + dir + "naive.redis (4 commands)", "creates and drops nothing of its own"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("banner does not say %q:\n%s", w, stderr)
		}
	}
	// The run id, before the first burst: a run killed outright says
	// nothing after it, and a --setup's names carry it.
	id := regexp.MustCompile(`run id    \{\{\.RunID\}\} = ([0-9a-f]{8}), \{\{\.Token\}\} = ([0-9a-f]{8})-<burst>\n`).FindStringSubmatch(stderr)
	if id == nil || id[1] != id[2] || strings.Index(stderr, id[0]) > strings.Index(stderr, "attempts released together") {
		t.Errorf("banner does not give the run id first:\n%s", stderr)
	}
}

// A suite's script cases build their own targets (no clone of the
// registry): the naive redeem races, the conditional one holds, each says
// on stderr what it runs.
func TestSuiteScriptCasesOnRedis(t *testing.T) {
	if _, _, code := execCmd(t, false, "redis", "--attempt", "PING", "--effects", "DBSIZE", "--bursts", "1", "-n", "1"); code == exitSetup {
		testenv.Unavailable(t, "redis", nil)
	}
	dir, err := filepath.Abs("../examples/redeem/scripts")
	if err != nil {
		t.Fatal(err)
	}
	file := writeSuite(t, fmt.Sprintf(`defaults: {attempts: 8, bursts: 30, connections: {redis: default}}
cases:
  - name: naive
    expect: race
    release: last-byte
    redis: {attempt: "@%[1]s/naive.redis", effects: "SCARD redeemed:{{.Token}}", teardown: "@%[1]s/drop.redis"}
  - name: conditional
    expect: safe
    redis: {attempt: "@%[1]s/conditional.redis", effects: "SCARD redeemed:{{.Token}}", teardown: "@%[1]s/drop.redis"}
`, dir))
	out, errOut, code := execSuite(t, memoryOnly(), nil, "suite", "--allow-inconclusive", file)
	if code != exitOK || !strings.Contains(out, "RACE") || !strings.Contains(out, "SAFE") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if n := strings.Count(errOut, "racetest: running scripts on Redis"); n != 2 {
		t.Errorf("%d banners, want one per case:\n%s", n, errOut)
	}
}
