package report

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/racetest/racetest/internal/printable"
	"github.com/racetest/racetest/runner"
)

// The page's template, style and script are embedded: the report is one
// file that opens offline, with nothing fetched (its Content-Security-Policy
// forbids it).
var (
	//go:embed html/page.html.tmpl
	pageTemplate string
	//go:embed html/style.css
	pageStyle string
	//go:embed html/script.js
	pageScript string

	page = template.Must(template.New("page").Parse(pageTemplate))
)

// HTML writes one self-contained page: a summary table, then per case its
// lesson, the effects, overlap and release spread of its bursts as
// histograms, the worst burst's timeline, the server and settings, and the
// scenario's story folded under it.
func HTML(w io.Writer, cases []Case, o Options) error {
	p := htmlPage{Title: o.Title, Version: o.Version, CSS: template.CSS(pageStyle), JS: template.JS(pageScript)}
	if p.Title == "" {
		p.Title = "racetest report"
	}
	if o.Matrix {
		p.Matrix = htmlMatrixOf(cases)
	}
	for i, c := range cases {
		hc := htmlCaseOf(i, c)
		if hc.Met {
			p.Met++
		}
		p.Cases = append(p.Cases, hc)
	}
	return writePage(w, page, p)
}

// writePage executes t with data into w, with every control character
// escaped as the other formats escape it: html/template leaves an ESC or a
// BEL from the data (a server's error, a case's name) as it is, and cat of
// the page would hand it to the terminal (OSC 52 writes the clipboard).
func writePage(w io.Writer, t *template.Template, data any) error {
	var b strings.Builder
	if err := t.Execute(&b, data); err != nil {
		return err
	}
	_, err := io.WriteString(w, printable.Text(b.String()))
	return err
}

type htmlPage struct {
	Title, Version string
	Met            int
	Cases          []htmlCase
	Matrix         []htmlMatrix
	// Exploration, when set, is what the page shows instead of cases.
	Exploration *htmlExploration
	CSS         template.CSS
	JS          template.JS
}

type htmlCase struct {
	ID, Name, Scenario, Backend string
	Lesson                      string
	Verdict, VerdictClass, Cell string
	Expect, Why, Headline       string
	Met                         bool
	// Unproven: met, by an INCONCLUSIVE run that proves nothing.
	Unproven                      bool
	Shape, Effects, Allowed, Over string
	Overlap, Spread               string
	Server                        string
	Settings                      []htmlPair
	Lines                         []string
	// Twin is the worst burst's change beside its solo twin's, as a
	// preformatted table (--effects auto).
	Twin     string
	Story    []StoryPart
	Hists    []*histogram
	Timeline *timelineSVG
}

type htmlPair struct{ Key, Value string }

// htmlMatrix is one backend's table of a matrix; each cell links to its case.
type htmlMatrix struct {
	Backend, Server string
	Settings        []string
	Isolations      []string
	Rows            []htmlMatrixRow
}

type htmlMatrixRow struct {
	Name  string
	Cells []htmlMatrixCell
}

type htmlMatrixCell struct {
	ID, Text, VerdictClass, Expect string
	Ran, Met                       bool
}

func htmlMatrixOf(cases []Case) []htmlMatrix {
	var out []htmlMatrix
	for _, t := range Matrix(cases) {
		hm := htmlMatrix{Backend: t.Backend, Server: t.Server, Settings: t.Settings}
		for _, l := range t.Isolations {
			hm.Isolations = append(hm.Isolations, levelHeader(l, false))
		}
		for _, r := range t.Rows {
			hr := htmlMatrixRow{Name: rowName(r.Scenario, r.Variant)}
			for _, i := range r.Cells {
				if i < 0 {
					hr.Cells = append(hr.Cells, htmlMatrixCell{})
					continue
				}
				a := Assess(cases[i])
				hr.Cells = append(hr.Cells, htmlMatrixCell{ID: fmt.Sprintf("case-%d", i+1), Ran: true, Met: a.Met,
					Text: strings.TrimPrefix(matrixCell(cases[i], a, conflictsFull), "✗ "), VerdictClass: "v-" + strings.ToLower(string(a.Verdict)),
					Expect: strings.ToUpper(cases[i].Expect.String())})
			}
			hm.Rows = append(hm.Rows, hr)
		}
		out = append(out, hm)
	}
	return out
}

