package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/builtin"
)

// nowhere sends every server backend to a closed port: a test that gets
// past the flags' checks reaches no server, and says so with exit 3.
var nowhere = []string{"--mysql-dsn", "root@tcp(127.0.0.1:1)/test", "--postgres-url", "postgres://postgres@127.0.0.1:1/test"}

func TestMatrixFlagsParse(t *testing.T) {
	io, _, _ := testStreams()
	f := &factory{IO: io, Registry: builtin.Registry()}
	var got *matrixOptions
	root := newCmdRoot(f)
	for i, c := range root.Commands() {
		if c.Name() == "matrix" {
			root.RemoveCommand(root.Commands()[i])
			break
		}
	}
	root.AddCommand(newCmdMatrix(f, func(_ context.Context, o *matrixOptions) error { got = o; return nil }))
	for _, tc := range []struct {
		args                      []string
		backends, scen, isolation []string
		attempts, bursts          int
	}{
		{[]string{"matrix"}, []string{"mysql", "postgres"}, nil,
			[]string{"read-uncommitted", "read-committed", "repeatable-read", "serializable"}, defaultMatrixAttempts, defaultMatrixBursts},
		{[]string{"matrix", "--backend", "postgres", "--scenario", "check-then-write", "--isolation", "serializable,read-committed", "-n", "4", "--bursts", "7"},
			[]string{"postgres"}, []string{"check-then-write"}, []string{"serializable", "read-committed"}, 4, 7},
	} {
		got = nil
		root.SetArgs(tc.args)
		if err := root.Execute(); err != nil || got == nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if !slices.Equal(got.Backends, tc.backends) || !slices.Equal(got.Scenarios, tc.scen) || !slices.Equal(got.Isolations, tc.isolation) ||
			got.Shape.Attempts != tc.attempts || got.Shape.Bursts != tc.bursts {
			t.Errorf("%q parsed as backends %q scenarios %q isolation %q n %d bursts %d", tc.args,
				got.Backends, got.Scenarios, got.Isolations, got.Shape.Attempts, got.Shape.Bursts)
		}
	}
}

// Every mistake in the flags is named, with what to do, before any server
// is asked: exit 2 even though every server address is a closed port.
func TestMatrixBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--backend", "mysq"}, `unknown backend "mysq" — did you mean "mysql"?`},
		{[]string{"--backend", "redis"}, "the matrix's columns are isolation levels, and redis has none; it runs on mysql, postgres"},
		{[]string{"--backend", ""}, "--backend is empty"},
		{[]string{"--scenario", "chek-then-write"}, `unknown scenario "chek-then-write" — did you mean "check-then-write"?`},
		{[]string{"--scenario", "alert-dedupe"}, "--scenario alert-dedupe does not run on mysql, postgres; it runs on: memory, redis"},
		{[]string{"--scenario", "check-then-write", "--variant", "for-updat"}, `no scenario of this matrix has a variant "for-updat" on mysql, postgres (known: advisory-lock, for-share, for-update, plain)`},
		{[]string{"--isolation", "snapshot"}, `unknown isolation level "snapshot"`},
		{[]string{"--format", "yaml"}, `unknown format "yaml"`},
		{[]string{"--bursts", "0"}, "--bursts must be at least 1"},
		{[]string{"-n", "0"}, "--attempts must be at least 1"},
		{[]string{"extra"}, `unknown command "extra"`},
	} {
		args := append(append([]string{"matrix"}, tc.args...), nowhere...)
		out, errOut, code := execWith(t, builtin.Registry(), args...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 saying %q", tc.args, code, errOut, tc.want)
		}
		if out != "" {
			t.Errorf("%q: a refused matrix printed %q", tc.args, out)
		}
	}
}

// isolationRegistry is the catalog's check-then-write on stand-ins named
// mysql and postgres whose bursts race below serializable and are safe at
// it, as the catalog expects of PostgreSQL; postgres declares only plain,
// mysql also for-update,
// which the catalog expects to be safe at repeatable-read, and which here
// races: a mismatch.
func isolationRegistry() *scenarios.Registry {
	return isolationRegistryWith([]string{"read-uncommitted", "read-committed", "repeatable-read", "serializable"})
}

