package report

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Options shape how a reporter writes.
type Options struct {
	// Color adds ANSI colour; only for a terminal.
	Color bool
	// Timeline adds the example burst's timeline under each RACE.
	Timeline bool
	// Version is racetest's version, recorded in JSON.
	Version string
	// Title is a line printed above the table.
	Title string
	// Shard is recorded in JSON: the part of a suite these cases are.
	Shard *ShardJSON
	// Brief leaves out the details of cases whose row says it all (SAFE as
	// expected, with no check, error or note of their own): for many cases.
	Brief bool
	// Summary leaves out the per-case details: the table, the lessons, and
	// one line for each case that did not meet its expectation.
	Summary bool
	// TableLast prints the table again after the details, so that the
	// verdicts are on screen at the end of a long output.
	TableLast bool
	// Width is the columns the table may use (0: DefaultWidth). A row stays
	// one line: headers shorten, columns leave, names are cut to fit.
	Width int
	// Quiet makes the table one verdict line per case and nothing else
	// (-q). The other formats are complete by nature and ignore it.
	Quiet bool
	// Verbose adds, under the table, a line per burst of each case (-v).
	Verbose bool
	// Matrix lays the cases out as 'racetest matrix' does: per backend a
	// table with a row per scenario and variant and a column per isolation
	// level (see Matrix). Each format shows it in its own way.
	Matrix bool
}

// DefaultWidth is the table's width where no terminal says otherwise (a
// pipe, a CI log, a file).
const DefaultWidth = 120

// Reporter writes cases in one format.
type Reporter func(w io.Writer, cases []Case, o Options) error

// Format is one output format: its name (--format NAME), how it renders
// the cases of runs and an exploration, and, for a format a file can hold,
// what a suite writes with --NAME FILE.
type Format struct {
	Name    string
	Run     Reporter
	Explore ExploreReporter
	// File describes the format as a suite's --NAME FILE writes it ("a
	// JUnit XML report"); empty for the table, which is for a terminal.
	File string
	// Golden is the file under testdata/ that pins the format.
	Golden string
}

// formats is the one list of output formats: -o, the suite's file
// outputs and the golden tests are all read from it. A new format is a row
// here and its golden file. The order is the order a suite writes (and
// checks) its files in.
var formats = []Format{
	{Name: "junit", Run: JUnit, Explore: ExploreJUnit, File: "a JUnit XML report", Golden: "report.junit.xml"},
	{Name: "markdown", Run: Markdown, Explore: ExploreMarkdown, File: "a Markdown summary (e.g. $GITHUB_STEP_SUMMARY)", Golden: "report.md"},
	{Name: "json", Run: JSON, Explore: ExploreJSON, File: "the JSON report (the same schema as 'run --format json')", Golden: "report.json"},
	{Name: "html", Run: HTML, Explore: ExploreHTML, File: "the HTML report (one self-contained page)", Golden: "report.html"},
	{Name: "table", Run: Table, Explore: ExploreText, Golden: "report.table"},
}

// AllFormats lists the output formats: a copy, so that no caller changes
// what the others see.
func AllFormats() []Format { return slices.Clone(formats) }

// Formats lists the formats' names, sorted.
func Formats() []string {
	names := make([]string, len(formats))
	for i, f := range formats {
		names[i] = f.Name
	}
	slices.Sort(names)
	return names
}

// FormatOf finds a format by name, or says which exist.
func FormatOf(name string) (Format, error) {
	for _, f := range formats {
		if f.Name == name {
			return f, nil
		}
	}
	return Format{}, fmt.Errorf("unknown format %q (want one of: %s)", name, strings.Join(Formats(), ", "))
}

// Lookup finds the reporter of runs by name, or says which exist.
func Lookup(name string) (Reporter, error) {
	f, err := FormatOf(name)
	return f.Run, err
}

// human prints a duration with a unit a person reads at a glance.
func human(d time.Duration) string {
	switch {
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", d.Nanoseconds())
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000)
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// percent prints a rate with enough digits to be honest about small ones.
func percent(x float64) string {
	switch {
	case x == 0:
		return "0%"
	case x < 0.001:
		return fmt.Sprintf("%.3f%%", x*100)
	case x < 0.1:
		return fmt.Sprintf("%.1f%%", x*100)
	}
	return fmt.Sprintf("%.0f%%", x*100)
}