func htmlCaseOf(i int, c Case) htmlCase {
	a := Assess(c)
	hc := htmlCase{
		ID: fmt.Sprintf("case-%d", i+1), Name: displayName(c), Scenario: c.Scenario, Backend: c.Backend, Lesson: c.Lesson,
		Verdict: string(a.Verdict), VerdictClass: "v-" + strings.ToLower(string(a.Verdict)), Cell: verdictCell(a),
		Expect: c.Expect.String(), Met: a.Met, Unproven: a.Expectation() == "unproven", Why: a.Why, Headline: Headline(c), Story: c.Story,
		Shape: "–", Effects: "–", Allowed: "–", Over: fmt.Sprintf("%d/%d", a.Violations, a.Bursts), Overlap: "–", Spread: "–",
	}
	if c.Release != "" {
		hc.Settings = append(hc.Settings, htmlPair{"release", c.Release})
	}
	keys := make([]string, 0, len(c.Settings))
	for k := range c.Settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "release" && c.Release != "" {
			continue
		}
		hc.Settings = append(hc.Settings, htmlPair{k, c.Settings[k]})
	}
	r := c.Result
	if r == nil {
		return hc
	}
	hc.Server = r.Server
	hc.Settings = append(hc.Settings, htmlPair{"elapsed", human(r.Elapsed)})
	if twinRun(r) {
		if line := twinSummary(r, a); line != "" {
			hc.Lines = append(hc.Lines, line)
		}
		hc.Lines = append(hc.Lines, twinNotes(r)...)
		hc.Twin = strings.Join(twinTable(r), "\n")
	}
	hc.Lines = append(hc.Lines, holdLines(r, a)...)
	hc.Lines = append(hc.Lines, holdTrace(r)...)
	hc.Lines = append(hc.Lines, outcomes(r))
	hc.Lines = append(hc.Lines, r.Notes...)
	for _, ch := range r.Checks {
		hc.Lines = append(hc.Lines, fmt.Sprintf("check %s: %s — %s", ch.Name, checkMark(ch), ch.Detail))
	}
	hc.Lines = append(hc.Lines, topErrors(r.Errors, 5)...)
	if r.CleanupErr != nil {
		hc.Lines = append(hc.Lines, "cleanup failed, drop the run's objects by hand: "+r.CleanupErr.Error())
	}
	if len(r.Bursts) == 0 {
		return hc
	}
	e := r.EffectsSummary()
	hc.Shape = fmt.Sprintf("%d × %d", r.Attempts, len(r.Bursts))
	hc.Effects = fmt.Sprintf("%d / %d / %d", e.Min, e.Median, e.Max)
	hc.Allowed = allowance(r)
	if twinRun(r) {
		hc.Effects, hc.Allowed = twinCells()
	}
	hc.Overlap = fmt.Sprintf("%d / %d", r.OverlapSummary().Median, r.Attempts)
	hc.Spread = human(r.SpreadSummary().Median)
	hc.Hists = []*histogram{effectsHistogram(r), overlapHistogram(r, a), spreadHistogram(r)}
	hc.Timeline = newTimelineSVG(r.Example)
	return hc
}

// Geometry of the drawings, in SVG user units (the page scales them).
const (
	histW, histH      = 320, 150
	histLeft, histTop = 34, 12
	histBottom        = 34
	maxBins           = 40
)

// histogram is one distribution over a run's bursts, drawn as bars.
type histogram struct {
	Kind, Title, Note string
	Total             int
	W, H              int
	Bars              []bar
	Ticks             []tick
	// Band marks the values that are fine (effects: the allowed range;
	// overlap: two or more in flight); BandLabel names it.
	Band      *span
	BandLabel string
	YMax      int
	YMaxY     float64
	BaseY     float64
	PlotL     float64
	PlotR     float64
}

type bar struct {
	X, Y, W, H float64
	Count      int
	Label      string // what the bar counts, for its <title>
	Class      string
}

type tick struct {
	X     float64
	Label string
}

type span struct{ X, W float64 }

// intHistogram draws one bar per whole value from lo to hi, or per range
// of values when there are more than maxBins of them.
func intHistogram(kind, title string, values []int, lo, hi int, class func(from, to int) string, unit string) *histogram {
	width := max((hi-lo+maxBins)/maxBins, 1)
	n := (hi-lo)/width + 1
	counts := make([]int, n)
	for _, v := range values {
		counts[(v-lo)/width]++
	}
	h := newHistogram(kind, title, len(values), n, counts)
	for i := range h.Bars {
		from, to := lo+i*width, lo+i*width+width-1
		label := fmt.Sprint(from)
		if to > from {
			label = fmt.Sprintf("%d–%d", from, to)
		}
		h.Bars[i].Class = class(from, to)
		h.Bars[i].Label = fmt.Sprintf("%s %s: %s", label, unit, plural(h.Bars[i].Count, "burst"))
	}
	step := max(n/8, 1)
	for i := 0; i < n; i += step {
		h.Ticks = append(h.Ticks, tick{h.barCenter(i), fmt.Sprint(lo + i*width)})
	}
	return h
}

