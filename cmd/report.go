package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/scenarios"
	"github.com/spf13/cobra"
)

// ReportOptions are the parsed flags of 'racetest report'.
type ReportOptions struct {
	*Factory
	File   string
	Format string
	Title  string
}

// NewCmdReport builds 'racetest report FILE.json': a saved JSON report
// rendered again, in any format, as 'vegeta report' does.
func NewCmdReport(f *Factory, runF func(context.Context, *ReportOptions) error) *cobra.Command {
	opts := &ReportOptions{Factory: f}
	c := &cobra.Command{
		Use:   "report FILE.json",
		Short: "Render a saved JSON report again: as a table, Markdown, JUnit XML or an HTML page",
		Long: `report reads a JSON report written by 'run', 'demo', 'suite' or 'http' (--format json, or
suite's --json FILE) and renders it again, without running anything. The verdicts are
assessed again from the bursts' figures the report carries; a verdict that differs from
the one recorded is named on stderr. FILE "-" reads standard input.

Exit codes: 0 every expectation met; 1 an expectation was violated; 2 the file or the
flags are wrong; 3 a run in the report could not be carried out; 4 a run was
inconclusive under --strict.`,
		Example: `  racetest demo --format json > demo.json
  racetest report demo.json --format html > demo.html
  racetest suite --json report.json ci/racetest.yaml; racetest report report.json -o markdown`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("report takes one JSON report (or - for standard input), got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			opts.File = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runReport(c.Context(), opts)
		},
	}
	fs := c.Flags()
	fs.StringVarP(&opts.Format, "format", "o", "table", "output format: "+strings.Join(report.Formats(), ", "))
	fs.StringVar(&opts.Title, "title", "", "a title above the report (default: the one the report recorded)")
	completeEnums(c, f.Registry)
	return c
}

func runReport(ctx context.Context, o *ReportOptions) error {
	reporter, err := report.Lookup(o.Format)
	if err != nil {
		return usageError(err)
	}
	var in io.Reader = o.IO.In
	name := "<stdin>"
	if o.File != "-" {
		fh, err := os.Open(o.File)
		if err != nil {
			return usageErrorf("cannot read the report: %w", err)
		}
		defer fh.Close()
		in, name = fh, o.File
	}
	doc, err := report.ReadDocument(in)
	if err != nil {
		return usageErrorf("%s: %w", name, err)
	}
	cases, err := doc.Cases()
	if err != nil {
		return usageErrorf("%s: %w", name, err)
	}
	for i, c := range cases {
		a, run := report.Assess(c), doc.Runs[i]
		if a.Verdict != run.Verdict || a.Met != run.ExpectationMet {
			fmt.Fprintf(o.IO.ErrOut, "racetest: warning: %s on %s was recorded as %s (expectation met: %v) by racetest %s; this racetest judges the same bursts %s (met: %v)\n",
				run.Name, run.Backend, run.Verdict, run.ExpectationMet, doc.Version, a.Verdict, a.Met)
		}
	}
	title := o.Title
	if title == "" {
		title = doc.Title
	}
	if err := reporter(o.IO.Out, cases, reportOptions(o.IO, report.Options{Timeline: true, Version: doc.Version, Title: title,
		// A matrix's report is rendered as a matrix again.
		Matrix: len(doc.Matrix) > 0})); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	err = verdictError(ctx, cases)
	if errors.Is(err, context.Canceled) && ctx.Err() == nil {
		// The run in the report was cut short, not this command.
		return &exitError{code: ExitViolated, err: errors.New("a run in the report was interrupted before it finished")}
	}
	return err
}

// reportOptions completes o with what the streams say: colour and width.
func reportOptions(s *IOStreams, o report.Options) report.Options {
	o.Color = s.Color()
	o.Width = s.Width()
	return o
}

// storyOf is a scenario's story as the reports fold it under a case.
func storyOf(spec scenarios.Spec) []report.StoryPart {
	var parts []report.StoryPart
	for _, p := range []report.StoryPart{
		{Title: "The naive code", Text: spec.Story.Naive, Code: true},
		{Title: "Why it breaks", Text: spec.Story.Breaks},
		{Title: "The fix", Text: spec.Story.Fix},
		{Title: "What to look for in the numbers", Text: spec.Story.Numbers},
	} {
		if p.Text != "" {
			parts = append(parts, p)
		}
	}
	return parts
}
