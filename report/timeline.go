package report

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/racetest/racetest/runner"
)

// timelineWidth is the most columns of the time axis; a narrow output
// gets fewer (see timeline).
const timelineWidth = 56

// timelineMinAxis is the fewest columns of the axis, however narrow.
const timelineMinAxis = 24

// timelineRows caps the workers drawn; a burst of thousands is summarised.
const timelineRows = 24

// Timeline draws one burst: for each worker, its marks on a shared time
// axis (R released, c check, a act, D done), so the checks that happened
// before any write are something a reader can see.
func Timeline(w io.Writer, t *runner.Trace) {
	timeline(w, t, DefaultWidth)
}

// timeline draws t within width columns: the axis shrinks to leave room
// for the outcome, and the marks' times are left out when they would not
// fit on any line.
func timeline(w io.Writer, t *runner.Trace, width int) {
	if t == nil || len(t.Workers) == 0 {
		return
	}
	const labelW, frame = 12, 4
	// The outcome gets what the narrowest axis leaves, the axis what the
	// longest outcome leaves.
	outcomeMax := max(width-labelW-frame-1-timelineMinAxis, 12)
	outcomeW := len("executed")
	for i, wt := range t.Workers {
		if i == timelineRows {
			break
		}
		outcomeW = max(outcomeW, utf8.RuneCountInString(outcomeOf(wt, outcomeMax)))
	}
	timelineWidth := min(timelineWidth, max(width-labelW-frame-1-outcomeW, timelineMinAxis))
	var end time.Duration
	for _, wt := range t.Workers {
		if n := len(wt.Marks); n > 0 {
			end = max(end, wt.Marks[n-1].At)
		}
	}
	end = max(end, time.Microsecond)
	steps := scriptSteps(t)
	// Draw the axes first: the legend names only the marks a row shows
	// (a released mark under a check in the same column is not shown).
	axes := make([]string, 0, min(len(t.Workers), timelineRows))
	drawn := map[rune]bool{}
	for i, wt := range t.Workers {
		if i == timelineRows {
			break
		}
		axis := []rune(strings.Repeat(" ", timelineWidth))
		first, last := -1, -1
		for _, m := range wt.Marks {
			col := int(int64(m.At) * int64(timelineWidth-1) / int64(end))
			col = min(max(col, 0), timelineWidth-1)
			if first < 0 {
				first = col
			}
			last = col
		}
		for c := max(first, 0); c <= last && c >= 0; c++ {
			axis[c] = '-'
		}
		for _, m := range wt.Marks {
			col := int(int64(m.At) * int64(timelineWidth-1) / int64(end))
			col = min(max(col, 0), timelineWidth-1)
			if r, ok := steps.runes[m.Name]; ok {
				axis[col] = r
				continue
			}
			axis[col] = markRune(m.Name, axis[col])
		}
		for _, r := range axis {
			drawn[r] = true
		}
		axes = append(axes, string(axis))
	}
	if t.Twin {
		fmt.Fprintf(w, "timeline of burst %d (its change of the database beside the same attempts one at a time is above)\n", t.Burst)
	} else {
		fmt.Fprintf(w, "timeline of burst %d: %d effect(s), %d allowed\n", t.Burst, t.Effects, t.Allowed)
	}
	if l := legend(drawn); l != "" {
		fmt.Fprintln(w, l)
	}
	if len(steps.names) > 0 {
		fmt.Fprintf(w, "steps: %s\n", steps.legend())
	}
	switch {
	case heldBeforeRelease(t) && drawn['R']:
		fmt.Fprintln(w, heldNote)
	case heldBeforeRelease(t):
		fmt.Fprintln(w, heldNoteHidden)
	}
	withTimes := true
	for i, wt := range t.Workers {
		if i == timelineRows {
			break
		}
		withTimes = withTimes && labelW+frame+1+timelineWidth+utf8.RuneCountInString(outcomeOf(wt, outcomeMax))+2+utf8.RuneCountInString(markTimes(wt.Marks)) <= width
	}
	endLabel := human(end)
	fmt.Fprintf(w, "%-12s |0%s%s| %s\n", "worker",
		strings.Repeat(" ", max(timelineWidth-utf8.RuneCountInString(endLabel)-1, 0)), endLabel, "outcome")
	for i, wt := range t.Workers {
		if i == timelineRows {
			fmt.Fprintf(w, "… %d more workers\n", len(t.Workers)-timelineRows)
			break
		}
		label := fmt.Sprintf("w%d r%d", wt.Worker, wt.Replica)
		if wt.Wave > 0 {
			label += fmt.Sprintf(" v%d", wt.Wave)
		}
		line := fmt.Sprintf("%-12s |%s| %s", label, axes[i], outcomeOf(wt, outcomeMax))
		if withTimes {
			line += "  " + markTimes(wt.Marks)
		}
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
}

// outcomeOf is a worker's outcome and, unless it executed, why, in at most
// n columns.
func outcomeOf(wt runner.WorkerTrace, n int) string {
	outcome := wt.Outcome.String()
	if wt.Err != "" && wt.Outcome != runner.Executed {
		outcome += ": " + shorten(wt.Err, 40)
	}
	return shorten(outcome, n)
}

// heldNote says why a row can mark a step before its release: under a wire
// release (last-byte) the step's request is sent but for its last byte, and
// R is when that byte went, the instant the server could start on it.
const heldNote = "left of R: sent but for the last byte, held until R (last-byte release)"

// heldNoteHidden is heldNote where no row draws R: each release fell in
// the column of a step, whose mark is kept (markRune).
const heldNoteHidden = "a step can be marked before its release: sent but for the last byte, held until the release (last-byte release; each release shares a column with a step here, so no R is drawn)"

// heldNoteHTML is heldNote under the HTML timeline, whose marks are dots
// named in its legend.
const heldNoteHTML = "a step marked before its release: sent but for the last byte, held until the release (last-byte)"

// heldBeforeRelease is whether some worker marks a step before its
// "released" mark, as a wire release's workers do.
func heldBeforeRelease(t *runner.Trace) bool {
	for _, wt := range t.Workers {
		if len(wt.Marks) == 0 || wt.Marks[0].Name != "released" {
			continue
		}
		for _, m := range wt.Marks[1:] {
			if m.At < wt.Marks[0].At {
				return true
			}
		}
	}
	return false
}

// legend names the marks the rows draw, and only those ("" when they
// draw none of them: a script's steps have a legend of their own).
func legend(drawn map[rune]bool) string {
	var parts []string
	for _, k := range []struct {
		r    rune
		name string
	}{{'R', "released"}, {'c', "check"}, {'a', "act"}, {'D', "done"}} {
		if drawn[k.r] {
			parts = append(parts, string(k.r)+" "+k.name)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "marks: " + strings.Join(parts, "  ")
}

func markRune(name string, prev rune) rune {
	r := '?'
	switch name {
	case "released":
		r = 'R'
	case "check":
		r = 'c'
	case "act":
		r = 'a'
	case "done":
		r = 'D'
	default:
		if name != "" {
			r = []rune(name)[0]
		}
	}
	// Keep the more telling mark when two fall in one column.
	if prev == 'c' || prev == 'a' {
		if r == 'R' || r == 'D' {
			return prev
		}
	}
	return r
}

func markTimes(ms []runner.Mark) string {
	var parts []string
	for _, m := range ms {
		if m.Name == "released" || m.Name == "done" {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s@%s", m.Name, human(m.At)))
	}
	return strings.Join(parts, " ")
}

func shorten(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// stepSymbols name a script's steps on the axis, in order of first use.
const stepSymbols = "123456789befghijkmnopqstuvwxyz"

// steps maps the marks of a script's statements ("redeem.sql:4") to one
// symbol each, so the axis shows which statements interleaved.
type steps struct {
	names []string
	runes map[string]rune
}

func scriptSteps(t *runner.Trace) steps {
	s := steps{runes: map[string]rune{}}
	for _, wt := range t.Workers {
		for _, m := range wt.Marks {
			if _, seen := s.runes[m.Name]; seen || !isStepName(m.Name) || len(s.names) == len(stepSymbols) {
				continue
			}
			s.runes[m.Name] = rune(stepSymbols[len(s.names)])
			s.names = append(s.names, m.Name)
		}
	}
	return s
}

func (s steps) legend() string {
	parts := make([]string, len(s.names))
	for i, n := range s.names {
		parts[i] = fmt.Sprintf("%c %s", s.runes[n], n)
	}
	return strings.Join(parts, "  ")
}

// isStepName reports whether a mark names a script's line: file:line.
func isStepName(name string) bool {
	i := strings.LastIndexByte(name, ':')
	if i <= 0 || i == len(name)-1 {
		return false
	}
	for _, c := range name[i+1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
