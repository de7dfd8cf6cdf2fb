package report

import (
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/runner"
)

// The legend names a mark only when some row draws it: a release hidden
// under a check in the same column is not in it, and one a row shows is.
func TestTimelineLegendNamesOnlyDrawnMarks(t *testing.T) {
	us := func(n int) time.Duration { return time.Duration(n) * time.Microsecond }
	hidden := &runner.Trace{Effects: 2, Allowed: 1, Workers: []runner.WorkerTrace{
		{Worker: 0, Outcome: runner.Executed, Marks: []runner.Mark{{Name: "released", At: 0}, {Name: "check", At: us(1)}, {Name: "act", At: us(500)}, {Name: "done", At: us(1000)}}},
		{Worker: 1, Outcome: runner.Executed, Marks: []runner.Mark{{Name: "released", At: 0}, {Name: "check", At: us(2)}, {Name: "act", At: us(510)}, {Name: "done", At: us(990)}}},
	}}
	var b strings.Builder
	Timeline(&b, hidden)
	if out := b.String(); !strings.Contains(out, "marks: c check  a act  D done\n") || strings.Contains(out, "R released") {
		t.Errorf("legend names a mark no row shows, or misses one:\n%s", out)
	}
	shown := &runner.Trace{Effects: 1, Allowed: 1, Workers: []runner.WorkerTrace{
		{Worker: 0, Outcome: runner.Executed, Marks: []runner.Mark{{Name: "released", At: 0}, {Name: "check", At: us(400)}, {Name: "done", At: us(1000)}}},
	}}
	b.Reset()
	Timeline(&b, shown)
	out := b.String()
	if !strings.Contains(out, "marks: R released  c check  D done\n") {
		t.Errorf("legend of a row drawing R, c and D:\n%s", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "w0 ") && (!strings.Contains(l, "|R") || strings.Contains(l, "a")) {
			t.Errorf("row %q: want R drawn, no a", l)
		}
	}
}

// An HTTP case's name is its request: no line says "… on http".
func TestHTTPCaseIsNotOnHTTP(t *testing.T) {
	for _, c := range []struct {
		c    Case
		want string
	}{
		{Case{Name: "POST http://127.0.0.1:8080/redeem", Scenario: "http", Backend: "http"}, "POST http://127.0.0.1:8080/redeem"},
		{Case{Name: "redeem", Scenario: "http", Backend: "http"}, "redeem over HTTP"},
		{Case{Scenario: "http", Backend: "http"}, "http over HTTP"},
		{Case{Name: "check-then-write", Scenario: "check-then-write", Backend: "memory"}, "check-then-write on memory"},
	} {
		if got := where(c.c); got != c.want {
			t.Errorf("where(%+v) = %q, want %q", c.c, got, c.want)
		}
		if h := Headline(c.c); strings.Contains(h, " on http") {
			t.Errorf("headline %q", h)
		}
	}
}

