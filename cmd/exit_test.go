package cmd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/builtin"
)

// TestExitNumbers pins the documented exit codes literally: scripts and CI
// configurations test these numbers, so a renumbering is a breaking change.
func TestExitNumbers(t *testing.T) {
	for got, want := range map[int]int{exitOK: 0, exitViolated: 1, exitUsage: 2, exitSetup: 3, exitInconclusive: 4, exitInterrupted: 130} {
		if got != want {
			t.Errorf("exit code %d, documented as %d", got, want)
		}
	}
	for err, want := range map[error]int{
		nil:                               0,
		&exitError{code: 1}:               1,
		usageErrorf("bad"):                2,
		setupError(errors.New("down")):    3,
		&exitError{code: 4}:               4,
		context.Canceled:                  130,
		errors.New("cobra: unknown flag"): 2,
	} {
		if got := exitCode(err); got != want {
			t.Errorf("ExitCode(%v) = %d, want %d", err, got, want)
		}
	}
}

// scripted is a target whose bursts end as its verdict says, so that each
// verdict can meet each expectation: "safe" (one executes, the rest are
// declined), "race" (all execute), "lost" (all told "already done", none
// executes), "inconclusive" (every attempt times out).
type scripted struct{ verdict string }

func (s scripted) Prepare(context.Context) error { return nil }
func (s scripted) Cleanup(context.Context) error { return nil }
func (s scripted) Open(context.Context, int, int) (runner.App, error) {
	return s, nil
}
func (s scripted) Session(context.Context, int) (runner.Session, error) { return s, nil }
func (s scripted) Close() error                                         { return nil }
func (s scripted) Reset(_ context.Context, burst int) (runner.Subject, error) {
	return runner.Subject{Burst: burst, Key: fmt.Sprint(burst), Data: new(int32)}, nil
}
func (s scripted) Attempt(ctx context.Context, subj runner.Subject, w *runner.Worker) runner.Outcome {
	w.Mark("act")
	// Long enough for the attempts to overlap on a loaded machine.
	time.Sleep(3 * time.Millisecond)
	switch s.verdict {
	case "race":
		return runner.Done()
	case "lost":
		return runner.Refused(errors.New("already done"))
	case "inconclusive":
		return runner.Failed(runner.ErrTimeout)
	}
	if w.ID == 0 {
		return runner.Done()
	}
	return runner.Refused(errors.New("already done"))
}
func (s scripted) Effects(context.Context, runner.Subject) (int, error) {
	switch s.verdict {
	case "race":
		return 4, nil
	case "safe":
		return 1, nil
	}
	return 0, nil
}

var scriptedVerdicts = []string{"safe", "race", "lost", "inconclusive"}

// scriptedRegistry has one scenario per verdict, "v-safe" …, each in the
// demo with the catalog expectation given by expect.
func scriptedRegistry(expect scenarios.Expectation) *scenarios.Registry {
	r := scenarios.NewRegistry()
	r.AddBackend(scenarios.Backend{Name: "memory"})
	for _, v := range scriptedVerdicts {
		r.AddScenario(scenarios.Spec{Name: "v-" + v, Lesson: v, Demo: []scenarios.DemoCase{{}},
			Expect: func(scenarios.Params) scenarios.Expectation { return expect }})
		r.Register("v-"+v, "memory", func(context.Context, scenarios.Params) (runner.Target, error) { return scripted{v}, nil })
	}
	return r
}

func execWith(t *testing.T, reg *scenarios.Registry, args ...string) (string, string, int) {
	t.Helper()
	io, out, errOut := testStreams()
	code := execIO(t, io, reg, args...)
	return out.String(), errOut.String(), code
}

// exitMatrix is every verdict × expectation × strict → exit code, for run
// and suite; demo and http check the rows their expectations can express.
// "plain" lets INCONCLUSIVE through (no proof asked: demo, a suite's
// --allow-inconclusive, run's --allow-inconclusive); run and http given
// --expect safe ask for proof and take the --strict column (exitModes).
var exitMatrix = map[string]map[string][2]int{ // verdict → expectation → [plain, --strict]
	"safe":         {"safe": {0, 0}, "race": {1, 1}, "lost": {1, 1}, "max=1": {0, 0}, "range=1-1": {0, 0}},
	"race":         {"safe": {1, 1}, "race": {0, 0}, "lost": {1, 1}, "max=1": {1, 1}, "range=0-4": {0, 0}},
	"lost":         {"safe": {1, 1}, "race": {1, 1}, "lost": {0, 0}, "max=1": {1, 1}, "range=1-1": {1, 1}},
	"inconclusive": {"safe": {0, 4}, "race": {1, 1}, "lost": {1, 1}, "max=1": {0, 4}, "range=0-1": {0, 4}},
}