func newHistogram(kind, title string, total, n int, counts []int) *histogram {
	h := &histogram{Kind: kind, Title: title, Total: total, W: histW, H: histH,
		PlotL: histLeft, PlotR: histW - 6, BaseY: histH - histBottom}
	for _, c := range counts {
		h.YMax = max(h.YMax, c)
	}
	h.YMaxY = histTop
	slot := (h.PlotR - h.PlotL) / float64(n)
	for i, c := range counts {
		bh := 0.0
		if h.YMax > 0 {
			bh = float64(c) / float64(h.YMax) * (h.BaseY - histTop)
		}
		h.Bars = append(h.Bars, bar{X: r1(h.PlotL + float64(i)*slot + slot*0.1), W: r1(slot * 0.8), Y: r1(h.BaseY - bh), H: r1(bh), Count: c})
	}
	return h
}

func (h *histogram) barCenter(i int) float64 { return r1(h.Bars[i].X + h.Bars[i].W/2) }

// r1 rounds a coordinate to a tenth of a unit: finer is invisible, and
// every digit is in the file.
func r1(x float64) float64 { return math.Round(x*10) / 10 }

func effectsHistogram(r *runner.Result) *histogram {
	values := collectInts(r.Bursts, func(b runner.Burst) int { return b.Effects })
	e := r.EffectsSummary()
	// lo..hi is the allowed range: at least the fewest required, at most
	// the most allowed, over the run's bursts.
	lo, hi := r.Bursts[0].Required, r.Bursts[0].Allowed
	for _, b := range r.Bursts {
		lo, hi = min(lo, b.Required), max(hi, b.Allowed)
	}
	first, last := min(0, e.Min), max(e.Max, hi+1)
	width := max((last-first+maxBins)/maxBins, 1)
	h := intHistogram("effects", "Effects per burst", values, first, last, func(from, to int) string {
		if to > hi || from < lo {
			return "bad"
		}
		return "good"
	}, "effect(s)")
	h.Band = bandOf(h, first, width, lo, hi)
	h.BandLabel = "allowed " + allowance(r)
	h.Note = fmt.Sprintf("%d of %d bursts over the allowance", r.Violations(), len(r.Bursts))
	if n := r.Lost(); n > 0 {
		h.Note = fmt.Sprintf("%d of %d bursts short of it, an attempt claiming done", n, len(r.Bursts))
	}
	return h
}

func overlapHistogram(r *runner.Result, a Assessment) *histogram {
	values := collectInts(r.Bursts, func(b runner.Burst) int { return b.Overlap })
	last := r.Attempts
	for _, v := range values {
		last = max(last, v)
	}
	width := max((last+maxBins)/maxBins, 1)
	h := intHistogram("overlap", "Attempts in flight at once", values, 0, last, func(from, to int) string {
		if to < 2 {
			return "weak"
		}
		return "good"
	}, "in flight")
	h.Band = bandOf(h, 0, width, 2, last)
	h.BandLabel = "overlapping (≥2)"
	h.Note = fmt.Sprintf("%d of %d bursts overlapped; %d put the guard to the test", r.Overlapped(), len(r.Bursts), a.Tested)
	return h
}

// bandOf spans the bars holding the values lo..hi.
func bandOf(h *histogram, first, width, lo, hi int) *span {
	i, j := (lo-first)/width, (hi-first)/width
	if lo < first {
		i = 0
	}
	i, j = max(i, 0), min(j, len(h.Bars)-1)
	if j < i {
		return nil
	}
	slot := (h.PlotR - h.PlotL) / float64(len(h.Bars))
	return &span{X: r1(h.PlotL + float64(i)*slot), W: r1(float64(j-i+1) * slot)}
}

// spreadBins is the number of bars of the release spread's histogram.
const spreadBins = 20

func spreadHistogram(r *runner.Result) *histogram {
	var top time.Duration
	for _, b := range r.Bursts {
		top = max(top, b.Spread)
	}
	// Bins of a round width, so that the axis reads 0, 5µs, 10µs…
	width := niceStep(top/spreadBins + 1)
	n := int(top/width) + 1
	counts := make([]int, n)
	for _, b := range r.Bursts {
		counts[int(b.Spread/width)]++
	}
	h := newHistogram("spread", "Release spread", len(r.Bursts), n, counts)
	for i := range h.Bars {
		h.Bars[i].Class = "good"
		h.Bars[i].Label = fmt.Sprintf("%s–%s: %s", human(time.Duration(i)*width), human(time.Duration(i+1)*width), plural(h.Bars[i].Count, "burst"))
	}
	// Ticks at bin edges, but not at the right end, where a label is cut.
	step := max(n/5, 1)
	for i := 0; i < n; i += step {
		x := h.PlotL + float64(i)*(h.PlotR-h.PlotL)/float64(n)
		h.Ticks = append(h.Ticks, tick{r1(x), human(time.Duration(i) * width)})
	}
	h.Note = "first to last attempt out; median " + human(r.SpreadSummary().Median)
	return h
}

