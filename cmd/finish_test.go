package cmd

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
)

// TestFinishEndsEveryVerbAlike: the report goes to stdout, an
// INCONCLUSIVE run without --strict gets the hint on stderr and exits 0,
// with --strict it exits 4, and a report that cannot be written is said as
// such.
func TestFinishEndsEveryVerbAlike(t *testing.T) {
	flat := &runner.Result{Attempts: 4, Allowed: 1, Planned: 3}
	for i := range 3 {
		flat.Bursts = append(flat.Bursts, runner.Burst{Index: i, Effects: 1, Allowed: 1, Overlap: 1, Outcomes: [runner.NumClasses]int{1, 3}})
	}
	c := report.Case{Name: "flat", Scenario: "unique-insert", Backend: "memory", Expect: report.Expect{Kind: "safe"}, Result: flat}
	ctx := context.Background()
	reporter := func(w io.Writer, cases []report.Case, _ report.Options) error {
		_, err := io.WriteString(w, "report of "+cases[0].Name)
		return err
	}

	s, out, errOut := testStreams()
	if err := finish(ctx, s, reporter, []report.Case{c}, report.Options{}); err != nil {
		t.Errorf("inconclusive without --strict: %v, want exit 0", err)
	}
	if out.String() != "report of flat" || !strings.Contains(errOut.String(), "or --strict makes it fail") {
		t.Errorf("stdout %q, stderr %q: want the report, and the hint on stderr", out, errOut)
	}

	c.Strict = true
	s, _, errOut = testStreams()
	if code := exitCode(finish(ctx, s, reporter, []report.Case{c}, report.Options{})); code != exitInconclusive || strings.Contains(errOut.String(), "or --strict makes it fail") {
		t.Errorf("inconclusive with --strict: exit %d, stderr %q; want 4 and no hint", code, errOut)
	}

	// --expect safe asked for proof: INCONCLUSIVE does not meet it.
	c.Strict, c.ProveSafe = false, true
	s, _, errOut = testStreams()
	if code := exitCode(finish(ctx, s, reporter, []report.Case{c}, report.Options{})); code != exitInconclusive || strings.Contains(errOut.String(), "or --strict makes it fail") {
		t.Errorf("inconclusive under --expect safe: exit %d, stderr %q; want 4 and no hint", code, errOut)
	}

	broken := errors.New("disk full")
	s, _, _ = testStreams()
	err := finish(ctx, s, func(io.Writer, []report.Case, report.Options) error { return broken }, []report.Case{c}, report.Options{})
	if !errors.Is(err, broken) || !strings.Contains(err.Error(), "writing the report") {
		t.Errorf("a report that cannot be written: %v", err)
	}
}

// TestNothingRan: a single table run that fired no burst is its setup
// error alone; a run that fired bursts, an interrupted one, another format
// or several cases get their report.
func TestNothingRan(t *testing.T) {
	down := errors.New("connection refused")
	empty := report.Case{Err: down}
	fired := report.Case{Err: down, Result: &runner.Result{Bursts: []runner.Burst{{}}}}
	for _, tc := range []struct {
		name   string
		format string
		cases  []report.Case
		setup  bool
	}{
		{"table, nothing ran", "table", []report.Case{empty}, true},
		{"table, an empty result", "table", []report.Case{{Err: down, Result: &runner.Result{}}}, true},
		{"json", "json", []report.Case{empty}, false},
		{"bursts fired", "table", []report.Case{fired}, false},
		{"no error", "table", []report.Case{{}}, false},
		{"interrupted", "table", []report.Case{{Err: context.Canceled}}, false},
		{"two cases", "table", []report.Case{empty, empty}, false},
	} {
		err := nothingRan(tc.format, tc.cases)
		if got := err != nil && exitCode(err) == exitSetup && errors.Is(err, down); got != tc.setup {
			t.Errorf("%s: %v, want a setup error: %v", tc.name, err, tc.setup)
		}
	}
}

// fullDisk is standard output on a full disk: every write fails.
type fullDisk struct{}

func (fullDisk) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// A report that cannot be written is exit 3 on every format and verb, naming
// standard output, never exit 2 (usage) with a pointer to --help: the
// command line was right, and a gate whose report is missing must not pass.
// The table checked none of its writes, and a full disk read as success.
func TestReportWriteFailureIsExit3(t *testing.T) {
	for _, format := range []string{"table", "json", "markdown", "junit", "html"} {
		for _, args := range [][]string{
			{"run", "check-then-write", "--bursts", "2", "--expect", "race"},
			{"demo", "--bursts", "2"},
		} {
			s, _, errOut := testStreams()
			s.Out = fullDisk{}
			code := execIO(t, s, memoryOnly(), append(args, "-o", format)...)
			if code != exitSetup || !strings.Contains(errOut.String(), "writing the report to standard output: no space left on device") ||
				strings.Contains(errOut.String(), "--help") {
				t.Errorf("%s -o %s to a full disk: exit %d, stderr %q; want 3, naming standard output, no --help", args[0], format, code, errOut)
			}
		}
	}
}
