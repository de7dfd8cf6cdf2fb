package cmd

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/racetest/racetest/httpfire/httpfiretest"
	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/builtin"
	"github.com/racetest/racetest/suite"
)

// withStandIn is the memory catalog plus a postgres backend whose every
// build fails as an unreachable server does, and counts its calls: enough
// to test connections and setup errors without a server.
func withStandIn(builds *int) *scenarios.Registry {
	r := memoryOnly() // it declares postgres, with its connection
	for _, s := range scenarios.Core() {
		r.Register(s.Name, "postgres", func(context.Context, scenarios.Params) (runner.Target, error) {
			*builds++
			return nil, errors.New("postgres: cannot connect to 127.0.0.1:5432 (connection refused)")
		})
	}
	return r
}

// execSuite runs racetest with args against reg on test streams.
func execSuite(t *testing.T, reg *scenarios.Registry, ctx context.Context, args ...string) (string, string, int) {
	t.Helper()
	io, out, errOut := testStreams()
	f := &factory{IO: io, Registry: reg}
	root := newCmdRoot(f)
	root.SetArgs(args)
	if ctx == nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
	}
	err := root.ExecuteContext(ctx)
	printError(io, err)
	return out.String(), errOut.String(), exitCode(err)
}

func writeSuite(t *testing.T, src string) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "suite.yaml")
	if err := os.WriteFile(name, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

func TestSuiteFlagsParse(t *testing.T) {
	io, _, _ := testStreams()
	var got *suiteOptions
	c := newCmdSuite(&factory{IO: io, Registry: memoryOnly()}, func(_ context.Context, o *suiteOptions) error { got = o; return nil })
	c.SetArgs([]string{"ci.yaml", "--strict", "--list", "--junit", "r.xml", "--markdown", "r.md", "--json", "r.json",
		"--timeline", "--keep", "--mysql-dsn", "u@tcp(db:3306)/x", "--postgres-url", "postgres://db/x",
		"--redis-url", "redis://r:6379/0", "--mongo-uri", "mongodb://m:27017"})
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"redis": "redis://r:6379/0", "mysql": "u@tcp(db:3306)/x", "postgres": "postgres://db/x", "mongo": "mongodb://m:27017"}
	if got.File != "ci.yaml" || !got.Strict || !got.List || got.Files["junit"] != "r.xml" || got.Files["markdown"] != "r.md" || got.Files["json"] != "r.json" || got.Files["html"] != "" ||
		!got.Timeline || !got.Keep || !maps.Equal(got.Conn.Map(), want) {
		t.Errorf("parsed options = %+v", got)
	}
	c = newCmdSuite(&factory{IO: io, Registry: memoryOnly()}, func(_ context.Context, o *suiteOptions) error { got = o; return nil })
	c.SetArgs([]string{"ci.yaml"})
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Strict || got.List || got.Timeline || len(got.Conn.Map()) != 0 {
		t.Errorf("defaults = %+v", got)
	}
}