// niceStep rounds d up to 1, 2 or 5 times a power of ten nanoseconds.
func niceStep(d time.Duration) time.Duration {
	step := time.Duration(1)
	for {
		for _, m := range []time.Duration{1, 2, 5} {
			if step*m >= d {
				return step * m
			}
		}
		step *= 10
	}
}

func collectInts(bs []runner.Burst, f func(runner.Burst) int) []int {
	out := make([]int, len(bs))
	for i, b := range bs {
		out[i] = f(b)
	}
	return out
}

// timelineLanes caps the lanes of a drawn timeline; a burst of thousands is
// summarised by its first lanes and a count of the rest.
const timelineLanes = 64

// timelineSVG is the worst burst drawn: a lane per worker, its marks on a
// shared time axis.
type timelineSVG struct {
	Burst, Effects, Allowed int
	Twin                    bool
	W, H                    int
	Lanes                   []lane
	More                    int
	Ticks                   []tick
	AxisY                   float64
	PlotL, PlotR, OutcomeX  float64
	Legend                  []string
	Held                    string // heldNoteHTML, when a step is marked before its release
}

type lane struct {
	Y          float64
	Label      string
	Outcome    string
	Info       string
	X1, X2     float64
	Marks      []laneMark
	LabelY     float64
	OutcomeCls string
}

type laneMark struct {
	X     float64
	Name  string
	Class string
	Info  string
}

const (
	tlW, tlLaneH    = 900, 22
	tlLeft, tlRight = 96, 110
	tlTop           = 8
)

func newTimelineSVG(t *runner.Trace) *timelineSVG {
	if t == nil || len(t.Workers) == 0 {
		return nil
	}
	var end time.Duration
	for _, wt := range t.Workers {
		if n := len(wt.Marks); n > 0 {
			end = max(end, wt.Marks[n-1].At)
		}
	}
	end = max(end, time.Microsecond)
	shown := t.Workers[:min(len(t.Workers), timelineLanes)]
	s := &timelineSVG{Burst: t.Burst, Effects: t.Effects, Allowed: t.Allowed, Twin: t.Twin, W: tlW,
		More: len(t.Workers) - len(shown), PlotL: tlLeft, PlotR: tlW - tlRight, OutcomeX: tlW - tlRight + 12}
	x := func(d time.Duration) float64 {
		return r1(s.PlotL + float64(d)/float64(end)*(s.PlotR-s.PlotL))
	}
	used := map[string]bool{}
	for i, wt := range shown {
		y := float64(tlTop + i*tlLaneH + tlLaneH/2)
		l := lane{Y: y, LabelY: y + 4, Label: fmt.Sprintf("w%d r%d", wt.Worker, wt.Replica), Outcome: wt.Outcome.String(),
			OutcomeCls: "o-" + wt.Outcome.String()}
		if wt.Wave > 0 {
			l.Label += fmt.Sprintf(" v%d", wt.Wave)
		}
		var times []string
		for j, m := range wt.Marks {
			mx := x(m.At)
			if j == 0 {
				l.X1 = mx
			}
			l.X2 = mx
			cls := "m-other"
			switch m.Name {
			case "released", "check", "act", "done":
				cls = "m-" + m.Name
			}
			used[m.Name] = true
			l.Marks = append(l.Marks, laneMark{X: mx, Name: m.Name, Class: cls,
				Info: fmt.Sprintf("%s — %s at %s", l.Label, m.Name, human(m.At))})
			times = append(times, m.Name+" "+human(m.At))
		}
		l.Info = fmt.Sprintf("%s: %s — %s", l.Label, l.Outcome, strings.Join(times, ", "))
		if wt.Err != "" && wt.Outcome != runner.Executed {
			l.Info += " — " + wt.Err
		}
		s.Lanes = append(s.Lanes, l)
	}
	s.AxisY = float64(tlTop + len(shown)*tlLaneH + 4)
	s.H = int(s.AxisY) + 22
	step := niceStep(end / 5)
	for d := time.Duration(0); d <= end; d += step {
		s.Ticks = append(s.Ticks, tick{x(d), human(d)})
	}
	for _, name := range []string{"released", "check", "act", "done"} {
		if used[name] {
			s.Legend = append(s.Legend, name)
		}
	}
	if heldBeforeRelease(t) {
		s.Held = heldNoteHTML
	}
	return s
}
