package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		if code != ExitUsage || !strings.Contains(errOut, tc.want) || strings.Contains(errOut, "--help' for usage") != tc.help {
			t.Errorf("%v: exit %d, stderr %q; want exit %d with %q, a pointer at --help: %v", tc.args, code, errOut, ExitUsage, tc.want, tc.help)
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
