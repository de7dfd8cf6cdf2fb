package cmd

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/racetest/racetest/scenarios/builtin"
)

// runJSON runs racetest with env on test streams and returns its exit
// code, the decoded JSON report (when there is one) and stderr.
func runWithEnv(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	io, out, errOut := Test()
	io.Env = envOf(env)
	code := execIO(t, io, builtin.Registry(), args...)
	return code, out.String(), errOut.String()
}

func burstsOf(t *testing.T, out string) int {
	t.Helper()
	var doc struct {
		Runs []struct {
			Bursts int `json:"bursts"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Runs) != 1 {
		t.Fatalf("not a one-run JSON report (%v): %s", err, out)
	}
	return doc.Runs[0].Bursts
}

// RACETEST_<FLAG> sets a flag the command line did not give; the command
// line wins; a bad value is a usage error naming the variable, before
// anything runs.
func TestSettingsByEnvironment(t *testing.T) {
	args := []string{"run", "conditional-update", "-n", "2", "--latency", "0", "-o", "json"}
	code, out, errOut := runWithEnv(t, map[string]string{"RACETEST_BURSTS": "3"}, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got := burstsOf(t, out); got != 3 {
		t.Errorf("RACETEST_BURSTS=3 ran %d bursts", got)
	}
	code, out, errOut = runWithEnv(t, map[string]string{"RACETEST_BURSTS": "3"}, append(args, "--bursts", "2")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got := burstsOf(t, out); got != 2 {
		t.Errorf("--bursts 2 with RACETEST_BURSTS=3 ran %d bursts: the command line must win", got)
	}
	code, out, errOut = runWithEnv(t, map[string]string{"RACETEST_BURSTS": "many", "RACETEST_SEED": "x"}, args...)
	if code != ExitUsage {
		t.Fatalf("RACETEST_BURSTS=many: exit %d, want %d", code, ExitUsage)
	}
	// Flags in sorted order: --bursts is checked before --seed, always.
	if !strings.Contains(errOut, `RACETEST_BURSTS="many" is not a value for --bursts (it takes a whole number)`) {
		t.Errorf("the error does not name the first bad variable: %s", errOut)
	}
	if out != "" {
		t.Errorf("a refused setting still wrote a report: %s", out)
	}
}

// The connection flags keep their own variables and order: in a suite the
// environment comes after the file's defaults.connections, so the generic
// rule must not turn RACETEST_POSTGRES_URL into --postgres-url there.
func TestSettingsByEnvironmentLeaveConnectionsAlone(t *testing.T) {
	reg := builtin.Registry()
	root := NewCmdRoot(&Factory{IO: &IOStreams{}, Registry: reg})
	suite, _, err := root.Find([]string{"suite"})
	if err != nil {
		t.Fatal(err)
	}
	env := envOf(map[string]string{"RACETEST_POSTGRES_URL": "postgres://elsewhere/db", "RACETEST_STRICT": "true"})
	if err := applyEnv(suite, reg, env); err != nil {
		t.Fatal(err)
	}
	if f := suite.Flags().Lookup("postgres-url"); f.Changed || f.Value.String() != "" {
		t.Errorf("--postgres-url was set from the environment in a suite: %q", f.Value.String())
	}
	if f := suite.Flags().Lookup("strict"); !f.Changed || f.Value.String() != "true" {
		t.Errorf("RACETEST_STRICT=true did not set --strict: changed %v, %q", f.Changed, f.Value.String())
	}
}

// 'racetest help environment' lists each variable with its flag and the
// commands that have it, and leaves out the connection flags.
func TestHelpEnvironment(t *testing.T) {
	code, out, errOut := runWithEnv(t, nil, "help", "environment")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var bursts string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "RACETEST_BURSTS ") {
			bursts = line
		}
		if strings.HasPrefix(strings.TrimSpace(line), "RACETEST_POSTGRES_URL ") {
			t.Errorf("a connection flag is listed as a generic setting: %q", line)
		}
	}
	for _, want := range []string{"--bursts", "run", "sql", "http"} {
		if !strings.Contains(bursts, want) {
			t.Errorf("the RACETEST_BURSTS line %q lacks %q", bursts, want)
		}
	}
}
