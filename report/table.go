package report

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/racetest/racetest/runner"
)

const (
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiBold   = "\x1b[1m"
	ansiReset  = "\x1b[0m"
)

// Table writes one row per case, then what a reader needs to act on it: the
// lesson of each scenario, why an expectation failed, notes, checks, errors,
// and (with Timeline) the example burst of each RACE. It returns the first
// error writing to w (a full disk, a closed pipe): the rest is not written.
func Table(w io.Writer, cases []Case, o Options) error {
	ew := &errWriter{w: w}
	table(ew, cases, o)
	return ew.err
}

// errWriter passes writes on to w until one fails, then keeps that error and
// writes nothing more.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	e.err = err
	return n, err
}

func table(w io.Writer, cases []Case, o Options) {
	if o.Matrix {
		matrixText(w, cases, o)
		return
	}
	paint := func(code, s string) string {
		if !o.Color {
			return s
		}
		return code + s + ansiReset
	}
	if o.Quiet {
		verdictLines(w, cases, paint)
		return
	}
	width := o.Width
	if width <= 0 {
		width = DefaultWidth
	}
	title := o.Title
	if srv := commonServer(cases); srv != "" {
		// The server decides the outcome as much as the pattern: say which.
		if title != "" {
			title += " — "
		}
		title += "server: " + srv
	}
	if title != "" {
		for _, l := range wrapText(title, width, "", "") {
			fmt.Fprintln(w, paint(ansiBold, l))
		}
		fmt.Fprintln(w)
	}
	as := make([]Assessment, len(cases))
	for i, c := range cases {
		as[i] = Assess(c)
	}
	summary(w, cases, as, width, paint)
	lessons(w, cases, width, paint)
	shared := sharedNotes(cases)
	if o.Summary {
		unmet(w, cases, as, width, paint)
		catalogReasons(w, cases, width, shared)
	} else {
		for i, c := range cases {
			details(w, c, as[i], o, width, shared, paint)
		}
	}
	if len(shared) > 0 {
		fmt.Fprintln(w)
		for _, n := range shared {
			for _, l := range wrapText(n, width, "note: ", "      ") {
				fmt.Fprintln(w, l)
			}
		}
	}
	if o.Verbose {
		burstLines(w, cases, paint)
	}
	if o.TableLast && !o.Summary {
		fmt.Fprintln(w)
		summary(w, cases, as, width, paint)
	}
}

// summary writes one row per case, fitted to width (see fitColumns): a row
// stays one line, and a note under the table names the columns that left.
func summary(w io.Writer, cases []Case, as []Assessment, width int, paint func(string, string) string) {
	cols := []column{
		{long: "CASE", short: "CASE"},
		{long: "BACKEND", short: "BACKEND", drop: 4},
		{long: "N×BURSTS", short: "N×B", drop: 2},
		{long: "EFFECTS min/med/max", short: "EFFECTS"},
		{long: "ALLOWED", short: "ALLOWED"},
		{long: "VIOLATED", short: "VIOLATED"},
		{long: "OVERLAP med", short: "OVERLAP", drop: 3},
		{long: "SPREAD med", short: "SPREAD", drop: 1},
		{long: "VERDICT", short: "VERDICT"},
		{long: "EXPECTED", short: "EXPECTED"},
	}
	backends := map[string]bool{}
	for i, c := range cases {
		a := as[i]
		backends[c.Backend] = true
		n, effects, allowed, overlap, spread := "-", "-", "-", "-", "-"
		if r := c.Result; r != nil && len(r.Bursts) > 0 {
			n = fmt.Sprintf("%d×%d", r.Attempts, len(r.Bursts))
			e := r.EffectsSummary()
			effects = fmt.Sprintf("%d/%d/%d", e.Min, e.Median, e.Max)
			allowed = allowance(r)
			if twinRun(r) {
				effects, allowed = twinCells()
			} else if r.Uncounted {
				effects, allowed = "-", "-"
			}
			overlap = fmt.Sprintf("%d/%d", r.OverlapSummary().Median, r.Attempts)
			spread = human(r.SpreadSummary().Median)
		}
		// Over the bursts something judged, as the rate beside it is.
		over := fmt.Sprintf("%d/%d", a.Violations, a.Bursts-a.Unjudged)
		for j, cell := range []string{displayName(c), c.Backend, n, effects, allowed, over, overlap, spread,
			paint(verdictColor(a.Verdict), verdictCell(a)), expectCell(c, a, paint)} {
			cols[j].cells = append(cols[j].cells, cell)
		}
	}
	// One backend for every row of several: its column is the first to go,
	// and a line says which it was.
	oneBackend := len(cases) > 1 && len(backends) == 1
	cols[1].free = oneBackend
	kept, nameW, left := fitColumns(cols, width)
	writeColumns(w, kept, nameW, func(h string) string { return h })
	if len(left) == 0 {
		return
	}
	var notes, gone []string
	for _, c := range cols {
		switch {
		case !slices.Contains(left, c.short):
		case c.free:
			notes = append(notes, "all on "+cases[0].Backend)
		default:
			gone = append(gone, c.short)
		}
	}
	if len(gone) > 0 {
		notes = append(notes, fmt.Sprintf("left out at %d columns: %s", width, strings.Join(gone, ", ")))
	}
	for _, l := range wrapText(strings.Join(notes, "; "), width, "", "") {
		fmt.Fprintln(w, l)
	}
}