// isolationRegistryWith is isolationRegistry with postgres taking only
// pgLevels.
func isolationRegistryWith(pgLevels []string) *scenarios.Registry {
	reg := scenarios.NewRegistry()
	for _, s := range scenarios.Core() {
		reg.AddScenario(s)
	}
	for _, b := range []string{"mysql", "postgres"} {
		levels := []string{"read-uncommitted", "read-committed", "repeatable-read", "serializable"}
		if b == "postgres" {
			levels = pgLevels
		}
		reg.AddBackend(scenarios.Backend{Name: b, Server: true, Isolations: levels})
		reg.Register(scenarios.CheckThenWrite, b, func(_ context.Context, p scenarios.Params) (runner.Target, error) {
			if p.Isolation == "serializable" {
				return scripted{"safe"}, nil
			}
			return scripted{"race"}, nil
		})
		reg.Register(scenarios.ConditionalUpdate, b, func(context.Context, scenarios.Params) (runner.Target, error) {
			return scripted{"safe"}, nil
		})
	}
	reg.SetVariants(scenarios.CheckThenWrite, "mysql", []string{"plain", "for-update"})
	reg.SetVariants(scenarios.CheckThenWrite, "postgres", []string{"plain"})
	return reg
}

// A level one of the backends does not take is refused before anything
// runs, naming the backend and what it takes.
func TestMatrixLevelABackendLacks(t *testing.T) {
	reg := isolationRegistryWith([]string{"read-committed", "serializable"})
	out, errOut, code := execWith(t, reg, "matrix", "--isolation", "repeatable-read", "-n", "2", "--bursts", "1")
	if code != exitUsage || !strings.Contains(errOut, "--isolation repeatable-read: postgres does not take it (it takes read-committed, serializable)") || out != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 naming postgres's levels", code, out, errOut)
	}
	if _, errOut, code := execWith(t, reg, "matrix", "--backend", "mysql", "--isolation", "repeatable-read", "-n", "2", "--bursts", "1"); code == exitUsage {
		t.Errorf("mysql takes repeatable-read, yet refused: %q", errOut)
	}
}

// Every cell as the catalog expects: exit 0, one table, a row per variant
// and a column per level; conditional-update, SAFE at every level, is no
// row of the default matrix.
func TestMatrixAllMet(t *testing.T) {
	out, errOut, code := execWith(t, isolationRegistry(), "matrix", "--backend", "postgres", "-n", "4", "--bursts", "4", "-o", "json",
		"--isolation", "serializable,read-committed,repeatable-read,read-uncommitted") // the columns still read weakest first
	if code != exitOK {
		t.Fatalf("exit %d, want 0; stderr %q", code, errOut)
	}
	var doc report.Document
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Matrix) != 1 || len(doc.Matrix[0].Rows) != 1 || len(doc.Runs) != 4 {
		t.Fatalf("want one table of one row and four runs, got %d runs and %+v", len(doc.Runs), doc.Matrix)
	}
	row := doc.Matrix[0].Rows[0]
	var verdicts []string
	for _, c := range row.Cells {
		verdicts = append(verdicts, c.Isolation+"="+string(c.Verdict)+"/"+c.Expect)
		if !c.ExpectationMet {
			t.Errorf("cell %s not met: %+v", c.Isolation, c)
		}
	}
	want := []string{"read-uncommitted=RACE/race", "read-committed=RACE/race", "repeatable-read=RACE/race", "serializable=SAFE/safe"}
	if row.Scenario != "check-then-write" || !slices.Equal(verdicts, want) {
		t.Errorf("row %s: %q, want %q", row.Scenario, verdicts, want)
	}
}

// A cell that differs from the catalog is marked in the table, explained
// under it with the catalog's reason, and makes the exit 1.
func TestMatrixMismatchExits1(t *testing.T) {
	out, errOut, code := execWith(t, isolationRegistry(), "matrix", "-n", "4", "--bursts", "4")
	if code != exitViolated || !strings.Contains(errOut, "1 of 12 runs did not meet their expectation") {
		t.Fatalf("exit %d, want 1 for the one mismatch; stderr %q\n%s", code, errOut, out)
	}
	var forUpdate string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "  for-update") {
			forUpdate = l
		}
	}
	if fields := strings.Fields(forUpdate); len(fields) < 6 || fields[5] != "✗" {
		t.Errorf("mysql's for-update row does not mark repeatable-read (the third level): %q\n%s", forUpdate, out)
	}
	if strings.Count(out, "✗ RACE") != 1 {
		t.Errorf("want exactly one marked cell:\n%s", out)
	}
	for _, want := range []string{
		"✗ mysql check-then-write for-update at repeatable-read: expected SAFE, but 4 of 4 bursts left more than 1 effect",
		"InnoDB repeatable-read takes a gap lock",
	} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
			t.Errorf("the table does not say %q:\n%s", want, out)
		}
	}
	// Without for-update the mismatch is gone: plain names mysql's default,
	// default the nameless one of postgres.
	out, errOut, code = execWith(t, isolationRegistry(), "matrix", "--scenario", "check-then-write,conditional-update", "--variant", "plain,default", "-n", "4", "--bursts", "4")
	if code != exitOK || strings.Contains(out, "for-update") || strings.Count(out, "  plain ") != 2 || strings.Count(out, "  default ") != 2 {
		t.Errorf("--variant plain,default: exit %d, want 0 with a plain row and a default row per server; stderr %q\n%s", code, errOut, out)
	}
}