func TestSuiteBadInputExits2BeforeAnythingRuns(t *testing.T) {
	t.Setenv("RACETEST_POSTGRES_URL", "")
	builds := 0
	reg := withStandIn(&builds)
	for _, c := range []struct {
		name, src string
		args      []string
		want      string
	}{
		{"malformed YAML", "cases:\n  - scenario: [unique-insert\n", nil, "suite.yaml:2:"},
		{"unknown key", "cases:\n  - scenario: unique-insert\n    bursst: 3\n", nil, `suite.yaml:3:5: unknown key "bursst" — did you mean "bursts"?`},
		{"unknown scenario", "cases:\n  - scenario: uniqe-insert\n", nil, `suite.yaml:2:15: unknown scenario "uniqe-insert" — did you mean "unique-insert"?`},
		{"no connection", "cases:\n  - scenario: unique-insert\n    backend: postgres\n", nil, "suite.yaml:3:14: the case runs on postgres, but no postgres connection is configured"},
		{"max effects 0", "cases:\n  - scenario: unique-insert\n    max_effects: 0\n", nil, "suite.yaml:3:18: max_effects 0 can never be met"},
		{"http without a rule", "cases:\n  - http: {url: 'http://127.0.0.1:1/x'}\n", nil, "needs a success rule"},
		{"http case the engine refuses", "cases:\n  - name: framed by hand\n    http: {url: 'http://127.0.0.1:1/x', headers: ['Content-Length: 3'], success: {status: [200]}}\n", nil,
			`suite.yaml:2:5: case "framed by hand": header: Content-Length is set by racetest`},
		{"bad colour", "cases:\n  - scenario: unique-insert\n", []string{"--color", "sometimes"}, "--color"},
		{"report directory missing", "cases:\n  - scenario: unique-insert\n", []string{"--junit", "/nonexistent/dir/r.xml"}, "does not exist"},
		{"report path a directory", "cases:\n  - scenario: unique-insert\n", []string{"--json", "."}, "--json .: that is a directory: name a file in it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := writeSuite(t, c.src)
			out, errOut, code := execSuite(t, reg, nil, append([]string{"suite", file}, c.args...)...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, exitUsage, errOut)
			}
			if !strings.Contains(errOut, c.want) {
				t.Errorf("stderr does not say %q:\n%s", c.want, errOut)
			}
			if out != "" {
				t.Errorf("stdout %q: nothing should run", out)
			}
		})
	}
	if builds != 0 {
		t.Errorf("a backend was built %d times by suites that should not run", builds)
	}
	_, errOut, code := execSuite(t, reg, nil, "suite", filepath.Join(t.TempDir(), "missing.yaml"))
	if code != exitUsage || !strings.Contains(errOut, "cannot read the suite") {
		t.Errorf("missing file: exit %d, %q", code, errOut)
	}
}

func TestSuiteErrorShowsTheLine(t *testing.T) {
	file := writeSuite(t, "cases:\n  - scenario: unique-insert\n    expect: sure\n")
	_, errOut, _ := execSuite(t, memoryOnly(), nil, "suite", file)
	want := file + ":3:13: unknown expectation \"sure\" — did you mean \"safe\"? (want catalog, safe, race, or max_effects: N)\n" +
		"    3 |     expect: sure\n" +
		"      |             ^\n"
	if errOut != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", errOut, want)
	}
}

