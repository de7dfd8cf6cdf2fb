package cmd

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/builtin"
	"github.com/racetest/racetest/scenarios/memstore"
	"github.com/racetest/racetest/scenarios/mongostore"
	"github.com/racetest/racetest/scenarios/mysqlstore"
	"github.com/racetest/racetest/scenarios/pgstore"
	"github.com/racetest/racetest/scenarios/redisstore"
)

// memoryOnly is the catalog on the embedded backend alone: these tests
// need no server.
func memoryOnly() *scenarios.Registry {
	r := testenv.Registry(memstore.Register)
	// The server backends without their scenarios: the commands' connection
	// flags are theirs.
	for _, b := range []scenarios.Backend{redisstore.Backend, mysqlstore.Backend, pgstore.Backend, mongostore.Backend} {
		r.AddBackend(b)
	}
	return r
}

// execCmd runs racetest with args on test streams and returns stdout,
// stderr and the exit code.
func execCmd(t *testing.T, tty bool, args ...string) (string, string, int) {
	t.Helper()
	io, out, errOut := testStreams()
	io.OutTTY, io.ErrTTY = tty, false
	code := execIO(t, io, memoryOnly(), args...)
	return out.String(), errOut.String(), code
}

func TestRunFlagsParse(t *testing.T) {
	f := &factory{IO: func() *ioStreams { io, _, _ := testStreams(); return io }(), Registry: memoryOnly()}
	var got *runOptions
	c := newCmdRun(f, func(_ context.Context, o *runOptions) error { got = o; return nil })
	c.SetArgs([]string{"check-then-write", "-n", "32", "--bursts", "7", "--replicas", "3", "--gap", "2ms",
		"--expect", "race", "-o", "json", "--isolation", "serializable", "--latency", "0", "--keep"})
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	s := got.Shape
	if got.Scenario != "check-then-write" || s.Attempts != 32 || s.Bursts != 7 || s.Replicas != 3 ||
		s.Gap != 2*time.Millisecond || got.Expect != "race" || got.Format != "json" ||
		s.Isolation != "serializable" || s.Latency != 0 || !s.Keep || got.Backend != "memory" {
		t.Errorf("parsed options = %+v", got)
	}
}

func TestRunDefaults(t *testing.T) {
	f := &factory{IO: func() *ioStreams { io, _, _ := testStreams(); return io }(), Registry: memoryOnly()}
	var got *runOptions
	c := newCmdRun(f, func(_ context.Context, o *runOptions) error { got = o; return nil })
	c.SetArgs([]string{"unique-insert"})
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Shape.Attempts != 16 || got.Shape.Bursts != 100 || got.Shape.Latency != scenarios.DefaultLatency ||
		got.Expect != "safe" || got.Format != "table" {
		t.Errorf("defaults = %+v", got)
	}
}

func TestBadInputIsAUsageError(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "check-then-wrte"}, `did you mean "check-then-write"`},
		{[]string{"run", "check-then-write", "--backend", "memry"}, `did you mean "memory"`},
		{[]string{"run", "check-then-write", "-n", "0"}, "--attempts must be at least 1"},
		{[]string{"run", "check-then-write", "--bursts", "0"}, "--bursts must be at least 1"},
		{[]string{"run", "check-then-write", "--replicas", "0"}, "--replicas must be at least 1"},
		{[]string{"run", "check-then-write", "--gap", "-1ms"}, "--gap cannot be negative"},
		{[]string{"run", "check-then-write", "--format", "xml"}, `unknown format "xml"`},
		{[]string{"run", "check-then-write", "--expect", "maybe"}, `unknown expectation "maybe" (want safe, race, lost, max=N, range=MIN-MAX, or catalog`},
		{[]string{"run", "check-then-write", "-n", "many"}, "invalid argument"},
		{[]string{"run"}, "run takes one scenario"},
		{[]string{"explain", "nope"}, `unknown scenario "nope"`},
		{[]string{"frobnicate"}, "unknown command"},
		{[]string{"run", "check-then-write", "--deploy"}, "--waves 2"},
		{[]string{"run", "check-then-write", "--release", "sideways"}, "--release"},
		{[]string{"run", "check-then-write", "--variant", "sideways"}, `no variant "sideways"`},
		{[]string{"run", "check-then-write", "--isolation", "serializable"}, "no transactions and no isolation levels"},
		{[]string{"run", "check-then-write", "--isolation", "repeatable-read"}, "--backend mysql or --backend postgres"},
		{[]string{"run", "check-then-write", "--retry", "3"}, "--retry retries deadlocks and serialization failures"},
		{[]string{"run", "check-then-write", "--retry", "-1"}, "--retry cannot be negative"},
	} {
		out, errOut, code := execCmd(t, false, c.args...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want %d (stderr %q)", c.args, code, exitUsage, errOut)
		}
		if !strings.Contains(errOut, c.want) {
			t.Errorf("%v: stderr %q does not say %q", c.args, errOut, c.want)
		}
		if out != "" {
			t.Errorf("%v: wrote %q to stdout; nothing should run", c.args, out)
		}
	}
}