// A matrix saved as JSON renders again as a matrix ('racetest report'),
// with the same verdicts and the same exit code.
func TestMatrixReportAgain(t *testing.T) {
	out, _, code := execWith(t, isolationRegistry(), "matrix", "-n", "4", "--bursts", "4", "-o", "json")
	if code != exitViolated {
		t.Fatalf("exit %d, want 1", code)
	}
	file := filepath.Join(t.TempDir(), "matrix.json")
	if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	table, errOut, code := execWith(t, isolationRegistry(), "report", file)
	if code != exitViolated || errOut == "" {
		t.Errorf("report of the matrix: exit %d, want 1; stderr %q", code, errOut)
	}
	for _, want := range []string{"\ncheck-then-write\n", "  for-update  RACE 100%", "✗ RACE 100%", "✗ mysql check-then-write for-update at repeatable-read"} {
		if !strings.Contains(table, want) {
			t.Errorf("the report again lacks %q:\n%s", want, table)
		}
	}
}

// A server that is not there fails its first cell (exit 3, its address
// named) and its other cells are not tried one connection timeout each.
func TestMatrixUnreachableServer(t *testing.T) {
	args := append([]string{"matrix", "--scenario", "check-then-write", "-n", "2", "--bursts", "2"}, nowhere...)
	out, errOut, code := execWith(t, builtin.Registry(), args...)
	if code != exitSetup {
		t.Fatalf("exit %d, want 3; stderr %q", code, errOut)
	}
	// Said once per server, on stderr and under the table.
	if strings.Count(errOut, "cannot connect to 127.0.0.1:1") != 2 {
		t.Errorf("stderr does not name each server once: %q", errOut)
	}
	for _, want := range []string{"ERROR mysql: 16 cells did not run: mysql: cannot connect to 127.0.0.1:1", "ERROR postgres: 16 cells did not run: postgres: cannot connect"} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
			t.Errorf("the table does not say %q:\n%s", want, out)
		}
	}
}

// The catalog's check-then-write matrix on the real servers: every cell
// as the catalog expects for that server (serializable and, on InnoDB,
// for-update at repeatable-read stop it; nothing else does), the servers
// and their outcome-changing settings named. 30 bursts a cell: the RACE
// cells raced in 95-100% of bursts when measured, SAFE cells need half
// their bursts to overlap (see the report for the false-alarm rate).
func TestMatrixOnServers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 16 cells on MariaDB and PostgreSQL")
	}
	out, errOut, code := execWith(t, builtin.Registry(), "matrix", "--scenario", "check-then-write", "--variant", "plain,for-update", "-n", "8", "--bursts", "30", "-o", "json")
	if code == exitSetup {
		testenv.Unavailable(t, "mysql or postgres", errors.New(strings.TrimSpace(errOut)))
	}
	var doc report.Document
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("exit %d, stderr %q: %v", code, errOut, err)
	}
	if code != exitOK {
		for _, r := range doc.Runs {
			if !r.ExpectationMet {
				t.Errorf("%s on %s (%s): %s, %s", r.Name, r.Backend, r.Server, r.Verdict, r.Why)
			}
		}
		t.Fatalf("exit %d, want 0; stderr %q", code, errOut)
	}
	if len(doc.Matrix) != 2 || len(doc.Runs) != 16 {
		t.Fatalf("want 2 tables of 16 runs, got %d tables, %d runs", len(doc.Matrix), len(doc.Runs))
	}
	for _, m := range doc.Matrix {
		settings := strings.Join(m.Settings, "\n")
		switch m.Backend {
		case "mysql":
			if strings.Contains(m.Server, "MariaDB") && !strings.Contains(settings, "innodb_snapshot_isolation") {
				t.Errorf("mysql (%s): the header does not name innodb_snapshot_isolation: %q", m.Server, m.Settings)
			}
		case "postgres":
			if !strings.Contains(settings, "READ UNCOMMITTED behaves as READ COMMITTED") {
				t.Errorf("postgres (%s): the header does not say read uncommitted runs as read committed: %q", m.Server, m.Settings)
			}
		}
		if m.Server == "" {
			t.Errorf("%s: no server named", m.Backend)
		}
		for _, r := range m.Rows {
			for _, c := range r.Cells {
				// A SAFE cell here is a server that refused: its conflicts
				// are what stopped the race.
				if c.Verdict == report.Safe && c.Conflicts == 0 {
					t.Errorf("%s %s %q at %s: SAFE without one conflict", m.Backend, r.Scenario, r.Variant, c.Isolation)
				}
			}
		}
	}
}
