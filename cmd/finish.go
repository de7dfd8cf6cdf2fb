package cmd

import (
	"context"
	"errors"
	"strings"

	"github.com/spf13/pflag"

	"github.com/racetest/racetest/report"
)

// finishFlags are the flags the end of a run reads, whatever the verb:
// what the run must show, --strict, --allow-inconclusive, the report's
// format and its timeline.
type finishFlags struct {
	Expect string
	// ExpectGiven: --expect was given. An expectation of SAFE asked for
	// must be proven: INCONCLUSIVE fails it (exit 4) unless
	// AllowInconclusive. The default expectation (safe, unasked) does not.
	ExpectGiven       bool
	Strict            bool
	AllowInconclusive bool
	Format            string
	Timeline          bool
}

// register adds the flags; expect and timeline say what they mean to the
// verb at hand.
func (ff *finishFlags) register(fs *pflag.FlagSet, expect, timeline string) {
	expectFlag(fs, &ff.Expect, &ff.ExpectGiven, expect+expectProof)
	fs.BoolVar(&ff.Strict, "strict", false, strictHelp)
	fs.BoolVar(&ff.AllowInconclusive, "allow-inconclusive", false, allowInconclusiveHelp)
	fs.StringVarP(&ff.Format, "format", "o", "table", "output format: "+strings.Join(report.Formats(), ", "))
	fs.BoolVar(&ff.Timeline, "timeline", true, timeline)
}

// The help of the flags that decide what INCONCLUSIVE exits with.
const (
	expectProof           = "; --expect safe asks for proof: INCONCLUSIVE fails it (exit 4) unless --allow-inconclusive"
	strictHelp            = "fail (exit 4) on INCONCLUSIVE whatever the expectation, even with --allow-inconclusive or no --expect"
	allowInconclusiveHelp = "let INCONCLUSIVE meet --expect safe (exit 0, with a line on stderr); --strict still fails it"
)

// proveSafe reports whether an expectation of SAFE must be proven: asked
// for with --expect, and INCONCLUSIVE not allowed (report.Case.ProveSafe).
func (ff finishFlags) proveSafe() bool { return ff.ExpectGiven && !ff.AllowInconclusive }

// expectFlag registers --expect on fs, noting in given whether it was set
// on the command line (its default, safe, asks for no proof).
func expectFlag(fs *pflag.FlagSet, expect *string, given *bool, usage string) {
	*expect = string(report.ExpectSafe)
	fs.Var(&expectValue{s: expect, given: given}, "expect", usage)
}

// expectValue is --expect's value: a string that remembers it was set.
type expectValue struct {
	s     *string
	given *bool
}

func (v *expectValue) String() string {
	if v.s == nil {
		return ""
	}
	return *v.s
}
func (v *expectValue) Set(s string) error { *v.s, *v.given = s, true; return nil }
func (v *expectValue) Type() string       { return "string" }

// parse looks up the reporter of --format and reads --expect: bad input
// either way.
func (ff finishFlags) parse() (report.Reporter, report.Expect, error) {
	reporter, err := report.Lookup(ff.Format)
	if err != nil {
		return nil, report.Expect{}, usageError(err)
	}
	expect, err := report.ParseExpect(ff.Expect)
	if err != nil {
		return nil, report.Expect{}, usageError(err)
	}
	return reporter, expect, nil
}

// finish ends a verb's run, the same way for every verb: the report on
// standard output, the hint on stderr when an INCONCLUSIVE exits 0, and the
// exit code the verdicts decide.
func finish(ctx context.Context, s *ioStreams, reporter report.Reporter, cases []report.Case, opts report.Options) error {
	if err := reporter(s.Out, cases, opts); err != nil {
		return outputError("report", err)
	}
	strictHint(s.ErrOut, cases)
	return verdictError(ctx, cases)
}

// nothingRan is the setup error of a single run that fired no burst, for
// the table: a table of dashes would only repeat the error. Other formats
// still get their report (a JSON consumer reads the error there).
func nothingRan(format string, cases []report.Case) error {
	if len(cases) != 1 || format != "table" {
		return nil
	}
	c := cases[0]
	if c.Err != nil && (c.Result == nil || len(c.Result.Bursts) == 0) && !errors.Is(c.Err, context.Canceled) {
		return setupError(c.Err)
	}
	return nil
}