// unmet says, for each case that did not meet its expectation or proved
// nothing, why, in one wrapped line: the short form of details.
func unmet(w io.Writer, cases []Case, as []Assessment, width int, paint func(string, string) string) {
	first := true
	for i, c := range cases {
		a := as[i]
		if a.Met && a.Verdict != Inconclusive {
			continue
		}
		if first {
			fmt.Fprintln(w)
			first = false
		}
		for _, l := range wrapText(Headline(c), width, paint(ansiRed, "✗")+" ", "  ") {
			fmt.Fprintln(w, l)
		}
	}
}

// catalogReasons prints, in the summary view, why the catalog expected
// what it did where that depends on the backend, isolation, variant or
// server (a RACE that reads "ok" on FerretDB must say why at once).
func catalogReasons(w io.Writer, cases []Case, width int, shared []string) {
	first := true
	for _, c := range cases {
		for _, n := range notesOf(c) {
			if !strings.HasPrefix(n, CatalogNotePrefix) || slices.Contains(shared, n) {
				continue
			}
			if first {
				fmt.Fprintln(w)
				first = false
			}
			for _, l := range wrapText(displayName(c)+": "+n, width, "", "  ") {
				fmt.Fprintln(w, l)
			}
		}
	}
}

// CatalogNotePrefix starts the note that says why the catalog expected a
// case's verdict on this backend, isolation, variant and server.
const CatalogNotePrefix = "catalog: "

// commonServer is the server every case that measured one measured, or ""
// when none did or they differ (each case's details then name its own).
func commonServer(cases []Case) string {
	srv := ""
	for _, c := range cases {
		if c.Result == nil || c.Result.Server == "" {
			continue
		}
		if srv != "" && srv != c.Result.Server {
			return ""
		}
		srv = c.Result.Server
	}
	return srv
}

