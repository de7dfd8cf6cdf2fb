package report

import (
	"encoding/xml"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/racetest/racetest/internal/printable"
	"github.com/racetest/racetest/runner"
)

// The JUnit XML document. Its shape follows the schema Jenkins' xUnit
// plugin publishes (junit-10.xsd), which GitLab, GitHub test-report actions
// and most CI servers read: per-case figures go in <properties>, which that
// schema allows on <testsuite> only, so each case is a <testsuite> holding
// its own <testcase>. report/testdata/junit.xsd pins the shape in a test.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	ClassName string        `xml:"classname,attr"`
	Name      string        `xml:"name,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Error     *junitMessage `xml:"error,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
	SystemOut *junitText    `xml:"system-out,omitempty"`
}

// junitText is CDATA so that a report read raw keeps its line breaks.
type junitText struct {
	Text string `xml:",cdata"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Body    string `xml:",cdata"`
}

// JUnit writes the cases as JUnit XML: one test case per case, classname
// the backend and name the case. An unmet expectation is a <failure> whose
// message reads like a bug report; a run that could not be carried out is
// an <error>; an INCONCLUSIVE run that was allowed to pass is <skipped>,
// so that "proved nothing" stays visible in the CI's test view.
func JUnit(w io.Writer, cases []Case, o Options) error {
	doc := junitSuites{Name: "racetest"}
	var total float64
	for _, c := range cases {
		s := junitSuiteOf(c, o)
		doc.Tests++
		doc.Failures += s.Failures
		doc.Errors += s.Errors
		if c.Result != nil {
			total += c.Result.Elapsed.Seconds()
		}
		doc.Suites = append(doc.Suites, s)
	}
	doc.Time = seconds(total)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func junitSuiteOf(c Case, o Options) junitSuite {
	a := Assess(c)
	elapsed := 0.0
	if c.Result != nil {
		elapsed = c.Result.Elapsed.Seconds()
	}
	tc := junitCase{ClassName: xmlSafe(c.Backend), Name: xmlSafe(displayName(c)), Time: seconds(elapsed)}
	s := junitSuite{
		Name: tc.ClassName + ": " + tc.Name, Tests: 1, Time: tc.Time,
		Properties: junitProperties(c, a, o),
	}
	headline, report := xmlSafe(Headline(c)), xmlSafe(bugReport(c, a))
	switch {
	case a.Verdict == Errored && !a.Interrupted:
		tc.Error = &junitMessage{Type: string(Errored), Message: headline, Body: report}
		s.Errors = 1
	case !a.Met:
		typ := string(a.Verdict)
		if a.Interrupted {
			typ = "INTERRUPTED"
		}
		tc.Failure = &junitMessage{Type: typ, Message: headline, Body: report}
		s.Failures = 1
	case a.Verdict == Inconclusive:
		tc.Skipped = &junitMessage{Type: string(Inconclusive), Message: headline}
		s.Skipped = 1
	}
	if tc.Failure == nil && tc.Error == nil {
		// A failure carries the report as its body; say it once.
		tc.SystemOut = &junitText{report}
	}
	s.Cases = []junitCase{tc}
	return s
}

// junitProperties are the case's figures, named as in the JSON report.
func junitProperties(c Case, a Assessment, o Options) []junitProperty {
	var ps []junitProperty
	add := func(name string, v any) {
		ps = append(ps, junitProperty{Name: name, Value: xmlSafe(fmt.Sprint(v))})
	}
	add("scenario", c.Scenario)
	add("backend", c.Backend)
	if r := c.Result; r != nil && r.Server != "" {
		add("server", r.Server)
	}
	add("expect", c.Expect.String())
	add("verdict", a.Verdict)
	add("expectation_met", a.Met)
	add("expectation", a.Expectation())
	add("bursts", a.Bursts)
	add("violations", a.Violations)
	add("violation_rate", strconv.FormatFloat(a.Rate, 'g', 4, 64))
	add("upper_bound_95", strconv.FormatFloat(a.Upper, 'g', 4, 64))
	add("overlapped_bursts", a.Overlapped)
	add("tested_bursts", a.Tested)
	if r := c.Result; r != nil {
		add("planned_bursts", r.Planned)
		add("attempts_per_burst", r.Attempts)
		add("allowed", r.Allowed)
		add("required", r.Required)
		if len(r.Bursts) > 0 {
			e, ov, sp := r.EffectsSummary(), r.OverlapSummary(), r.SpreadSummary()
			add("effects_min", e.Min)
			add("effects_median", e.Median)
			add("effects_max", e.Max)
			add("overlap_median", ov.Median)
			add("spread_median_us", strconv.FormatFloat(micros(sp.Median), 'f', -1, 64))
		}
		out := r.Outcomes()
		for _, cl := range runner.Classes() {
			add("outcomes."+cl.String(), out[cl])
		}
		add("stopped_early", r.Stopped)
	}
	keys := make([]string, 0, len(c.Settings))
	for k := range c.Settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		add("settings."+k, c.Settings[k])
	}
	if o.Version != "" {
		add("racetest_version", o.Version)
	}
	return ps
}

// bugReport is what a developer reading a red build needs: what ran against
// what, what was expected, what happened (how many bursts, the worst one),
// the lesson, and how to reproduce it.
func bugReport(c Case, a Assessment) string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	r := c.Result
	where := c.Backend
	if r != nil && r.Server != "" {
		where += " (" + r.Server + ")"
	}
	if r != nil && r.Attempts > 0 {
		shape := fmt.Sprintf("%d simultaneous attempts × %d bursts", r.Attempts, len(r.Bursts))
		if r.Planned != len(r.Bursts) {
			shape += fmt.Sprintf(" (of %d planned)", r.Planned)
		}
		if r.Replicas > 1 {
			shape += fmt.Sprintf(", %d replicas", r.Replicas)
		}
		if r.Waves > 1 {
			shape += fmt.Sprintf(", %d waves", r.Waves)
			if r.Deploy {
				shape += " with a deploy between them"
			}
		}
		line("%s on %s: %s.", displayName(c), where, shape)
	} else {
		line("%s on %s.", displayName(c), where)
	}
	line("Expected: %s.", expectText(c, r))
	line("Found: %s.", foundText(c, a))
	if a.Why != "" && !a.Met && a.Verdict != Errored {
		line("Why it fails: %s.", strings.TrimSuffix(a.Why, "."))
	}
	if r != nil {
		o := outcomes(r)
		line("%s.", strings.ToUpper(o[:1])+o[1:])
		for _, n := range r.Notes {
			line("Note: %s", n)
		}
		for _, ch := range r.Checks {
			line("Check %s: %s — %s", ch.Name, checkMark(ch), ch.Detail)
		}
		for _, e := range topErrors(r.Errors, 3) {
			line("%s", e)
		}
	}
	if c.Lesson != "" {
		line("Lesson: %s.", strings.TrimSuffix(c.Lesson, "."))
	}
	if s := settings(c); s != "" {
		line("%s", strings.Replace(s, "settings:", "Settings:", 1))
	}
	if cmd := reproduce(c); cmd != "" {
		line("Reproduce: %s", cmd)
	}
	return b.String()
}

func expectText(c Case, r *runner.Result) string {
	allowed := 1
	if r != nil {
		allowed = r.Allowed
	}
	required := min(1, allowed)
	if r != nil {
		required = r.Required
	}
	switch c.Expect.Kind {
	case ExpectRace:
		return fmt.Sprintf("RACE (some burst leaves more than %s)", plural(allowed, "effect"))
	case ExpectLost:
		return fmt.Sprintf("LOST (some burst leaves fewer than %s while an attempt claims it done)", plural(required, "effect"))
	case ExpectMax:
		return fmt.Sprintf("at most %s per burst", plural(c.Expect.Max, "effect"))
	case ExpectRange:
		return fmt.Sprintf("%d to %d effects per burst", c.Expect.Min, c.Expect.Max)
	}
	if required == allowed {
		return fmt.Sprintf("SAFE (exactly %s per burst)", plural(allowed, "effect"))
	}
	return fmt.Sprintf("SAFE (%d to %d effects per burst)", required, allowed)
}

func foundText(c Case, a Assessment) string {
	r := c.Result
	switch {
	case a.Verdict == Errored && !a.Interrupted:
		return "nothing: the run could not be carried out: " + a.Why
	case r == nil || len(r.Bursts) == 0:
		return "no burst completed"
	}
	worst := worstBurst(r)
	found := ""
	switch a.Verdict {
	case Race:
		found = fmt.Sprintf("RACE — %d of %d bursts left more than %s (%s, 95%% upper bound %s); worst was burst #%d with %s",
			a.Violations, a.Bursts, ceiling(r), percent(a.Rate), percent(a.Upper), worst.Index, plural(worst.Effects, "effect"))
	case Lost:
		found = fmt.Sprintf("LOST — %d of %d bursts left fewer than %s while an attempt claimed it done (%s, 95%% upper bound %s); the fewest was %s",
			a.Violations, a.Bursts, floor(r), percent(a.Rate), percent(a.Upper), plural(r.EffectsSummary().Min, "effect"))
	case Safe:
		found = fmt.Sprintf("SAFE — 0 of %d tested bursts left the allowed range (violation rate ≤%s at 95%%); worst burst had %s",
			a.Tested, percent(a.Upper), plural(worst.Effects, "effect"))
	case Inconclusive:
		found = fmt.Sprintf("INCONCLUSIVE — no violation in %d bursts, but %s", a.Bursts, a.Why)
	default:
		found = string(a.Verdict)
	}
	if r.Stopped {
		found += fmt.Sprintf("; stopped at the first violation, after %d of %d planned bursts", len(r.Bursts), r.Planned)
	}
	return found
}

// worstBurst is the first burst with the most effects.
func worstBurst(r *runner.Result) runner.Burst {
	var w runner.Burst
	for i, b := range r.Bursts {
		if i == 0 || b.Effects > w.Effects {
			w = b
		}
	}
	return w
}

// reproduceFlags are the settings that are flags of 'racetest run', and
// whether each takes a value. Other settings (a suite's prove bound, an
// HTTP case's release) have no such flag and are left out.
var reproduceFlags = map[string]bool{
	"gap": true, "latency": true, "seed": true, "ttl": true, "timeout": true, "replicas": true, "waves": true,
	"isolation": true, "engine": true, "variant": true, "deploy": false, "processes": false,
}

// reproduce is the command that runs the case again, shell-quoted so
// that it runs as printed: the case's own Command, else, for a built-in
// case, 'racetest run' with every setting that is one of its flags. A
// case neither can say (an HTTP or script case without its command) has
// no line rather than a wrong one.
func reproduce(c Case) string {
	if c.Command != "" {
		return c.Command
	}
	if c.Scenario == "" || c.Backend == "" || c.Backend == "http" || c.Scenario == "script" {
		return ""
	}
	parts := []string{"racetest", "run", c.Scenario, "--backend", c.Backend}
	if r := c.Result; r != nil && r.Attempts > 0 {
		parts = append(parts, "-n", strconv.Itoa(r.Attempts), "--bursts", strconv.Itoa(r.Planned))
	}
	keys := make([]string, 0, len(c.Settings))
	for k := range c.Settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := c.Settings[k]
		takesValue, ok := reproduceFlags[k]
		switch {
		case !ok || v == "false":
		case !takesValue:
			parts = append(parts, "--"+k)
		default:
			parts = append(parts, "--"+k, v)
		}
	}
	// The default (auto) is the gate only on memory: anywhere else the
	// mode the run used is named, or the command would run another one.
	if c.Release != "" && (c.Release != "gate" || c.Backend != "memory") {
		parts = append(parts, "--release", c.Release)
	}
	if c.Expect.Kind != "" {
		parts = append(parts, "--expect", c.Expect.String())
	}
	if c.Strict {
		parts = append(parts, "--strict")
	}
	return printable.ShellLine(parts...)
}

func seconds(s float64) string { return strconv.FormatFloat(s, 'f', 3, 64) }

// xmlSafe replaces what XML 1.0 cannot carry at all, escaped or not (NUL,
// most control characters, invalid UTF-8), with U+FFFD: an error message
// quoting a binary protocol must not make the whole report unreadable.
func xmlSafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == utf8.RuneError:
			return '\uFFFD'
		case r == '\t' || r == '\n' || r == '\r':
			return r
		case r < 0x20, r >= 0xD800 && r <= 0xDFFF, r == 0xFFFE, r == 0xFFFF:
			return '\uFFFD'
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
}
