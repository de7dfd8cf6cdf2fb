package cmd

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/builtin"
)

// A usage error points at the help of the command that was run, where the
// flag that was wrong is described (issue 29: it pointed at the root's).
func TestUsageHintNamesTheCommand(t *testing.T) {
	for args, want := range map[string]string{
		"sql --bogus":                     "Run 'racetest sql --help' for usage.",
		"report merge":                    "Run 'racetest report merge --help' for usage.",
		"run check-then-write --bursts 0": "Run 'racetest run --help' for usage.",
		"nosuch":                          "Run 'racetest --help' for usage.",
	} {
		io, _, errOut := testStreams()
		root := newCmdRoot(&factory{IO: io, Registry: builtin.Registry()})
		root.SetArgs(strings.Fields(args))
		c, err := root.ExecuteContextC(context.Background())
		printCommandError(io, err, c)
		if exitCode(err) != exitUsage || !strings.Contains(errOut.String(), want) {
			t.Errorf("racetest %s: exit %d, stderr %q, want %q", args, exitCode(err), errOut, want)
		}
	}
}

// --engine is refused where the backend has no engines, instead of being
// reported as a setting nothing read; on mysql it is the backend's to judge.
func TestEngineOnlyWhereThereAreEngines(t *testing.T) {
	io, out, errOut := testStreams()
	code := execIO(t, io, builtin.Registry(), "run", "check-then-write", "-b", "postgres", "--engine", "myisam")
	if code != exitUsage || out.Len() != 0 || !strings.Contains(errOut.String(), "the postgres backend has no storage engines") {
		t.Errorf("--engine on postgres: exit %d, out %q, err %q", code, out, errOut)
	}
	io, _, errOut = testStreams()
	code = execIO(t, io, builtin.Registry(), "demo", "-b", "memory", "--engine", "aria")
	if code != exitUsage || !strings.Contains(errOut.String(), "the memory backend has no storage engines") {
		t.Errorf("--engine on memory: exit %d, err %q", code, errOut)
	}
}

// sql, redis and mongo refuse a burst this machine cannot hold before they
// connect, as run does (issue 29: -n 10000000 connected, then failed after
// 27 s with "too many clients").
func TestScriptVerbsCheckTheBurstFirst(t *testing.T) {
	for _, args := range [][]string{
		{"sql", "-b", "postgres", "--postgres-url", "postgres://nobody@127.0.0.1:9/x"},
		{"redis", "--redis-url", "redis://127.0.0.1:9"},
		{"mongo", "--mongo-uri", "mongodb://127.0.0.1:9/"},
	} {
		io, out, errOut := testStreams()
		args = append(args, "-n", "10000000", "--attempt", "SELECT 1;", "--effects", "SELECT 1;")
		start := time.Now()
		code := execIO(t, io, builtin.Registry(), args...)
		if code != exitUsage || out.Len() != 0 || !strings.Contains(errOut.String(), "cannot fit") {
			t.Errorf("%s -n 10000000: exit %d, err %q", args[0], code, errOut)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s took %s to refuse: did it connect first?", args[0], d)
		}
	}
}

// sql, redis and mongo take -q as run and http do: the verdict line alone,
// without the lines that say what will run (issue 29).
func TestScriptVerbsAreQuietWhenAsked(t *testing.T) {
	root := newCmdRoot(&factory{IO: &ioStreams{}, Registry: builtin.Registry()})
	for _, name := range []string{"sql", "redis", "mongo"} {
		c, _, err := root.Find([]string{name})
		if err != nil || c.Flags().ShorthandLookup("q") == nil || c.Flags().Lookup("verbose") == nil {
			t.Errorf("%s has no -q/-v (%v)", name, err)
		}
	}
}

// serve suggests an http command whose -n is the attempts it opened
// connections for (issue 29: it said -n 20 beside --workers 16, and the
// suggestion, run as printed, answered 500s).
func TestServeSuggestsItsOwnWorkers(t *testing.T) {
	for _, workers := range []int{16, 7} {
		var b strings.Builder
		printServeHelp(&b, "check-then-write on memory", "127.0.0.1:8080", scenarios.Params{RunID: "abc"}, workers)
		if want := fmt.Sprintf(" -n %d --release", workers); !strings.Contains(b.String(), want) {
			t.Errorf("--workers %d: the suggestion lacks %q:\n%s", workers, want, b.String())
		}
	}
}

// run --help and completion list the variants of every scenario, the
// isolation anomalies' too (issue 29: lost-update, write-skew and
// job-queue were missing from both).
func TestVariantsOfTheAnomaliesAreListed(t *testing.T) {
	reg := builtin.Registry()
	help := variantHelp(reg)
	for _, want := range []string{"lost-update: naive, atomic", "write-skew: ", "job-queue: "} {
		if !strings.Contains(help, want) {
			t.Errorf("--variant's help lacks %q: %s", want, help)
		}
	}
	for _, s := range []string{"lost-update", "write-skew", "job-queue"} {
		spec, err := reg.Scenario(s)
		if err != nil {
			t.Fatal(err)
		}
		io, out, _ := testStreams()
		execIO(t, io, reg, "__complete", "run", s, "--variant", "")
		for _, v := range spec.Variants {
			if !strings.Contains(out.String(), v+"\n") {
				t.Errorf("completing run %s --variant does not offer %s:\n%s", s, v, out)
			}
		}
	}
}

// A bad value given to http names the flag the user typed, never the
// suite's field that holds it (body_file for -d @FILE), and changes nothing:
// exit 2 before any request.
func TestHTTPErrorsNameTheFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-d", "@/dev/zero"}, "racetest: --data: /dev/zero is a character device"},
		{[]string{"-H", "bad"}, `racetest: --header: "bad" is not a header line`},
		{[]string{"--cookie", "x"}, `racetest: --cookie: "x" is not a cookie`},
		{[]string{"--setup", "::"}, `racetest: --setup: malformed URL "::"`},
	} {
		_, stderr, code := execCmd(t, false, append(append([]string{"http"}, c.args...), "http://127.0.0.1:9/")...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("http %s: exit %d, stderr %q; want exit %d and %q", strings.Join(c.args, " "), code, stderr, exitUsage, c.want)
		}
	}
	_, stderr, code := execCmd(t, false, "http", "http://%zz/")
	if code != exitUsage || !strings.HasPrefix(stderr, `racetest: malformed URL "http://%zz/"`) {
		t.Errorf("a bad URL: exit %d, stderr %q", code, stderr)
	}
}