// -q: one verdict line per case, and nothing else.
func TestQuietTableIsVerdictLinesOnly(t *testing.T) {
	cases := fixedCases()
	var b strings.Builder
	if err := Table(&b, cases, Options{Quiet: true, Title: "a title", Timeline: true}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != len(cases) {
		t.Fatalf("%d lines for %d cases:\n%s", len(lines), len(cases), b.String())
	}
	for i, l := range lines {
		if l != VerdictLine(cases[i]) {
			t.Errorf("line %d = %q, want %q", i, l, VerdictLine(cases[i]))
		}
	}
	if !strings.HasPrefix(lines[0], "ok    check-then-write on memory (Example DB 1.0): RACE 75%") ||
		!strings.HasPrefix(lines[2], "ERROR unique-insert on mysql could not run") {
		t.Errorf("verdict lines:\n%s", b.String())
	}
}

// -v: a line per burst under the table, with the burst's own figures.
func TestVerboseTableHasALinePerBurst(t *testing.T) {
	cases := fixedCases()[:2]
	var quiet, verbose strings.Builder
	Table(&quiet, cases, Options{})
	Table(&verbose, cases, Options{Verbose: true})
	out := verbose.String()
	if !strings.HasPrefix(out, quiet.String()) {
		t.Errorf("-v changed the normal output instead of adding to it:\n%s", out)
	}
	added := strings.TrimPrefix(out, quiet.String())
	want := 0
	for _, c := range cases {
		want += len(c.Result.Bursts)
	}
	if got := strings.Count(added, "\n  burst "); got != want {
		t.Errorf("%d burst lines, want %d:\n%s", got, want, added)
	}
	for _, s := range []string{
		"bursts of check-then-write on memory:",
		"  burst 0  effects 3 (allowed 1)  OVER      executed 3, declined 0  overlap 3  spread 12µs",
		"  burst 2  effects 1 (allowed 1)  untested  executed 1, declined 2  overlap 1  spread 9µs",
		"  burst 0  effects 1 (allowed 1)  ok        executed 1, declined 1, error 1  overlap 3",
	} {
		if !strings.Contains(added, s) {
			t.Errorf("no %q in:\n%s", s, added)
		}
	}
}

// The Markdown table has no empty cell: a server column only where some
// case measured one, and a dash where one did not.
func TestMarkdownHasNoEmptyCell(t *testing.T) {
	for _, cases := range [][]Case{fixedCases(), fixedCases()[1:2]} {
		var b strings.Builder
		if err := Markdown(&b, cases, Options{}); err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(b.String(), "\n") {
			if strings.HasPrefix(l, "|") && (strings.Contains(l, "|  |") || strings.Contains(l, "||")) {
				t.Errorf("empty cell in %q", l)
			}
		}
		if hasServer := strings.Contains(b.String(), "| Server |"); hasServer != (len(cases) > 1) {
			t.Errorf("server column %v for %d cases:\n%s", hasServer, len(cases), b.String())
		}
	}
}

// Under a wire release a worker marks its first step when it sends the
// request but for its last byte, before R: the timeline says so, and says
// nothing of it when every step follows its release (the gate).
func TestTimelineSaysWhyAStepPrecedesItsRelease(t *testing.T) {
	us := func(n int) time.Duration { return time.Duration(n) * time.Microsecond }
	wire := &runner.Trace{Effects: 2, Allowed: 1, Workers: []runner.WorkerTrace{
		{Worker: 0, Outcome: runner.Executed, Marks: []runner.Mark{{Name: "released", At: us(300)}, {Name: "check", At: us(20)}, {Name: "act", At: us(600)}, {Name: "done", At: us(900)}}},
		{Worker: 1, Outcome: runner.Executed, Marks: []runner.Mark{{Name: "released", At: us(301)}, {Name: "check", At: us(40)}, {Name: "act", At: us(610)}, {Name: "done", At: us(950)}}},
	}}
	gate := &runner.Trace{Effects: 2, Allowed: 1, Workers: []runner.WorkerTrace{
		{Worker: 0, Outcome: runner.Executed, Marks: []runner.Mark{{Name: "released", At: 0}, {Name: "check", At: us(20)}, {Name: "act", At: us(600)}, {Name: "done", At: us(900)}}},
		{Worker: 1, Outcome: runner.Executed, Marks: []runner.Mark{{Name: "released", At: us(1)}, {Name: "check", At: us(1)}, {Name: "act", At: us(610)}, {Name: "done", At: us(950)}}},
	}}
	for _, c := range []struct {
		name string
		t    *runner.Trace
		want bool
	}{{"wire", wire, true}, {"gate", gate, false}} {
		var b strings.Builder
		Timeline(&b, c.t)
		if got := strings.Contains(b.String(), heldNote); got != c.want {
			t.Errorf("%s: the note in the text timeline %v, want %v:\n%s", c.name, got, c.want, b.String())
		}
		if got := newTimelineSVG(c.t).Held != ""; got != c.want {
			t.Errorf("%s: the note under the HTML timeline %v, want %v", c.name, got, c.want)
		}
	}
}

// A case whose name says its backend already does not get it twice
// ("redeem on memory on memory"); one that does not say it gets it once.
func TestPlaceNamesTheBackendOnce(t *testing.T) {
	for _, c := range []struct{ name, backend, want string }{
		{"redeem on memory", "memory", "redeem on memory"},
		{"redeem on memory, 3 replicas", "memory", "redeem on memory, 3 replicas"},
		{"redeem", "memory", "redeem on memory"},
		{"redeem on memory-set", "memory", "redeem on memory-set on memory"},
		{"check on mysql", "postgres", "check on mysql on postgres"},
	} {
		if got := placeOf(Case{Name: c.name, Backend: c.backend}); got != c.want {
			t.Errorf("%q on %s: %q, want %q", c.name, c.backend, got, c.want)
		}
	}
}

// The HTML page escapes control characters as the other formats do: an ESC
// or a BEL from the data (an error, a name, a note) reaches no terminal
// that cats the page, where OSC 52 would write the clipboard.
func TestHTMLEscapesControlCharacters(t *testing.T) {
	cs := hostileCases()
	cs[0].Name = "redeem \x1b]52;c;ZXZpbA==\x07 \u009b31m"
	n := *cs[1].Result
	n.Notes = append(n.Notes, "server said \x1b[2J\x07")
	cs[1].Result = &n
	var b strings.Builder
	if err := HTML(&b, cs, Options{Timeline: true, Title: "t\x1b[31m"}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, r := range page {
		if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			t.Fatalf("the page holds the control character %U", r)
		}
	}
	if !strings.Contains(page, `redeem \x1b]52;c;ZXZpbA==\x07`) {
		t.Errorf("the name is not shown with its escapes")
	}
}

// A timeline whose releases each fall in a step's column draws no R: its
// note does not send the reader left of an R that is not there (a Redis
// last-byte burst read "left of R" and drew none).
func TestTimelineNoteNamesOnlyAnRDrawn(t *testing.T) {
	us := func(n int) time.Duration { return time.Duration(n) * time.Microsecond }
	hidden := &runner.Trace{Effects: 2, Allowed: 1, Workers: []runner.WorkerTrace{
		{Worker: 0, Outcome: runner.Executed, Marks: []runner.Mark{{Name: "released", At: us(600)}, {Name: "check", At: us(20)}, {Name: "act", At: us(601)}, {Name: "done", At: us(900)}}},
		{Worker: 1, Outcome: runner.Executed, Marks: []runner.Mark{{Name: "released", At: us(610)}, {Name: "check", At: us(40)}, {Name: "act", At: us(611)}, {Name: "done", At: us(950)}}},
	}}
	var b strings.Builder
	Timeline(&b, hidden)
	text := b.String()
	drawsR := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "w") && strings.Contains(l, "R") {
			drawsR = true
		}
	}
	if drawsR {
		t.Fatalf("the rows draw R; the trace was meant to hide it:\n%s", text)
	}
	if strings.Contains(text, "left of R") || !strings.Contains(text, heldNoteHidden) {
		t.Errorf("no R drawn, but the note reads otherwise:\n%s", text)
	}
}
