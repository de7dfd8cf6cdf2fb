package cmd

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/racetest/racetest/scenarios/builtin"
)

// runJSON runs racetest with env on test streams and returns its exit
// code, the decoded JSON report (when there is one) and stderr.
func runWithEnv(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	io, out, errOut := testStreams()
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
	if code != exitUsage {
		t.Fatalf("RACETEST_BURSTS=many: exit %d, want %d", code, exitUsage)
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
	root := newCmdRoot(&factory{IO: &ioStreams{}, Registry: reg})
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

// A flag's check that refuses a value the environment gave names the
// variable: the command line has no --bursts to look at.
func TestEnvironmentValueRefusedNamesTheVariable(t *testing.T) {
	code, _, errOut := runWithEnv(t, map[string]string{"RACETEST_BURSTS": "-3"}, "run", "conditional-update")
	if code != exitUsage || !strings.Contains(errOut, `--bursts came from RACETEST_BURSTS="-3"`) {
		t.Errorf("RACETEST_BURSTS=-3: exit %d, %q; want %d naming the variable", code, errOut, exitUsage)
	}
	code, _, errOut = runWithEnv(t, nil, "run", "conditional-update", "--bursts", "-3")
	if code != exitUsage || strings.Contains(errOut, "RACETEST_") {
		t.Errorf("--bursts -3: exit %d, %q; want %d naming no variable", code, errOut, exitUsage)
	}
}

// A RACETEST_ variable racetest does not read is a warning on stderr, with
// the setting it may have meant; variables of racetest's tests and
// scripts, settings of other commands and other tools' variables are not.
func TestUnknownEnvironmentVariableWarns(t *testing.T) {
	io, out, errOut := testStreams()
	env := map[string]string{"RACETEST_BURST": "3", "RACETEST_REQUIRE_SERVERS": "1", "RACETEST_SOLO_EVERY": "2",
		"RACETEST_MONGO_URI": "mongodb://127.0.0.1:1/", "RACETEST_CLUSTER_DIR": "/tmp", "CI_RACETEST_X": "1", "GOFLAGS": "-race"}
	io.Env = envOf(env)
	io.Environ = func() []string {
		var kv []string
		for k, v := range env {
			kv = append(kv, k+"="+v)
		}
		return kv
	}
	code := execIO(t, io, builtin.Registry(), "run", "conditional-update", "-n", "2", "--bursts", "2", "--latency", "0", "-q")
	if code != exitOK {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	want := "racetest: warning: RACETEST_BURST is not a racetest setting (did you mean RACETEST_BURSTS?); it is ignored"
	if !strings.Contains(errOut.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, errOut)
	}
	if n := strings.Count(errOut.String(), "warning:"); n != 1 {
		t.Errorf("%d warnings, want the one of RACETEST_BURST:\n%s", n, errOut)
	}
}

// Every RACETEST_ variable the repository's code, scripts and documents
// name is one racetest knows, so that none of them draws the warning.
func TestEveryRacetestVariableIsKnown(t *testing.T) {
	root, reg := builtinRoot(t)
	known := map[string]bool{}
	for _, n := range knownEnv(root, reg) {
		known[n] = true
	}
	name := regexp.MustCompile(`\bRACETEST_[A-Z0-9_]*[A-Z0-9]\b`)
	found := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		ext := filepath.Ext(path)
		if strings.HasPrefix(d.Name(), "environment") && filepath.Base(filepath.Dir(path)) == "cmd" {
			return nil // the misspellings these tests show
		}
		if d.IsDir() || !(ext == ".go" || ext == ".sh" || ext == ".md" || ext == ".yaml" || ext == ".yml" || d.Name() == "run") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, n := range name.FindAllString(string(b), -1) {
			found++
			if known[n] || slices.ContainsFunc(otherEnvPrefixes, func(p string) bool { return strings.HasPrefix(n, p) }) {
				continue
			}
			t.Errorf("%s names %s, which racetest would warn of: a flag's variable, or one for otherEnv", path, n)
			known[n] = true // once
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < 50 {
		t.Fatalf("only %d names found: the walk lost them", found)
	}
}
