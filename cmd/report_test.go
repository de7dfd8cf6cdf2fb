package cmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/racetest/racetest/report"
)

// 'racetest report' renders a saved report in another format, names a
// verdict it would judge differently, and refuses what is not a report.
func TestReportCommand(t *testing.T) {
	out, errOut, code := execCmd(t, false, "run", "check-then-write", "-n", "4", "--bursts", "10", "--expect", "race", "-o", "json")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, errOut)
	}
	dir := t.TempDir()
	saved := filepath.Join(dir, "run.json")
	if err := os.WriteFile(saved, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	table, errOut, code := execCmd(t, false, "report", saved)
	if code != 0 || !strings.Contains(table, "check-then-write") || !strings.Contains(table, "RACE") || errOut != "" {
		t.Errorf("report as a table: exit %d, stderr %q\n%s", code, errOut, table)
	}
	md, _, code := execCmd(t, false, "report", saved, "-o", "markdown")
	if code != 0 || !strings.HasPrefix(md, "## ") {
		t.Errorf("report as markdown: exit %d\n%s", code, md)
	}

	// A recorded verdict this racetest would not give is named.
	edited := filepath.Join(dir, "edited.json")
	if err := os.WriteFile(edited, []byte(strings.Replace(out, `"verdict": "RACE"`, `"verdict": "SAFE"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, _ := execCmd(t, false, "report", edited); !strings.Contains(errOut, "was recorded as SAFE") {
		t.Errorf("a changed verdict went unnamed: %q", errOut)
	}

	// A wrong command line points at --help; a file that is not a report
	// does not, since --help does not describe what a report holds.
	for _, tc := range []struct {
		args []string
		want string
		help bool
	}{
		{[]string{"report", filepath.Join(dir, "missing.json")}, "cannot read the report", false},
		{[]string{"report", saved, "-o", "pdf"}, `unknown format "pdf"`, true},
		{[]string{"report", saved, saved}, "got 2 arguments", true},
		{[]string{"report", writeSuite(t, "cases: []\n")}, "not a racetest JSON report", false},
		{[]string{"report", writeSuite(t, `{"schema": "racetest/v1", "runs": [{"name": "x", "backend": "memory"}]}`)}, "unknown expectation", false},
		{[]string{"report", "merge", saved, writeSuite(t, out)}, "the same report given twice?", false},
	} {
		_, errOut, code := execCmd(t, false, tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) || strings.Contains(errOut, "--help' for usage") != tc.help {
			t.Errorf("%v: exit %d, stderr %q; want exit %d with %q, a pointer at --help: %v", tc.args, code, errOut, exitUsage, tc.want, tc.help)
		}
	}
}

// suite writes the HTML beside the other reports, and --format html puts
// it on stdout.
func TestSuiteHTML(t *testing.T) {
	file := writeSuite(t, "cases:\n  - scenario: conditional-update\n    attempts: 4\n    bursts: 5\n")
	page := filepath.Join(t.TempDir(), "suite.html")
	out, errOut, code := execCmd(t, false, "suite", "--html", page, file)
	if code != 0 {
		t.Fatalf("suite --html: exit %d\n%s\n%s", code, out, errOut)
	}
	b, err := os.ReadFile(page)
	if err != nil || !strings.Contains(string(b), `<svg class="hist" data-kind="effects" data-total="5"`) {
		t.Errorf("suite --html wrote %d bytes (%v) without the effects histogram of 5 bursts", len(b), err)
	}
	out, _, code = execCmd(t, false, "suite", "--format", "html", file)
	if code != 0 || !strings.HasPrefix(out, "<!DOCTYPE html>") {
		t.Errorf("suite --format html: exit %d, stdout starts %.40q", code, out)
	}
}

// The runs report's round-trip test writes (report/testdata/roundtrip:
// an invariant broken, another writer under solo twins, a baselined check
// that never moved, accounting, a serial server, an interrupted run, each
// as a part of a sharded suite) give, through 'racetest report FILE' and
// 'racetest report merge', the verdict, why-line and exit code the run
// recorded (issue 48): a figure lost on the way would turn a RACE into
// SAFE and exit 0, or an INCONCLUSIVE under --strict into SAFE.
func TestReportRoundTripKeepsVerdictsAndExits(t *testing.T) {
	parts, err := filepath.Glob("../report/testdata/roundtrip/part-*.json")
	if err != nil || len(parts) < 2 {
		t.Fatalf("the round-trip parts: %v (%v)", parts, err)
	}
	// The exit the recorded verdicts give (verdictError): 1 for an
	// expectation failed, 4 for one failed only by an INCONCLUSIVE under
	// --strict (none of these runs has a failed check as well).
	exitOf := func(runs []report.RunJSON) int {
		exit := exitOK
		for _, r := range runs {
			if r.Expectation == "failed" && !(r.Strict && r.Verdict == report.Inconclusive) {
				return exitViolated
			}
			if r.Expectation == "failed" {
				exit = exitInconclusive
			}
		}
		return exit
	}
	check := func(args []string, recorded []report.RunJSON) {
		t.Helper()
		out, errOut, code := execCmd(t, false, append(args, "-o", "json")...)
		var got report.Document
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, errOut)
		}
		if strings.Contains(errOut, "was recorded as") {
			t.Errorf("%v: a verdict judged otherwise than recorded: %s", args, errOut)
		}
		if want := exitOf(recorded); code != want {
			t.Errorf("%v: exit %d, the run's %d: %s", args, code, want, errOut)
		}
		if len(got.Runs) != len(recorded) {
			t.Fatalf("%v: %d runs, recorded %d", args, len(got.Runs), len(recorded))
		}
		for i, r := range got.Runs {
			w := recorded[i]
			if r.Verdict != w.Verdict || r.Why != w.Why || r.Expectation != w.Expectation {
				t.Errorf("%v: %s reads %s (%s), why %q; recorded %s (%s), why %q",
					args, w.Name, r.Verdict, r.Expectation, r.Why, w.Verdict, w.Expectation, w.Why)
			}
		}
	}
	var all []report.RunJSON
	exits := map[int]bool{}
	for _, part := range parts {
		var d report.Document
		if err := json.Unmarshal(readFile(t, part), &d); err != nil {
			t.Fatal(err)
		}
		exits[exitOf(d.Runs)] = true
		check([]string{"report", part}, d.Runs)
		all = append(all, d.Runs...)
	}
	if !exits[exitOK] || !exits[exitViolated] || !exits[exitInconclusive] {
		t.Errorf("the parts exit %v: want runs that exit 0, 1 and 4", exits)
	}
	// merge lays the runs out in the order of its arguments, here the
	// order read.
	check(append([]string{"report", "merge"}, parts...), all)
}