func TestRunExitCodes(t *testing.T) {
	// check-then-write races: expecting safe fails (1), expecting race passes (0).
	_, errOut, code := execCmd(t, false, "run", "check-then-write", "-n", "4", "--bursts", "20")
	if code != exitViolated || !strings.Contains(errOut, "did not meet") {
		t.Errorf("expect safe on a race: exit %d, stderr %q; want %d", code, errOut, exitViolated)
	}
	if _, errOut, code := execCmd(t, false, "run", "check-then-write", "-n", "4", "--bursts", "20", "--expect", "race"); code != exitOK {
		t.Errorf("expect race on a race: exit %d, stderr %q; want 0", code, errOut)
	}
	// One attempt per burst can never overlap: INCONCLUSIVE, which only --strict fails.
	if _, _, code := execCmd(t, false, "run", "unique-insert", "-n", "1", "--bursts", "5"); code != exitOK {
		t.Errorf("inconclusive without --strict: exit %d, want 0", code)
	}
	if _, _, code := execCmd(t, false, "run", "unique-insert", "-n", "1", "--bursts", "5", "--strict"); code != exitInconclusive {
		t.Errorf("inconclusive with --strict: exit %d, want %d", code, exitInconclusive)
	}
}

func TestRunTableOnTerminalAndInPipe(t *testing.T) {
	tty, _, _ := execCmd(t, true, "run", "check-then-write", "-n", "4", "--bursts", "10", "--expect", "race")
	pipe, _, _ := execCmd(t, false, "run", "check-then-write", "-n", "4", "--bursts", "10", "--expect", "race")
	if !strings.Contains(tty, "\x1b[") {
		t.Error("terminal output has no colour")
	}
	if strings.Contains(pipe, "\x1b[") {
		t.Error("piped output contains ANSI escapes")
	}
	for _, want := range []string{"CASE", "check-then-write", "RACE", "timeline of burst", "race ok"} {
		if !strings.Contains(pipe, want) {
			t.Errorf("piped output lacks %q:\n%s", want, pipe)
		}
	}
}

func TestRunJSON(t *testing.T) {
	out, _, code := execCmd(t, false, "run", "conditional-update", "-n", "4", "--bursts", "10", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	var doc report.Document
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	r := doc.Runs[0]
	if doc.Schema != report.SchemaVersion || r.Verdict != report.Safe || r.Bursts != 10 || r.Effects.Max != 1 ||
		r.Outcomes["executed"] != 10 || r.Outcomes["declined"] != 30 || !r.ExpectationMet {
		t.Errorf("json run = %+v", r)
	}
}

func TestDemoIsASelfTest(t *testing.T) {
	out, errOut, code := execCmd(t, false, "demo", "--bursts", "20")
	if code != exitOK {
		t.Fatalf("demo exit %d:\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"memory-set (3 replicas)", "check-then-write", "conditional-update", "unique-insert", "ttl-lease", "Lessons"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	if strings.Count(out, "FAILED") > 0 {
		t.Errorf("demo has a failed expectation:\n%s", out)
	}
}

func TestListAndExplain(t *testing.T) {
	out, _, code := execCmd(t, false, "list")
	if code != 0 || !strings.Contains(out, "ttl-lease") || !strings.Contains(out, "memory") {
		t.Errorf("list: exit %d\n%s", code, out)
	}
	out, _, code = execCmd(t, false, "explain", "check-then-write")
	if code != 0 || !strings.Contains(out, "Why it breaks") || !strings.Contains(out, "SELECT") {
		t.Errorf("explain: exit %d\n%s", code, out)
	}
	out, _, code = execCmd(t, false, "version")
	if code != 0 || !strings.HasPrefix(out, "racetest ") {
		t.Errorf("version: exit %d %q", code, out)
	}
	out, _, code = execCmd(t, false, "completion", "bash")
	if code != 0 || !strings.Contains(out, "racetest") {
		t.Errorf("completion: exit %d", code)
	}
}

func TestInterruptedRunExits130(t *testing.T) {
	io, out, _ := testStreams()
	f := &factory{IO: io, Registry: memoryOnly()}
	root := newCmdRoot(f)
	root.SetArgs([]string{"run", "check-then-write", "--bursts", "1000000", "--expect", "race"})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	err := root.ExecuteContext(ctx)
	if code := exitCode(err); code != exitInterrupted {
		t.Fatalf("exit %d (err %v), want %d", code, err, exitInterrupted)
	}
	if !strings.Contains(out.String(), "interrupted after") {
		t.Errorf("the report does not say what finished:\n%s", out)
	}
}

func TestReleaseFallsBackLoudly(t *testing.T) {
	out, errOut, code := execCmd(t, false, "run", "check-then-write", "-n", "4", "--bursts", "5", "--expect", "race", "--release", "last-byte", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "warning") || !strings.Contains(errOut, "gate") {
		t.Errorf("no warning that memory falls back to the gate: %q", errOut)
	}
	var doc report.Document
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Runs[0].Release != "gate" || !strings.Contains(strings.Join(doc.Runs[0].Notes, "\n"), "gate") {
		t.Errorf("report says release %q, notes %q; want the gate, said in a note", doc.Runs[0].Release, doc.Runs[0].Notes)
	}
}

func TestUnreachableServerIsASetupError(t *testing.T) {
	io, out, errOut := testStreams()
	f := &factory{IO: io, Registry: builtin.Registry()}
	root := newCmdRoot(f)
	root.SetArgs([]string{"run", "unique-insert", "-b", "mysql", "--mysql-dsn", "root:s3cret@tcp(127.0.0.1:1)/test"})
	err := root.ExecuteContext(context.Background())
	printError(io, err)
	if code := exitCode(err); code != exitSetup {
		t.Fatalf("exit %d, want %d: %v", code, exitSetup, err)
	}
	if out.Len() != 0 {
		t.Errorf("nothing ran, yet stdout has %q", out.String())
	}
	if msg := errOut.String(); !strings.Contains(msg, "127.0.0.1:1") || !strings.Contains(msg, "--mysql-dsn") || strings.Contains(msg, "s3cret") {
		t.Errorf("stderr should name the address and the flag, never the password: %q", msg)
	}
}
