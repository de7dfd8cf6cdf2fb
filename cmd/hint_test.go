package cmd

import (
	"context"
	"strings"
	"testing"

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
		io, _, errOut := Test()
		root := NewCmdRoot(&Factory{IO: io, Registry: builtin.Registry()})
		root.SetArgs(strings.Fields(args))
		c, err := root.ExecuteContextC(context.Background())
		printCommandError(io, err, c)
		if ExitCode(err) != ExitUsage || !strings.Contains(errOut.String(), want) {
			t.Errorf("racetest %s: exit %d, stderr %q, want %q", args, ExitCode(err), errOut, want)
		}
	}
}

// --engine is refused where the backend has no engines, instead of being
// reported as a setting nothing read; on mysql it is the backend's to judge.
func TestEngineOnlyWhereThereAreEngines(t *testing.T) {
	io, out, errOut := Test()
	code := execIO(t, io, builtin.Registry(), "run", "check-then-write", "-b", "postgres", "--engine", "myisam")
	if code != ExitUsage || out.Len() != 0 || !strings.Contains(errOut.String(), "the postgres backend has no storage engines") {
		t.Errorf("--engine on postgres: exit %d, out %q, err %q", code, out, errOut)
	}
	io, _, errOut = Test()
	code = execIO(t, io, builtin.Registry(), "demo", "-b", "memory", "--engine", "aria")
	if code != ExitUsage || !strings.Contains(errOut.String(), "the memory backend has no storage engines") {
		t.Errorf("--engine on memory: exit %d, err %q", code, errOut)
	}
}
