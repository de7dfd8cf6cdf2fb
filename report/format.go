package report

import (
	"fmt"
	"io"
	"sort"
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

// Reporters are the formats by name.
var Reporters = map[string]Reporter{
	"table":    Table,
	"json":     JSON,
	"junit":    JUnit,
	"markdown": Markdown,
	"html":     HTML,
}

// Formats lists the reporters' names, sorted.
func Formats() []string {
	names := make([]string, 0, len(Reporters))
	for n := range Reporters {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Lookup finds a reporter by name, or says which exist.
func Lookup(name string) (Reporter, error) {
	if r, ok := Reporters[name]; ok {
		return r, nil
	}
	return nil, fmt.Errorf("unknown format %q (want one of: %s)", name, strings.Join(Formats(), ", "))
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