func TestSuiteList(t *testing.T) {
	builds := 0
	t.Setenv("PG_PASSWORD", "hunter2")
	file := writeSuite(t, `defaults:
  attempts: 4
  connections:
    postgres: postgres://app:${PG_PASSWORD}@db.internal:5432/app
cases:
  - scenario: conditional-update
    backend: postgres
    prove: 1%
    on_server:
      - {match: Fake, expect: race, why: a server that does not keep its promise}
  - scenario: memory-set
    replicas: 3
`)
	out, errOut, code := execSuite(t, withStandIn(&builds), nil, "suite", "--list", file)
	if code != exitOK || builds != 0 {
		t.Fatalf("exit %d, %d builds; stderr %s", code, builds, errOut)
	}
	for _, want := range []string{
		"2 cases (listed, not run)",
		"conditional-update", "4×≤299", "safe, prove ≤1%; race on Fake", "postgres://app:xxxxx@db.internal:5432/app (suite defaults)",
		"memory-set (replicas=3)", "4×100 R=3", "race",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("listing lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out+errOut, "hunter2") {
		t.Error("the listing shows the password")
	}
}

// TestSuiteEndToEnd runs a suite on the memory backend with every report
// at once, in a CI-like setting: stderr is not a terminal.
func TestSuiteEndToEnd(t *testing.T) {
	dir := t.TempDir()
	file := writeSuite(t, `defaults:
  attempts: 4
  bursts: 20
cases:
  - {name: one replica, scenario: memory-set}
  - {scenario: memory-set, replicas: 3, max_effects: 3}
  - {scenario: check-then-write, expect: race}
  - {scenario: conditional-update, prove: 10%}
`)
	junit, md, js := filepath.Join(dir, "r.xml"), filepath.Join(dir, "r.md"), filepath.Join(dir, "r.json")
	out, errOut, code := execSuite(t, memoryOnly(), nil, "suite", file, "--junit", junit, "--markdown", md, "--json", js)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	// One line per case as it finishes, no bars, no colour.
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[1], "[1/4] ok    one replica on memory: SAFE") ||
		!strings.HasPrefix(lines[4], "[4/4] ok    conditional-update on memory: SAFE") {
		t.Errorf("log lines:\n%s", errOut)
	}
	if strings.Contains(out+errOut, "\x1b[") {
		t.Error("colour codes in a CI log without --color always")
	}
	if !strings.Contains(out, "CASE") || !strings.Contains(out, "memory-set (replicas=3)") {
		t.Errorf("table:\n%s", out)
	}

	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Suites   []struct {
			Cases []struct {
				ClassName string `xml:"classname,attr"`
				Name      string `xml:"name,attr"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(readFile(t, junit), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Tests != 4 || doc.Failures != 0 || doc.Suites[0].Cases[0].ClassName != "memory" || doc.Suites[0].Cases[0].Name != "one replica" {
		t.Errorf("junit: %+v", doc)
	}
	if m := string(readFile(t, md)); !strings.Contains(m, "**4 of 4 cases met their expectation.**") {
		t.Errorf("markdown:\n%s", m)
	}
	var j report.Document
	if err := json.Unmarshal(readFile(t, js), &j); err != nil {
		t.Fatal(err)
	}
	prove := j.Runs[3]
	if j.Schema != report.SchemaVersion || len(j.Runs) != 4 || prove.PlannedBursts != report.BurstsFor(0.10) ||
		prove.Settings["prove"] != "10%" || prove.Verdict != report.Safe {
		t.Errorf("json: schema %s, %d runs, prove case %+v", j.Schema, len(j.Runs), prove)
	}
}

func TestSuiteColourOnlyWhenAsked(t *testing.T) {
	file := writeSuite(t, "defaults: {attempts: 4, bursts: 5}\ncases:\n  - {scenario: check-then-write, expect: race}\n")
	out, errOut, _ := execSuite(t, memoryOnly(), nil, "suite", "--color", "always", file)
	if !strings.Contains(out, "\x1b[") || !strings.Contains(errOut, "\x1b[32mok") {
		t.Errorf("--color always: no colour\n%s\n%s", out, errOut)
	}
}

func TestSuiteExitCodes(t *testing.T) {
	builds := 0
	reg := withStandIn(&builds)
	for _, c := range []struct {
		name, src string
		code      int
	}{
		{"met", "cases:\n  - {scenario: check-then-write, expect: race, attempts: 4, bursts: 10}\n", exitOK},
		{"violated", "cases:\n  - {scenario: check-then-write, expect: safe, attempts: 4, bursts: 10}\n", exitViolated},
		{"setup error", "defaults:\n  connections: {postgres: default}\ncases:\n  - {scenario: unique-insert, backend: postgres}\n  - {scenario: check-then-write, expect: safe, attempts: 4, bursts: 10}\n", exitSetup},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := execSuite(t, reg, nil, "suite", writeSuite(t, c.src))
			if code != c.code {
				t.Errorf("exit %d, want %d\n%s\n%s", code, c.code, out, errOut)
			}
		})
	}
	if builds != 1 {
		t.Errorf("the stand-in was built %d times, want once", builds)
	}
}

// TestSuiteVerdict pins the exit codes that depend on overlap, which a
// real run cannot be made to produce on demand: an INCONCLUSIVE case under
// --strict, and a SAFE case short of the bound it had to prove.
func TestSuiteVerdict(t *testing.T) {
	flat := &runner.Result{Attempts: 4, Allowed: 1, Planned: 3}
	for i := range 3 {
		flat.Bursts = append(flat.Bursts, runner.Burst{Index: i, Effects: 1, Allowed: 1, Overlap: 1, Outcomes: [runner.NumClasses]int{1, 3}})
	}
	inconclusive := report.Case{Scenario: "unique-insert", Backend: "memory", Expect: report.Expect{Kind: "safe"}, Result: flat}
	ctx := context.Background()
	if err := verdictError(ctx, []report.Case{inconclusive}); err != nil {
		t.Errorf("inconclusive without --strict: %v", err)
	}
	inconclusive.Strict = true
	if code := exitCode(verdictError(ctx, []report.Case{inconclusive})); code != exitInconclusive {
		t.Errorf("inconclusive with --strict: exit %d", code)
	}
	// Every burst overlapped, but 3 bursts cannot prove ≤1%.
	overlapped := &runner.Result{Attempts: 4, Allowed: 1, Planned: 3}
	for i := range 3 {
		overlapped.Bursts = append(overlapped.Bursts, runner.Burst{Index: i, Effects: 1, Allowed: 1, Overlap: 4, Outcomes: [runner.NumClasses]int{1, 3}})
	}
	unproven := report.Case{Scenario: "unique-insert", Backend: "memory", Expect: report.Expect{Kind: "safe"}, Prove: 0.01, Strict: true, Result: overlapped}
	if code := exitCode(verdictError(ctx, []report.Case{unproven})); code != exitInconclusive {
		t.Errorf("unproven bound with --strict: exit %d", code)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if code := exitCode(verdictError(cancelled, []report.Case{unproven})); code != exitInterrupted {
		t.Errorf("interrupted: exit %d", code)
	}
	// A case cut short, by its result or by its error, makes the command
	// interrupted even when the command's own context was not cancelled
	// (the run's was), and before any other case's verdict.
	cut := &runner.Result{Attempts: 4, Allowed: 1, Planned: 3, Interrupted: true}
	for _, c := range []report.Case{
		{Scenario: "unique-insert", Backend: "memory", Expect: report.Expect{Kind: "safe"}, Result: cut},
		{Scenario: "unique-insert", Backend: "memory", Expect: report.Expect{Kind: "safe"}, Err: fmt.Errorf("burst 2: %w", context.Canceled)},
	} {
		if code := exitCode(verdictError(ctx, []report.Case{unproven, c})); code != exitInterrupted {
			t.Errorf("a case interrupted (result %v, error %v): exit %d, want %d", c.Result != nil, c.Err, code, exitInterrupted)
		}
	}
}

func TestSuiteInterruptedWritesWhatFinished(t *testing.T) {
	dir := t.TempDir()
	file := writeSuite(t, "cases:\n  - {scenario: check-then-write, expect: race, bursts: 10000000}\n  - {scenario: unique-insert}\n")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	junit := filepath.Join(dir, "r.xml")
	_, _, code := execSuite(t, memoryOnly(), ctx, "suite", file, "--junit", junit)
	if code != exitInterrupted {
		t.Fatalf("exit %d, want %d", code, exitInterrupted)
	}
	x := string(readFile(t, junit))
	if !strings.Contains(x, `tests="1"`) || !strings.Contains(x, `type="INTERRUPTED"`) {
		t.Errorf("the JUnit report does not show the interrupted case:\n%s", x)
	}
}

func TestSuiteFromStdin(t *testing.T) {
	io, out, errOut := testStreams()
	io.In = strings.NewReader("cases:\n  - {scenario: unique-insert, attempts: 4, bursts: 5}\n")
	root := newCmdRoot(&factory{IO: io, Registry: memoryOnly()})
	root.SetArgs([]string{"suite", "-"})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if !strings.Contains(out.String(), "unique-insert") {
		t.Errorf("stdout:\n%s", out)
	}
}

// TestCatalogSuiteCoversTheCatalog keeps testdata/suites/catalog.yaml, the
// project's CI gate, in step with the built-in catalog: every scenario on
// every backend that implements it, every demo variant, with the catalog's
// own expectation (a server rule may replace it, with its reason).
func TestCatalogSuiteCoversTheCatalog(t *testing.T) {
	name := filepath.Join("..", "testdata", "suites", "catalog.yaml")
	s, err := suite.Parse(name, readFile(t, name), func(string) (string, bool) { return "", false }, builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	reg := builtin.Registry()
	plans, err := s.Plans(reg, suite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	key := func(scenario, backend, variant string, replicas, waves int) string {
		return fmt.Sprintf("%s on %s (variant %q, %d replicas, %d waves)", scenario, backend, variant, replicas, waves)
	}
	have := map[string]bool{}
	for _, p := range plans {
		have[key(p.Case.Scenario, p.Case.Backend, p.Params.Variant, p.Config.Replicas, p.Config.Waves)] = true
		if p.Config.Bursts < 50 || p.Config.Attempts < 4 {
			t.Errorf("%s on %s: %d×%d is too small to be a gate", p.Case.Name, p.Case.Backend, p.Config.Attempts, p.Config.Bursts)
		}
		if want, _ := reg.Expect(p.Case.Scenario, p.Case.Backend, p.Params, ""); string(p.Case.Expect.Kind) != string(want) {
			t.Errorf("%s on %s expects %s, the catalog says %s", p.Case.Name, p.Case.Backend, p.Case.Expect, want)
		}
		for _, r := range p.OnServer {
			if r.Why == "" || strings.EqualFold(r.Match, "mongodb") {
				t.Errorf("%s on %s: a server rule must name a server other than MongoDB itself, with its reason: %+v", p.Case.Name, p.Case.Backend, r)
			}
		}
	}
	want := 0
	for _, spec := range reg.Scenarios() {
		if spec.Topology != "" {
			continue // clustered: gated by .ci/run's cluster step, not by one server
		}
		demos := spec.Demo
		if len(demos) == 0 {
			demos = []scenarios.DemoCase{{}}
		}
		for _, b := range reg.BackendsOf(spec.Name) {
			for _, d := range demos {
				want++
				if k := key(spec.Name, b, d.Variant, max(d.Replicas, 1), max(d.Waves, 1)); !have[k] {
					t.Errorf("catalog.yaml lacks %s", k)
				}
			}
		}
	}
	if len(plans) != want {
		t.Errorf("catalog.yaml has %d cases, the catalog %d", len(plans), want)
	}
}

// TestSuiteHTTPCases fires at real endpoints: one with the classic
// check-then-write race, one that claims atomically, and one that is not
// there; the effects come from the endpoint's own count.
func TestSuiteHTTPCases(t *testing.T) {
	racy := httptest.NewServer(httpfiretest.NewCheckThenWrite(2 * time.Millisecond))
	defer racy.Close()
	var mu sync.Mutex
	claims := map[string]int{}
	safe := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.URL.Query().Get("key")
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path == "/count" {
			if claims[key] > 0 {
				fmt.Fprintln(w, 1)
			} else {
				fmt.Fprintln(w, 0)
			}
			return
		}
		claims[key]++
		if claims[key] > 1 {
			w.WriteHeader(http.StatusConflict)
		}
	}))
	defer safe.Close()
	file := writeSuite(t, fmt.Sprintf(`defaults: {attempts: 6, bursts: 15}
cases:
  - name: save races
    http:
      method: POST
      url: %[1]s/?key={{.Token}}
      body: x
      success: {status: [200]}
      effects: "http:%[1]s/count?key={{.Token}}"
    expect: race
  - name: claim holds
    http:
      method: POST
      url: %[2]s/?key={{.Key}}
      success: {status: [2xx]}
      effects: "http:%[2]s/count?key={{.Key}}"
    expect: safe
`, racy.URL, safe.URL))
	dir := t.TempDir()
	junit := filepath.Join(dir, "r.xml")
	out, errOut, code := execSuite(t, memoryOnly(), nil, "suite", file, "--junit", junit)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"[1/2] ok    save races over HTTP", "RACE", "[2/2] ok    claim holds over HTTP", "SAFE"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("log lacks %q:\n%s", want, errOut)
		}
	}
	if x := string(readFile(t, junit)); !strings.Contains(x, `classname="http" name="save races"`) {
		t.Errorf("junit:\n%s", x)
	}
	gone := writeSuite(t, "cases:\n  - http: {url: 'http://127.0.0.1:1/x', success: {status: [200]}}\n")
	if _, errOut, code := execSuite(t, memoryOnly(), nil, "suite", gone); code != exitSetup || !strings.Contains(errOut, "cannot connect to 127.0.0.1:1") {
		t.Errorf("unreachable endpoint: exit %d, want %d\n%s", code, exitSetup, errOut)
	}
}

// TestExampleSuitesList checks every example suite down to the HTTP
// engine's own validation, as --list does, without running anything.
func TestExampleSuitesList(t *testing.T) {
	names, _ := filepath.Glob(filepath.Join("..", "testdata", "suites", "*.yaml"))
	for _, name := range names {
		out, errOut, code := execSuite(t, builtin.Registry(), nil, "suite", "--list", name)
		if code != exitOK || !strings.Contains(out, "(listed, not run)") {
			t.Errorf("%s: exit %d\n%s%s", name, code, out, errOut)
		}
	}
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Issue 42, item 10: a suite's sql: case whose effects check never changed
// is INCONCLUSIVE, and a gate fails it (exit 4, expectation "failed"), as
// the suite's help says; allow_inconclusive: true lets it through, read
// "unproven", never "met".
func TestSuiteScriptCaseInconclusiveFailsTheGate(t *testing.T) {
	if _, _, code := execCmd(t, false, "sql", "-b", "postgres", "--attempt", "SELECT 1;", "--effects", "SELECT 0;", "-n", "1", "--bursts", "1"); code == exitSetup {
		testenv.Unavailable(t, "postgres", nil)
	}
	dir, err := filepath.Abs("../examples/redeem/scripts")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		allow       string
		code        int
		expectation string
		met         bool
	}{
		{"", exitInconclusive, "failed", false},
		{"\n    allow_inconclusive: true", exitOK, "unproven", true},
	} {
		file := writeSuite(t, fmt.Sprintf(`version: 1
defaults:
  attempts: 8
  bursts: 10
  connections:
    postgres: ${RACETEST_POSTGRES_URL:-default}
cases:
  - name: stuck check
    backend: postgres
    expect: safe%s
    sql:
      setup: "@%[2]s/schema.sql"
      subject: "@%[2]s/coupon.sql"
      attempt: "@%[2]s/naive.sql"
      effects: "SELECT 1;"
      teardown: "@%[2]s/drop.sql"
`, tc.allow, dir))
		js := filepath.Join(t.TempDir(), "r.json")
		out, errOut, code := execSuite(t, builtin.Registry(), nil, "suite", file, "--json", js)
		data, err := os.ReadFile(js)
		if err != nil {
			t.Fatalf("exit %d, no JSON: %v\n%s\n%s", code, err, out, errOut)
		}
		var doc report.Document
		if err := json.Unmarshal(data, &doc); err != nil || len(doc.Runs) != 1 {
			t.Fatalf("json: %v\n%s", err, data)
		}
		j := doc.Runs[0]
		if code != tc.code || j.Verdict != report.Inconclusive || j.Expectation != tc.expectation || j.ExpectationMet != tc.met {
			t.Errorf("allow %q: exit %d, %s, expectation %q met %v; want exit %d, INCONCLUSIVE, %q met %v\n%s\n%s",
				tc.allow, code, j.Verdict, j.Expectation, j.ExpectationMet, tc.code, tc.expectation, tc.met, out, errOut)
		}
	}
}
