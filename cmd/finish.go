package cmd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/racetest/racetest/report"
)

// finishFlags are the flags the end of a run reads, whatever the verb:
// what the run must show, --strict, the report's format and its timeline.
type finishFlags struct {
	Expect   string
	Strict   bool
	Format   string
	Timeline bool
}

// register adds the flags; expect and timeline say what they mean to the
// verb at hand.
func (ff *finishFlags) register(fs *pflag.FlagSet, expect, timeline string) {
	fs.StringVar(&ff.Expect, "expect", "safe", expect)
	fs.BoolVar(&ff.Strict, "strict", false, "fail (exit 4) when the bursts did not overlap enough to prove anything")
	fs.StringVarP(&ff.Format, "format", "o", "table", "output format: "+strings.Join(report.Formats(), ", "))
	fs.BoolVar(&ff.Timeline, "timeline", true, timeline)
}

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
// standard output, the --strict hint on stderr, and the exit code the
// verdicts decide.
func finish(ctx context.Context, s *IOStreams, reporter report.Reporter, cases []report.Case, opts report.Options) error {
	if err := reporter(s.Out, cases, opts); err != nil {
		return fmt.Errorf("writing the report: %w", err)
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
