package cmd

import (
	"context"
	"errors"
	"fmt"

	"github.com/racetest/racetest/report"
)

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