// allowance is the effects per burst that are correct: one number (exactly
// once: 1), or MIN-MAX when fewer are allowed than the most, or when a
// scenario's policy allowed more in some bursts (a fail-open send).
func allowance(r *runner.Result) string {
	lo, hi := r.Bursts[0].Required, r.Bursts[0].Allowed
	for _, b := range r.Bursts {
		// A floor set from what committed may exceed what one burst
		// allowed (every queued job required, fewer taken): the range
		// still spans both.
		lo, hi = min(lo, b.Required, b.Allowed), max(hi, b.Allowed, b.Required)
	}
	if lo == hi {
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d-%d", lo, hi)
}

// raceLines are a RACE's figures: the bursts over their allowance, the
// invariants broken, and the bound on the rate of either.
func raceLines(r *runner.Result, a Assessment) []string {
	bound := fmt.Sprintf("95%% upper bound on the rate %s", percent(a.Upper))
	why := brokenWhy(r)
	if why == "" {
		return []string{fmt.Sprintf("%d of %d bursts left more effects than allowed (%s; worst: %d); %s",
			a.Violations, a.Bursts, allowance(r), r.EffectsSummary().Max, bound)}
	}
	lines := []string{why}
	if over := overAllowance(r); over > 0 {
		lines = append(lines, fmt.Sprintf("%d of %d bursts left more effects than allowed (%s; worst: %d)",
			over, a.Bursts, allowance(r), r.EffectsSummary().Max))
	}
	if a.Unjudged > 0 {
		return append(lines, fmt.Sprintf("%d of the %d bursts judged violated (%d started with every invariant broken, and nothing judged them): %s",
			a.Violations, a.Bursts-a.Unjudged, a.Unjudged, bound))
	}
	return append(lines, fmt.Sprintf("%d of %d bursts violated: %s", a.Violations, a.Bursts, bound))
}

// ceiling names what a burst's effects are held under in a message: the
// run's allowance, or each burst's own where the target set it per burst
// from what happened (the writes that committed, the jobs taken).
func ceiling(r *runner.Result) string {
	if r.Accounting {
		return "its successes (each attempt that reported success, once)"
	}
	for _, b := range r.Bursts {
		if b.Allowed != r.Allowed {
			return "its allowance (" + allowance(r) + " effects per burst, from what committed)"
		}
	}
	return plural(r.Allowed, "effect")
}

// floor is ceiling's counterpart for the fewest effects required.
func floor(r *runner.Result) string {
	if r.Accounting {
		return "its successes (each attempt that reported success, once)"
	}
	for _, b := range r.Bursts {
		if b.Required != r.Required {
			return "its floor (" + allowance(r) + " effects per burst, from what committed)"
		}
	}
	return plural(r.Required, "effect")
}

func displayName(c Case) string {
	if c.Name != "" {
		return c.Name
	}
	return c.Scenario
}

func verdictColor(v Verdict) string {
	switch v {
	case Race, Lost, Errored:
		return ansiRed
	case Safe:
		return ansiGreen
	}
	return ansiYellow
}

func verdictCell(a Assessment) string {
	switch a.Verdict {
	case Race, Lost:
		return fmt.Sprintf("%s %s", a.Verdict, percent(a.Rate))
	case Safe:
		return fmt.Sprintf("SAFE ≤%s", percent(a.Upper))
	}
	return string(a.Verdict)
}

func expectCell(c Case, a Assessment, paint func(string, string) string) string {
	switch a.Expectation() {
	case "met":
		return paint(ansiGreen, c.Expect.String()+" ok")
	case "unproven":
		return paint(ansiYellow, c.Expect.String()+" unproven")
	}
	return paint(ansiRed, c.Expect.String()+" FAILED")
}

func lessons(w io.Writer, cases []Case, width int, paint func(string, string) string) {
	seen := map[string]bool{}
	var lines []string
	for _, c := range cases {
		if c.Lesson == "" || seen[c.Scenario] {
			continue
		}
		seen[c.Scenario] = true
		lines = append(lines, wrapText(c.Lesson, width, fmt.Sprintf("  %-20s ", c.Scenario), strings.Repeat(" ", 23))...)
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, paint(ansiBold, "Lessons"))
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

// details prints what a reader of one case needs beyond its row.
func details(w io.Writer, c Case, a Assessment, o Options, width int, shared []string, paint func(string, string) string) {
	var lines []string
	r := c.Result
	if o.Brief && quiet(c, a, shared) {
		return
	}
	// A met SAFE has a why only for a caveat (accountingCaveat).
	if !a.Met || a.Verdict == Inconclusive || a.Verdict == Errored || a.Verdict == Safe {
		if a.Why != "" {
			lines = append(lines, a.Why)
		}
	}
	if line := ""; twinRun(r) {
		if why := brokenWhy(r); why != "" {
			lines = append(lines, why)
		}
		if line = twinSummary(r, a); line != "" {
			lines = append(lines, line)
		}
		lines = append(lines, twinNotes(r)...)
	} else if a.Verdict == Race && r != nil {
		lines = append(lines, raceLines(r, a)...)
	}
	if a.Verdict == Lost && r != nil && !twinRun(r) {
		lines = append(lines, fmt.Sprintf("%d of %d bursts left fewer effects than required (%s; fewest: %d) while an attempt claimed it done; 95%% upper bound on the rate %s",
			a.Violations, a.Bursts, allowance(r), r.EffectsSummary().Min, percent(a.Upper)))
	}
	if a.Verdict == Safe && r != nil && !twinRun(r) {
		lines = append(lines, fmt.Sprintf("0 of %d tested bursts %s: violation rate ≤%s at 95%%",
			a.Tested, heldWhat(r), percent(a.Upper)))
	}
	if r != nil {
		lines = append(lines, holdLines(r, a)...)
		if r.Server != "" {
			lines = append(lines, "server: "+r.Server)
		}
		if s := settings(c); s != "" {
			lines = append(lines, s)
		}
		lines = append(lines, outcomes(r))
		for _, n := range r.Notes {
			if !slices.Contains(shared, n) {
				lines = append(lines, n)
			}
		}
		for _, ch := range r.Checks {
			lines = append(lines, fmt.Sprintf("check %s: %s — %s", ch.Name, checkMark(ch), ch.Detail))
		}
		lines = append(lines, topErrors(r.Errors, 3)...)
		if r.CleanupErr != nil {
			lines = append(lines, "cleanup failed, drop the run's objects by hand: "+r.CleanupErr.Error())
		}
		if r.Stopped {
			lines = append(lines, fmt.Sprintf("stopped at the first violation, after %d of %d planned bursts", len(r.Bursts), r.Planned))
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, paint(ansiBold, placeOf(c)+":"))
	for _, l := range lines {
		for _, l := range wrapText(l, width, "  ", "    ") {
			fmt.Fprintln(w, l)
		}
	}
	if twinRun(r) {
		for _, l := range twinTable(r) {
			fmt.Fprintln(w, "  "+l)
		}
	}
	if o.Timeline && a.Verdict == Race && r != nil && r.Example != nil {
		var b strings.Builder
		timeline(&b, r.Example, width-2)
		fmt.Fprintln(w)
		for _, l := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
			fmt.Fprintln(w, "  "+l)
		}
	}
}

// checkMark says how a check came out: a check that demonstrates a known
// bug reads "bug shown", never "ok".
func checkMark(ch runner.Check) string {
	switch {
	case ch.Inconclusive:
		return "INCONCLUSIVE"
	case ch.Bug && ch.OK:
		return "bug shown"
	case ch.Bug:
		return "FAILED (the bug did not show)"
	case ch.OK:
		return "ok"
	}
	return "FAILED"
}

// quiet reports whether a case's row says all there is to say: SAFE as
// expected, with no check, error or note of its own.
func quiet(c Case, a Assessment, shared []string) bool {
	r := c.Result
	if r == nil || !a.Met || a.Verdict != Safe || len(r.Checks) > 0 || len(r.Errors) > 0 || r.CleanupErr != nil || r.Stopped {
		return false
	}
	for _, n := range r.Notes {
		if !slices.Contains(shared, n) {
			return false
		}
	}
	return true
}

// sharedNotes are the notes every case of several carries: printed once,
// under the table, instead of under each case.
func sharedNotes(cases []Case) []string {
	if len(cases) < 2 {
		return nil
	}
	var shared []string
	for _, n := range notesOf(cases[0]) {
		all := true
		for _, c := range cases[1:] {
			all = all && slices.Contains(notesOf(c), n)
		}
		if all {
			shared = append(shared, n)
		}
	}
	return shared
}

func notesOf(c Case) []string {
	if c.Result == nil {
		return nil
	}
	return c.Result.Notes
}

func settings(c Case) string {
	if len(c.Settings) == 0 {
		return ""
	}
	keys := make([]string, 0, len(c.Settings))
	for k := range c.Settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + c.Settings[k]
	}
	return "settings: " + strings.Join(parts, " ")
}

func outcomes(r *runner.Result) string {
	out := r.Outcomes()
	var parts []string
	for _, c := range runner.Classes() {
		if out[c] > 0 || c <= runner.Declined {
			parts = append(parts, fmt.Sprintf("%s %d", c, out[c]))
		}
	}
	return "attempts (as the workers saw them): " + strings.Join(parts, ", ")
}

func topErrors(errs map[string]int, n int) []string {
	type kv struct {
		msg   string
		count int
	}
	var all []kv
	for m, c := range errs {
		all = append(all, kv{m, c})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].count != all[j].count {
			return all[i].count > all[j].count
		}
		return all[i].msg < all[j].msg
	})
	var out []string
	for i, e := range all {
		if i == n {
			out = append(out, fmt.Sprintf("… and %d more kinds of error", len(all)-n))
			break
		}
		out = append(out, fmt.Sprintf("error ×%d: %s", e.count, e.msg))
	}
	return out
}
