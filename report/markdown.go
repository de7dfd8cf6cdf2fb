package report

import (
	"fmt"
	"github.com/racetest/racetest/runner"
	"io"
	"strings"
)

// Markdown writes a CI job summary: one line saying whether the gate held,
// one table with every case's verdict (with Options.Matrix, the matrix's
// tables instead), then for each case that did not meet
// its expectation why, and the lesson of its scenario.
func Markdown(w io.Writer, cases []Case, o Options) error {
	as := make([]Assessment, len(cases))
	met := 0
	for i, c := range cases {
		as[i] = Assess(c)
		if as[i].Met {
			met++
		}
	}
	title := o.Title
	if title == "" {
		title = "racetest"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n", mdEscape(title))
	what := "cases"
	if o.Matrix {
		what = "cells"
	}
	if met == len(cases) {
		fmt.Fprintf(&b, "**%d of %d %s met their expectation.**\n\n", met, len(cases), what)
	} else {
		fmt.Fprintf(&b, "**%d of %d %s did not meet their expectation.**\n\n", len(cases)-met, len(cases), what)
	}
	if o.Matrix {
		mdMatrix(&b, cases, as)
	} else {
		mdCases(&b, cases, as)
	}
	for i, c := range cases {
		a := as[i]
		if a.Met && a.Verdict != Inconclusive {
			continue
		}
		fmt.Fprintf(&b, "\n### %s %s\n\n", mdMark(a), mdEscape(where(c)))
		if a.Why != "" {
			fmt.Fprintf(&b, "%s.\n", mdEscape(strings.TrimSuffix(a.Why, ".")))
		}
		if a.Verdict == Race && c.Result != nil && brokenWhy(c.Result) != "" {
			fmt.Fprintf(&b, "%s (95%% upper bound on the rate %s).\n", mdEscape(brokenWhy(c.Result)), percent(a.Upper))
		}
		if a.Verdict == Race && c.Result != nil && overAllowance(c.Result) > 0 {
			r := c.Result
			w := worstBurst(r)
			fmt.Fprintf(&b, "%d of %d bursts left more than %s (%s; 95%% upper bound %s); the worst, burst #%d, left %d.\n",
				a.Violations, a.Bursts, ceiling(r), percent(a.Rate), percent(a.Upper), w.Index, w.Effects)
		}
		if a.Verdict == Lost && c.Result != nil {
			r := c.Result
			fmt.Fprintf(&b, "%d of %d bursts left fewer than %s while an attempt claimed it done (%s; 95%% upper bound %s); the fewest left %d.\n",
				a.Violations, a.Bursts, floor(r), percent(a.Rate), percent(a.Upper), r.EffectsSummary().Min)
		}
		if c.Lesson != "" {
			fmt.Fprintf(&b, "\n> **Lesson:** %s\n", mdEscape(c.Lesson))
		}
		if cmd := reproduce(c); cmd != "" {
			fmt.Fprintf(&b, "\nReproduce: %s\n", mdCode(cmd))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Headline is a case in one line: what ran where, the verdict, and whether
// it met the expectation (or why not). A CI log prints one per case, and
// JUnit uses it as the failure message.
func Headline(c Case) string {
	a := Assess(c)
	at := where(c)
	switch {
	case a.Verdict == Errored && !a.Interrupted:
		return at + " could not run: " + a.Why
	case !a.Met && a.Verdict == Inconclusive:
		return at + ": INCONCLUSIVE under --strict, " + a.Why
	case !a.Met:
		return at + ": " + a.Why
	case a.Verdict == Inconclusive:
		return at + ": INCONCLUSIVE, " + a.Why
	}
	detail := ""
	if r := c.Result; r != nil {
		detail = " (" + judgedLine(r, a) + ")"
	}
	return fmt.Sprintf("%s: %s%s, expected %s", at, verdictCell(a), detail, c.Expect)
}

// judgedLine is a run's figures in a few words, by what judged it: its
// effects against the allowance, its bursts against the same attempts
// one at a time (--effects auto, with the worst difference), or its
// invariants (a run with no effects count).
func judgedLine(r *runner.Result, a Assessment) string {
	switch {
	case twinRun(r):
		s := fmt.Sprintf("%d of %d bursts changed the database otherwise than the same attempts one at a time", a.Violations, a.Bursts)
		if w := worstTwin(r); w != nil && (a.Verdict == Race || a.Verdict == Lost) && len(w.Twin.Diffs) > 0 {
			s += fmt.Sprintf("; burst %d: %s", w.Index, w.Twin.Diffs[0])
		}
		if len(r.Invariants) > 0 {
			if why := brokenWhy(r); why != "" {
				s += "; " + why
			}
		}
		return s
	case r.Uncounted:
		if why := brokenWhy(r); why != "" {
			return why
		}
		return fmt.Sprintf("0 of %d bursts broke %s", a.Bursts, invariantsNamed(r))
	case a.Verdict == Lost:
		return fmt.Sprintf("%d of %d bursts under %s while an attempt claimed it done", a.Violations, a.Bursts, floor(r))
	}
	return fmt.Sprintf("%d of %d bursts over %s", a.Violations, a.Bursts, ceiling(r))
}

// invariantsNamed is "invariant NAME", or "any of its 3 invariants".
func invariantsNamed(r *runner.Result) string {
	if len(r.Invariants) == 1 {
		return "invariant " + r.Invariants[0]
	}
	return fmt.Sprintf("any of its %d invariants", len(r.Invariants))
}

// worstCell is a Markdown row's "Worst burst": the most effects, or, for a
// run judged otherwise, what the worst burst did against what judged it.
func worstCell(r *runner.Result) string {
	switch {
	case twinRun(r):
		w := worstTwin(r)
		if w == nil || len(w.Twin.Diffs) == 0 {
			return "as one at a time"
		}
		return w.Twin.Diffs[0].String()
	case r.Uncounted:
		most := 0
		for i := range r.Invariants {
			_, m := r.BrokenBursts(i)
			most = max(most, m)
		}
		if most == 0 {
			return "no invariant broken"
		}
		return plural(most, "violation") + " of an invariant"
	}
	return plural(r.EffectsSummary().Max, "effect")
}

// expectWord is the expectation as a report's EXPECTED column shows it
// without colour: "safe", or "safe unproven" for an INCONCLUSIVE run, which
// proves nothing even where it fails nothing.
func expectWord(c Case, a Assessment) string {
	if a.Expectation() == "unproven" {
		return c.Expect.String() + " unproven"
	}
	return c.Expect.String()
}

func mdMark(a Assessment) string {
	switch {
	case a.Verdict == Errored && !a.Interrupted:
		return "⛔"
	case !a.Met:
		return "❌"
	case a.Verdict == Inconclusive:
		return "⚠️"
	}
	return "✅"
}

// mdEscape keeps a value inside its table cell and out of Markdown syntax.
// mdCode is s as a Markdown code span that nothing in s can end: fenced
// with one backtick more than its longest run of them, and padded where
// it starts or ends with one (CommonMark 6.1).
func mdCode(s string) string {
	longest, run := 0, 0
	for _, r := range s {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", longest+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " "
	}
	return fence + s + fence
}

func mdEscape(s string) string {
	return strings.NewReplacer(
		"|", `\|`, "\n", " ", "\r", " ", "*", `\*`, "_", `\_`, "`", "\\`", "<", "&lt;", ">", "&gt;",
		"[", `\[`, "]", `\]`,
	).Replace(s)
}

// mdCases is one table row per case.
func mdCases(b *strings.Builder, cases []Case, as []Assessment) {
	// The Server column only where some case measured one (a memory run
	// has none), and a dash where one did not: never an empty cell.
	withServer := false
	for _, c := range cases {
		withServer = withServer || (c.Result != nil && c.Result.Server != "")
	}
	if withServer {
		b.WriteString("| | Case | Backend | Server | N × bursts | Violated | Worst burst | Verdict | Expected |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	} else {
		b.WriteString("| | Case | Backend | N × bursts | Violated | Worst burst | Verdict | Expected |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|\n")
	}
	for i, c := range cases {
		a := as[i]
		server, shape, worst := "–", "–", "–"
		if r := c.Result; r != nil {
			if r.Server != "" {
				server = mdEscape(r.Server)
			}
			if len(r.Bursts) > 0 {
				shape = fmt.Sprintf("%d × %d", r.Attempts, len(r.Bursts))
				worst = mdEscape(worstCell(r))
			}
		}
		serverCell := ""
		if withServer {
			serverCell = " " + server + " |"
		}
		fmt.Fprintf(b, "| %s | %s | %s |%s %s | %d/%d | %s | %s | %s |\n",
			mdMark(a), mdEscape(displayName(c)), mdEscape(c.Backend), serverCell, shape,
			a.Violations, a.Bursts, worst, mdEscape(verdictCell(a)), mdEscape(expectWord(c, a)))
	}
}

// mdMatrix is the matrix: per backend, its server and the settings that
// change outcomes, then a row per scenario and variant and a column per
// isolation level; ❌ marks a cell that is not the catalog's expectation.
func mdMatrix(b *strings.Builder, cases []Case, as []Assessment) {
	for _, t := range Matrix(cases) {
		fmt.Fprintf(b, "### %s", mdEscape(t.Backend))
		if t.Server != "" {
			fmt.Fprintf(b, " — %s", mdEscape(t.Server))
		}
		b.WriteString("\n\n")
		for _, s := range t.Settings {
			fmt.Fprintf(b, "- %s\n", mdEscape(s))
		}
		if len(t.Settings) > 0 {
			b.WriteString("\n")
		}
		b.WriteString("| Scenario |")
		for _, l := range t.Isolations {
			fmt.Fprintf(b, " %s |", mdEscape(levelHeader(l, false)))
		}
		b.WriteString("\n|---|" + strings.Repeat("---|", len(t.Isolations)) + "\n")
		for _, r := range t.Rows {
			fmt.Fprintf(b, "| %s |", mdEscape(rowName(r.Scenario, r.Variant)))
			for _, i := range r.Cells {
				cell := "–"
				if i >= 0 {
					cell = strings.TrimPrefix(matrixCell(cases[i], as[i], conflictsFull), "✗ ")
					switch {
					case as[i].Verdict == Errored:
						cell = "⛔ " + cell
					case !as[i].Met:
						cell = "❌ " + cell + " (expected " + strings.ToUpper(cases[i].Expect.String()) + ")"
					}
					cell = mdEscape(cell)
				}
				fmt.Fprintf(b, " %s |", cell)
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
}