// exitReason is what stderr must say for a non-zero exit.
var exitReason = map[int]string{1: "did not meet their expectation", 4: "inconclusive"}

// exitModes are the ways run and http are given an expectation exp, with
// the column of exitMatrix each takes: --expect safe asks for proof, so an
// INCONCLUSIVE fails it as --strict does (issue 42, item 10), unless
// --allow-inconclusive; --strict fails it whatever.
func exitModes(exp string) []struct {
	flags  []string
	column int
} {
	proof := 0
	if exp == "safe" {
		proof = 1
	}
	return []struct {
		flags  []string
		column int
	}{{nil, proof}, {[]string{"--strict"}, 1}, {[]string{"--allow-inconclusive"}, 0}, {[]string{"--allow-inconclusive", "--strict"}, 1}}
}

func TestRunExitMatrix(t *testing.T) {
	reg := scriptedRegistry(scenarios.ExpectSafe)
	for v, row := range exitMatrix {
		for exp, codes := range row {
			for _, mode := range exitModes(exp) {
				args := append([]string{"run", "v-" + v, "-n", "4", "--bursts", "4", "--expect", exp}, mode.flags...)
				out, errOut, code := execWith(t, reg, args...)
				if code != codes[mode.column] {
					t.Errorf("%s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, codes[mode.column], out, errOut)
				}
				if r := exitReason[code]; r != "" && !strings.Contains(errOut, r) {
					t.Errorf("%s: exit %d, stderr %q does not say %q", strings.Join(args, " "), code, errOut, r)
				}
			}
		}
	}
}

func TestDemoExitMatrix(t *testing.T) {
	for _, exp := range []scenarios.Expectation{scenarios.ExpectSafe, scenarios.ExpectRace, scenarios.ExpectLost} {
		reg := scriptedRegistry(exp)
		for _, v := range scriptedVerdicts {
			// demo runs every scenario: keep one, the verdict under test.
			one := scenarios.NewRegistry()
			one.AddBackend(scenarios.Backend{Name: "memory"})
			spec, _ := reg.Scenario("v-" + v)
			one.AddScenario(spec)
			f, _ := reg.Factory("v-"+v, "memory")
			one.Register(spec.Name, "memory", f)
			for i, strict := range []bool{false, true} {
				args := []string{"demo", "-n", "4", "--bursts", "4"}
				if strict {
					args = append(args, "--strict")
				}
				_, errOut, code := execWith(t, one, args...)
				if want := exitMatrix[v][string(exp)][i]; code != want {
					t.Errorf("demo of a %s run, catalog expects %s, strict %v: exit %d, want %d (%s)", v, exp, strict, code, want, errOut)
				}
			}
		}
	}
}

func TestSuiteExitMatrix(t *testing.T) {
	reg := scriptedRegistry(scenarios.ExpectSafe)
	dir := t.TempDir()
	for v, row := range exitMatrix {
		for exp, codes := range row {
			key := "expect: " + exp
			if m, ok := strings.CutPrefix(exp, "max="); ok {
				key = "max_effects: " + m
			} else if strings.HasPrefix(exp, "range=") {
				continue // suites state a range through allowed: (HTTP cases)
			}
			file := filepath.Join(dir, v+"-"+exp+".yaml")
			yaml := fmt.Sprintf("defaults: {attempts: 4, bursts: 4}\ncases:\n  - scenario: v-%s\n    %s\n", v, key)
			if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			// A suite is a gate: INCONCLUSIVE fails it by default, unless allowed.
			want := codes[1]
			if _, errOut, code := execWith(t, reg, "suite", file); code != want {
				t.Errorf("suite, %s run, %s: exit %d, want %d (%s)", v, key, code, want, errOut)
			}
			if _, errOut, code := execWith(t, reg, "suite", "--allow-inconclusive", file); code != codes[0] {
				t.Errorf("suite --allow-inconclusive, %s run, %s: exit %d, want %d (%s)", v, key, code, codes[0], errOut)
			}
		}
	}
}

// verdictServer answers /safe (the first request per code 200, the rest 409),
// /race (200 to all), /lost (409 to all: "already done", never done) and
// /inconclusive (404 to all: a typo'd path).
func verdictServer(t *testing.T) *httptest.Server {
	var mu sync.Mutex
	taken := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(3 * time.Millisecond) // the attempts overlap
		code := r.URL.Query().Get("code")
		switch r.URL.Path {
		case "/safe":
			mu.Lock()
			first := !taken[code]
			taken[code] = true
			mu.Unlock()
			if !first {
				w.WriteHeader(http.StatusConflict)
			}
		case "/race":
		case "/lost":
			w.WriteHeader(http.StatusConflict)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestHTTPExitMatrix(t *testing.T) {
	srv := verdictServer(t)
	for v, row := range exitMatrix {
		for exp, codes := range row {
			for _, mode := range exitModes(exp) {
				args := append([]string{"http", "POST", srv.URL + "/" + v + "?code={{.Token}}", "-n", "4", "--bursts", "4", "--expect", exp}, mode.flags...)
				out, errOut, code := execWith(t, memoryOnly(), args...)
				if code != codes[mode.column] {
					t.Errorf("%s: exit %d, want %d\n%s%s", strings.Join(args[2:], " "), code, codes[mode.column], out, errOut)
				}
				if r := exitReason[code]; r != "" && !strings.Contains(errOut, r) {
					t.Errorf("%s: exit %d, stderr %q does not say %q", strings.Join(args[2:], " "), code, errOut, r)
				}
			}
		}
	}
	// --allowed MIN-MAX: at most once, zero allowed: the /lost endpoint passes.
	if _, errOut, code := execWith(t, memoryOnly(), "http", "POST", srv.URL+"/lost?code={{.Token}}", "-n", "4", "--bursts", "4", "--allowed", "0-1"); code != 0 {
		t.Errorf("--allowed 0-1 on no effect: exit %d (%s)", code, errOut)
	}
	if _, errOut, code := execWith(t, memoryOnly(), "http", "POST", srv.URL+"/race?code={{.Token}}", "-n", "4", "--bursts", "4", "--allowed", "1-3"); code != 1 {
		t.Errorf("--allowed 1-3 on 4 effects: exit %d (%s)", code, errOut)
	}
	// The one-line reason of an all-404 run.
	out, _, _ := execWith(t, memoryOnly(), "http", "POST", srv.URL+"/inconclusive?code={{.Token}}", "-n", "4", "--bursts", "4")
	if !strings.Contains(out, "0 of 4 bursts executed anything: no request succeeded: 404 ×16 — is the URL right? does each burst need --setup?") {
		t.Errorf("all-404 run does not say why:\n%s", out)
	}
}

// ferret is a scripted target that names its server.
type ferret struct{ scripted }

func (ferret) Server() string { return "FerretDB 1.24.2 (MongoDB 7.0.42 wire)" }

// demo -b mongo on FerretDB: conditional-update races there, as the
// catalog's table knows; the demo passes and says why (issue 10 §4).
func TestDemoKnowsTheServer(t *testing.T) {
	reg := scenarios.NewRegistry()
	reg.AddBackend(scenarios.Backend{Name: "mongo", Server: true})
	for _, s := range scenarios.Core() {
		if s.Name == scenarios.ConditionalUpdate {
			reg.AddScenario(s)
		}
	}
	reg.Register(scenarios.ConditionalUpdate, "mongo", func(context.Context, scenarios.Params) (runner.Target, error) {
		return ferret{scripted{"race"}}, nil
	})
	out, errOut, code := execWith(t, reg, "demo", "-b", "mongo", "-n", "4", "--bursts", "4")
	if code != 0 {
		t.Errorf("demo on FerretDB: exit %d, want 0\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "race ok") || !strings.Contains(out, "FerretDB 1.x runs findAndModify as read-modify-replace") {
		t.Errorf("the demo does not expect RACE on FerretDB with the reason:\n%s", out)
	}
	if !strings.Contains(out, "server: FerretDB 1.24.2") {
		t.Errorf("the table does not name the server:\n%s", out)
	}
}

// A run that leaves a scenario's variant to its default names the variant
// that ran (issue 10 §6). Whether 2 bursts of 2 attempts happen to race is
// beside the point (on a loaded machine they sometimes do not, and the run
// then exits 1): the report of a run that ran must name the variant.
func TestDefaultedVariantIsNamed(t *testing.T) {
	out, errOut, code := execWith(t, builtin.Registry(), "run", "reward-payout", "-n", "2", "--bursts", "2", "--expect", "race", "-o", "json")
	if code != exitOK && code != exitViolated {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, `"variant": "check-then-pay"`) {
		t.Errorf("the report does not name the default variant:\n%s", out)
	}
}

// On the embedded backend each process holds a private store: three
// effects across three processes are not a race, so the run is refused
// (issue 10 §5).
func TestProcessesOnMemoryRefused(t *testing.T) {
	for _, sc := range []string{"unique-insert", "conditional-update", "check-then-write", "ttl-lease"} {
		out, errOut, code := execCmd(t, false, "run", sc, "--replicas", "3", "--processes", "-n", "3", "--bursts", "2")
		if code != exitUsage || !strings.Contains(errOut, "private store") || out != "" {
			t.Errorf("%s --replicas 3 --processes on memory: exit %d, stdout %q, stderr %q; want exit 2 with the reason", sc, code, out, errOut)
		}
	}
}

// Every "Reproduce:" line a suite's JUnit and Markdown reports print is a
// command 'racetest run' parses (issue 10 §6: a prove: case printed
// --prove, a flag run does not have).
func TestReproduceLinesParse(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "s.yaml")
	yaml := `defaults: {attempts: 3, bursts: 3}
cases:
  - {scenario: conditional-update, prove: 50%}
  - {scenario: memory-set, replicas: 3, waves: 2, deploy: true, max_effects: 1, gap: 1ms}
  - {scenario: ttl-lease, ttl: 20ms, timeout: 2s, expect: race}
  - {scenario: reward-payout, variant: swallow-errors, expect: safe, seed: 7}
`
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	junit, md := filepath.Join(dir, "r.xml"), filepath.Join(dir, "r.md")
	execWith(t, builtin.Registry(), "suite", "--junit", junit, "--markdown", md, file)
	var lines []string
	for _, f := range []string{junit, md} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if _, cmd, ok := strings.Cut(l, "Reproduce: "); ok {
				lines = append(lines, strings.Trim(cmd, "`"))
			}
		}
	}
	if len(lines) < 4 {
		t.Fatalf("only %d Reproduce lines in the reports: %q", len(lines), lines)
	}
	for _, l := range lines {
		args := strings.Fields(l)
		if len(args) < 3 || args[0] != "racetest" || args[1] != "run" {
			t.Errorf("%q is not a racetest run command", l)
			continue
		}
		io, _, _ := testStreams()
		var got *runOptions
		c := newCmdRun(&factory{IO: io, Registry: builtin.Registry()}, func(_ context.Context, o *runOptions) error { got = o; return nil })
		c.SetArgs(args[2:])
		c.SetOut(io.Out)
		c.SetErr(io.ErrOut)
		if err := c.Execute(); err != nil {
			t.Errorf("%q does not parse: %v", l, err)
			continue
		}
		if _, err := report.ParseExpect(got.Expect); err != nil {
			t.Errorf("%q: %v", l, err)
		}
		if err := got.Shape.validate(got.Registry, got.Backend); err != nil {
			t.Errorf("%q: %v", l, err)
		}
	}
}

// Attempts that time out while the server is up never blame the server,
// and a run in which every attempt timed out is INCONCLUSIVE with its cause
// in one line (issue 10 §1).
func TestTimeoutsDoNotBlameTheServer(t *testing.T) {
	for _, b := range []string{"mysql", "postgres"} {
		// 1µs, not the 300µs: at 300µs an attempt on a warm
		// connection often finishes in time, and the verdict then depends
		// on the machine's load. At 1µs nearly every attempt times out and
		// later bursts re-make their connections under an expired
		// deadline, which is the path that used to blame the server.
		out, errOut, code := execWith(t, builtin.Registry(), "run", "check-then-write", "-b", b, "--timeout", "1us", "-n", "4", "--bursts", "20", "--strict")
		if code == exitSetup {
			if testenv.Required() {
				t.Fatalf("%s: no server: %s", b, errOut)
			}
			t.Logf("skipping %s: no server (%s)", b, strings.TrimSpace(errOut))
			continue
		}
		if strings.Contains(out+errOut, "is the server running") {
			t.Errorf("%s: timeouts blamed on the server:\n%s%s", b, out, errOut)
		}
		// Most attempts time out, but not always all: under load the
		// driver's deadline watcher can run late and a query completes on a
		// warm connection (CI saw 19 of 80 executed; here once two in one
		// burst, a real race of this pattern, and RACE is then the honest
		// verdict). Either way the timeouts are named as the cause, and a
		// run that proved nothing is INCONCLUSIVE with its reason. The
		// reason's exact wording when nothing executed is report's
		// (TestNothingTookEffectSaysWhatHappened in report/assess_test.go).
		switch {
		case !strings.Contains(out, "timed out"):
			t.Errorf("%s: exit %d, the timeouts not named:\n%s%s", b, code, out, errOut)
		case code == exitViolated && strings.Contains(out, " RACE "):
		case code == exitInconclusive && (strings.Contains(out, "bursts executed anything") || strings.Contains(out, "bursts put the guard to the test")):
		default:
			t.Errorf("%s: exit %d, want %d with the reason why nothing was proven (or %d with a race):\n%s%s", b, code, exitInconclusive, exitViolated, out, errOut)
		}
	}
}

// An INCONCLUSIVE run without --strict exits 0, and says once on stderr
// that it proved nothing; with --strict it exits 4 and needs no hint; a
// run that proved something gets no hint (issue 10 §3). --expect safe asks
// for proof: INCONCLUSIVE fails it (exit 4) unless --allow-inconclusive,
// and --strict fails it even then (issue 42, item 10).
func TestStrictHintOnce(t *testing.T) {
	const hint = "INCONCLUSIVE proves nothing but exits 0; --expect safe (without --allow-inconclusive) or --strict makes it fail"
	_, stderr, code := execCmd(t, false, "run", "conditional-update", "-n", "1", "--bursts", "3")
	if code != exitOK || strings.Count(stderr, hint) != 1 {
		t.Errorf("inconclusive, not strict: exit %d, stderr %q; want 0 and the hint once", code, stderr)
	}
	_, stderr, code = execCmd(t, false, "run", "conditional-update", "-n", "1", "--bursts", "3", "--strict")
	if code != exitInconclusive || strings.Contains(stderr, hint) {
		t.Errorf("inconclusive, strict: exit %d, stderr %q; want 4 and no hint", code, stderr)
	}
	_, stderr, code = execCmd(t, false, "run", "conditional-update", "-n", "4", "--bursts", "5")
	if code != exitOK || strings.Contains(stderr, hint) {
		t.Errorf("safe run: exit %d, stderr %q; want 0 and no hint", code, stderr)
	}
	for _, expect := range []string{"safe", "catalog"} {
		_, stderr, code = execCmd(t, false, "run", "conditional-update", "-n", "1", "--bursts", "3", "--expect", expect)
		if code != exitInconclusive || strings.Contains(stderr, hint) || !strings.Contains(stderr, "--expect safe (or --strict) fails that") {
			t.Errorf("inconclusive, --expect %s: exit %d, stderr %q; want 4 and no hint", expect, code, stderr)
		}
	}
	_, stderr, code = execCmd(t, false, "run", "conditional-update", "-n", "1", "--bursts", "3", "--expect", "safe", "--allow-inconclusive")
	if code != exitOK || strings.Count(stderr, hint) != 1 {
		t.Errorf("inconclusive, --expect safe --allow-inconclusive: exit %d, stderr %q; want 0 and the hint once", code, stderr)
	}
	_, _, code = execCmd(t, false, "run", "conditional-update", "-n", "1", "--bursts", "3", "--expect", "safe", "--allow-inconclusive", "--strict")
	if code != exitInconclusive {
		t.Errorf("inconclusive, --allow-inconclusive --strict: exit %d, want 4: --strict fails every INCONCLUSIVE", code)
	}
	// An expectation of RACE is not SAFE's proof: INCONCLUSIVE under
	// --expect race fails it as not RACE (exit 1), as before.
	_, _, code = execCmd(t, false, "run", "check-then-write", "-n", "1", "--bursts", "3", "--expect", "race")
	if code != exitViolated {
		t.Errorf("inconclusive, --expect race: exit %d, want 1", code)
	}
}
