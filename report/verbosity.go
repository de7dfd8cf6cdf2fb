package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/racetest/racetest/runner"
)

// VerdictLine is a case in one line for a person or a grep: a status word
// (ok, FAIL, WARN, ERROR) and the Headline. -q prints only these.
func VerdictLine(c Case) string {
	status, _ := verdictStatus(Assess(c))
	return fmt.Sprintf("%-5s %s", status, Headline(c))
}

// verdictStatus says in a word whether a case passed, and its colour.
func verdictStatus(a Assessment) (string, string) {
	switch {
	case a.Verdict == Errored && !a.Interrupted:
		return "ERROR", ansiRed
	case !a.Met:
		return "FAIL", ansiRed
	case a.Verdict == Inconclusive:
		return "WARN", ansiYellow
	}
	return "ok", ansiGreen
}

// verdictLines writes one VerdictLine per case, the status coloured.
func verdictLines(w io.Writer, cases []Case, paint func(string, string) string) {
	for _, c := range cases {
		status, code := verdictStatus(Assess(c))
		fmt.Fprintf(w, "%s %s\n", paint(code, fmt.Sprintf("%-5s", status)), Headline(c))
	}
}

// burstLines writes, for each case that ran, one line per burst: what the
// store held against what was allowed, how the attempts came out, and how
// well the burst overlapped — the figures the table's row summarises.
func burstLines(w io.Writer, cases []Case, paint func(string, string) string) {
	for _, c := range cases {
		r := c.Result
		if r == nil || len(r.Bursts) == 0 {
			continue
		}
		fmt.Fprintln(w)
		fmt.Fprintln(w, paint(ansiBold, fmt.Sprintf("bursts of %s:", placeOf(c))))
		idx := len(fmt.Sprint(r.Bursts[len(r.Bursts)-1].Index))
		eff := len(fmt.Sprint(r.EffectsSummary().Max))
		for _, b := range r.Bursts {
			fmt.Fprintln(w, strings.TrimRight(burstLine(b, idx, eff), " "))
		}
	}
}

// burstLine is one burst in one line; idx and eff are the widths of the
// burst numbers and effect counts, so that the lines align.
func burstLine(b runner.Burst, idx, eff int) string {
	mark := "ok"
	switch {
	case b.Violated():
		mark = "OVER"
	case b.Lost():
		mark = "LOST"
	case !b.Tested():
		mark = "untested"
	}
	allowed := fmt.Sprint(b.Allowed)
	if b.Required != b.Allowed {
		allowed = fmt.Sprintf("%d-%d", b.Required, b.Allowed)
	}
	var outs []string
	for _, cl := range runner.Classes() {
		if n := b.Outcomes[cl]; n > 0 || cl <= runner.Declined {
			outs = append(outs, fmt.Sprintf("%s %d", cl, n))
		}
	}
	line := fmt.Sprintf("  burst %*d  effects %*d (allowed %s)  %-8s  %s  overlap %d  spread %s",
		idx, b.Index, eff, b.Effects, allowed, mark, strings.Join(outs, ", "), b.Overlap, human(b.Spread))
	if b.Duration > 0 {
		line += "  took " + human(b.Duration)
	}
	return line
}
