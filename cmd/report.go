package cmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/racetest/racetest/internal/printable"
	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/spf13/cobra"
)

// reportCmdOptions are the parsed flags of 'racetest report'.
type reportCmdOptions struct {
	*factory
	File   string
	Format string
	Title  string
}

// newCmdReport builds 'racetest report FILE.json': a saved JSON report
// rendered again, in any format, as 'vegeta report' does.
func newCmdReport(f *factory, runF func(context.Context, *reportCmdOptions) error) *cobra.Command {
	opts := &reportCmdOptions{factory: f}
	c := &cobra.Command{
		Use:   "report FILE.json",
		Short: "Render a saved JSON report again: as a table, Markdown, JUnit XML or an HTML page",
		Long: `report reads a JSON report written by 'run', 'demo', 'suite' or 'http' (--format json, or
suite's --json FILE) and renders it again, without running anything. The verdicts are
assessed again from the bursts' figures the report carries; a verdict that differs from
the one recorded is named on stderr. FILE "-" reads standard input.`,
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
	c.AddCommand(newCmdReportMerge(f, nil))
	return c
}

func runReport(ctx context.Context, o *reportCmdOptions) error {
	reporter, err := report.Lookup(o.Format)
	if err != nil {
		return usageError(err)
	}
	doc, err := readReport(ctx, o.IO, o.File)
	if err != nil {
		return err
	}
	return renderDocument(ctx, o, reporter, doc)
}

// maxReportSize is the largest JSON report 'racetest report' reads: about
// 200,000 bursts' figures. A larger file (or a stream that never ends) is
// refused at once, before it takes the machine's memory.
const maxReportSize = 32 << 20

// readReport reads the JSON report file names ("-": standard input), up
// to MaxReportSize, and stops reading when ctx ends (Ctrl-C).
func readReport(ctx context.Context, s *ioStreams, file string) (report.Document, error) {
	var in io.Reader = s.In
	name := "<stdin>"
	if file != "-" {
		fh, err := os.Open(file)
		if err != nil {
			return report.Document{}, inputErrorf("cannot read the report: %w", err)
		}
		defer fh.Close()
		st, err := fh.Stat()
		if err != nil {
			return report.Document{}, inputErrorf("cannot read the report: %w", err)
		}
		if !st.Mode().IsRegular() {
			return report.Document{}, inputErrorf("%s is not a regular file (%s): save the report to a file, or pipe it to 'racetest report -'", file, st.Mode().Type())
		}
		if st.Size() > maxReportSize {
			return report.Document{}, inputErrorf("%s is %d MiB, more than the %d MiB a report may be: render the shards or cases apart", file, st.Size()>>20, maxReportSize>>20)
		}
		in, name = fh, file
	}
	data, err := io.ReadAll(&ctxReader{ctx: ctx, r: io.LimitReader(in, maxReportSize+1)})
	if err != nil {
		if ctx.Err() != nil {
			return report.Document{}, context.Canceled
		}
		return report.Document{}, inputErrorf("%s: %w", name, err)
	}
	if len(data) > maxReportSize {
		return report.Document{}, inputErrorf("%s: more than the %d MiB a report may be: render the shards or cases apart", name, maxReportSize>>20)
	}
	doc, err := report.ReadDocument(bytes.NewReader(data))
	if err != nil {
		return report.Document{}, inputErrorf("%s: %w", name, err)
	}
	return doc, nil
}

// ctxReader stops a read between two chunks once ctx ends, so that an
// interrupt stops a read of a stream that never ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// renderDocument renders a saved report with reporter and returns the
// exit its verdicts give, naming on stderr a verdict this racetest judges
// otherwise than the one recorded.
func renderDocument(ctx context.Context, o *reportCmdOptions, reporter report.Reporter, doc report.Document) error {
	cases, err := doc.Cases()
	if err != nil {
		return inputErrorf("%w", err)
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
	if o.Format != "json" {
		// A saved report is data from elsewhere: an ESC or BEL in it must
		// not reach a terminal as a control sequence, nor a page or a CI
		// log that a person opens with cat. JSON escapes them itself, and
		// keeps the data as it was.
		title = printable.Line(title)
		for i := range cases {
			cases[i] = printableCase(cases[i])
		}
	}
	if err := reporter(o.IO.Out, cases, reportOptions(o.IO, report.Options{Timeline: true, Version: doc.Version, Title: title,
		// A matrix's report is rendered as a matrix again.
		Matrix: len(doc.Matrix) > 0})); err != nil {
		return outputError("report", err)
	}
	err = verdictError(ctx, cases)
	if errors.Is(err, context.Canceled) && ctx.Err() == nil {
		// The run in the report was cut short, not this command.
		return &exitError{code: exitViolated, err: errors.New("a run in the report was interrupted before it finished")}
	}
	return err
}

// printableCase is c with every text a person reads escaped by
// printable: control characters become visible escapes.
func printableCase(c report.Case) report.Case {
	c.Name, c.Scenario, c.Backend = printable.Line(c.Name), printable.Line(c.Scenario), printable.Line(c.Backend)
	c.Lesson, c.Release, c.Command = printable.Line(c.Lesson), printable.Line(c.Release), printable.Line(c.Command)
	settings := make(map[string]string, len(c.Settings))
	for k, v := range c.Settings {
		settings[printable.Line(k)] = printable.Line(v)
	}
	c.Settings = settings
	story := make([]report.StoryPart, len(c.Story))
	for i, p := range c.Story {
		story[i] = report.StoryPart{Title: printable.Line(p.Title), Text: printable.Text(p.Text), Code: p.Code}
	}
	c.Story = story
	if c.Err != nil && !errors.Is(c.Err, context.Canceled) {
		c.Err = errors.New(printable.Text(c.Err.Error()))
	}
	if c.Result != nil {
		r := *c.Result
		r.Server, r.Diagnosis, r.Release = printable.Line(r.Server), printable.Line(r.Diagnosis), printable.Line(r.Release)
		r.Notes = make([]string, len(c.Result.Notes))
		for i, n := range c.Result.Notes {
			r.Notes[i] = printable.Line(n)
		}
		r.Checks = make([]runner.Check, len(c.Result.Checks))
		for i, ch := range c.Result.Checks {
			ch.Name, ch.Detail = printable.Line(ch.Name), printable.Line(ch.Detail)
			r.Checks[i] = ch
		}
		c.Result = &r
	}
	return c
}

// newCmdReportMerge builds 'racetest report merge': the JSON reports of a
// suite's shards as one report, with the exit code of the whole.
func newCmdReportMerge(f *factory, runF func(context.Context, *reportCmdOptions, []string) error) *cobra.Command {
	opts := &reportCmdOptions{factory: f}
	c := &cobra.Command{
		Use:   "merge A.json B.json [...]",
		Short: "Merge the JSON reports of a suite's shards into one report, with the exit code of the whole",
		Long: `merge reads the JSON reports of the shards of one suite ('racetest suite FILE --shard K/N
--json part-K.json', one per CI job) and renders them as one report, each case once, in any
format; its exit code is the one a single run of the whole suite would give. A run found in
two reports, figure for figure (the same file given twice), is refused. Each part's report says
which part it is, and merge takes only the whole set: every part from 1 to N once, of one suite,
each with all its cases; a part missing or cut short (its CI job died, or timed out) exits 2 and
names it, rather than a verdict on the cases the other parts ran.`,
		Example: `  racetest report merge part-1.json part-2.json part-3.json
  racetest report merge parts/*.json -o junit > racetest.xml
  racetest report merge parts/*.json -o markdown >> "$GITHUB_STEP_SUMMARY"`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 1 {
				return usageErrorf("report merge takes the shards' JSON reports, got none")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if runF != nil {
				return runF(c.Context(), opts, args)
			}
			return runReportMerge(c.Context(), opts, args)
		},
	}
	fs := c.Flags()
	fs.StringVarP(&opts.Format, "format", "o", "table", "output format: "+strings.Join(report.Formats(), ", "))
	fs.StringVar(&opts.Title, "title", "", "a title above the report (default: the shards' own, when they agree)")
	completeEnums(c, f.Registry)
	return c
}

func runReportMerge(ctx context.Context, o *reportCmdOptions, files []string) error {
	reporter, err := report.Lookup(o.Format)
	if err != nil {
		return usageError(err)
	}
	if err := checkMergeBounds(files); err != nil {
		return err
	}
	seen := map[string]bool{}
	docs := make([]report.Document, 0, len(files))
	for _, file := range files {
		if seen[file] {
			return usageErrorf("%s is named twice: each shard's report once", file)
		}
		seen[file] = true
		if file == "-" {
			return usageErrorf("report merge reads files, not standard input: save each shard's report")
		}
		doc, err := readReport(ctx, o.IO, file)
		if err != nil {
			return err
		}
		docs = append(docs, doc)
	}
	doc, err := report.Merge(docs, files)
	if err != nil {
		return inputErrorf("%w", err)
	}
	return renderDocument(ctx, o, reporter, doc)
}

// maxMergeParts is the most parts 'report merge' takes: a suite split in
// more parts than this is no CI matrix.
const maxMergeParts = 1000

// checkMergeBounds refuses, before reading any, more parts than
// MaxMergeParts, and regular files that together hold more than the
// MaxReportSize a merged report may be: 10,000 parts took 35 s and 1.6 GB
// before the merge said no.
func checkMergeBounds(files []string) error {
	if len(files) > maxMergeParts {
		return usageErrorf("report merge takes at most %d parts, got %d: is the glob the one you meant?", maxMergeParts, len(files))
	}
	var total int64
	for _, file := range files {
		st, err := os.Stat(file)
		if err != nil || !st.Mode().IsRegular() {
			continue // readReport says what is wrong with it
		}
		if total += st.Size(); total > maxReportSize {
			return inputErrorf("the parts up to %s hold more than the %d MiB a merged report may be: merge fewer parts, or render them apart", file, maxReportSize>>20)
		}
	}
	return nil
}

// reportOptions completes o with what the streams say and the user asked
// of the output: colour, width, -q and -v.
func reportOptions(s *ioStreams, o report.Options) report.Options {
	o.Color = s.Color()
	o.Width = s.Width()
	o.Quiet, o.Verbose = s.Quiet, s.Verbose
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
