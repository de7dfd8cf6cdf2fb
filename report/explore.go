package report

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"html/template"
	"io"
	"regexp"
	"sort"
	"strings"

	"github.com/racetest/racetest/explore"
)

// Exploration is one 'racetest explore' (or 'replay') as the reporters
// show it.
type Exploration struct {
	Name     string // "check-then-write", or the attempt script's name
	Backend  string
	Settings map[string]string
	Result   *explore.Result
	// Describe names a step as a person reads it ("SELECT … (redeem.sql:2)");
	// nil: the step's own name.
	Describe func(step string) string
	// Replay is the command that replays an order, without its --schedule.
	Replay string
	// Replayed: one order was replayed; its verdict is that order's alone.
	Replayed bool
	// Expect is what the exploration must show: safe or race.
	Expect ExpectKind
	// Err is why the exploration did not finish (the orders that ran stay).
	Err error
	// Granularity says what one step is, for the SAFE line: "one whole
	// statement" ("" says nothing more than the step granularity).
	Granularity string
	// Confirm is what bursts of the same attempts showed after a SAFE
	// (--confirm); nil when none ran.
	Confirm *Confirmation
	// Width is the columns the text report may use (0: DefaultWidth):
	// longer lines fold under their own indent, a replay command with a
	// trailing backslash so that it still pastes into a shell.
	Width int
}

// Confirmation is what bursts of the same attempts, released together,
// showed after an exploration's SAFE (--confirm N): a race inside one
// step, which no order of whole steps can show, shows there.
type Confirmation struct {
	Bursts     int     `json:"bursts"`
	Violations int     `json:"violations"` // bursts outside the allowed range
	Tested     int     `json:"tested"`
	Verdict    Verdict `json:"verdict"` // the bursts' own verdict
	// Skipped says why no burst ran ("" when they ran).
	Skipped string `json:"skipped,omitempty"`
}

// contradicts reports bursts that broke where every order held.
func (c *Confirmation) contradicts() bool {
	return c != nil && c.Skipped == "" && (c.Verdict == Race || c.Verdict == Lost)
}

// Verdict is the exploration's answer; a replay's SAFE is the one order's.
// A SAFE that the confirming bursts contradict is their RACE (or LOST):
// a SAFE that bursts break is a false SAFE, whatever its granularity.
func (e Exploration) Verdict() Verdict {
	if e.Result == nil {
		return Errored
	}
	v := Verdict(e.Result.Verdict())
	if v == Safe && e.Confirm.contradicts() {
		return e.Confirm.Verdict
	}
	return v
}

// Met reports whether the verdict is what was expected; unproven is an
// INCONCLUSIVE verdict.
func (e Exploration) Met() (ok, unproven bool) {
	switch v := e.Verdict(); {
	case v == Errored:
		return false, false
	case v == Inconclusive:
		return true, true
	case e.Expect == ExpectRace:
		return v == Race, false
	default:
		return v == Safe, false
	}
}

// Why says what the verdict rests on in one line.
func (e Exploration) Why() string {
	if e.Result == nil {
		return fmt.Sprint(e.Err)
	}
	if e.Replayed {
		o := e.Result.Orders[0]
		if e.Result.Uncounted {
			return fmt.Sprintf("this order (%s) %s", o.Schedule, e.invariants(o))
		}
		why := fmt.Sprintf("this order (%s) left %s, %d allowed", o.Schedule, plural(o.Effects, "effect"), o.Allowed)
		if len(e.Result.Invariants) > 0 {
			why += ", and " + e.invariants(o)
		}
		return why
	}
	c := e.Confirm
	if e.Result.Verdict() != explore.Safe {
		return e.Result.Why()
	}
	if c.contradicts() {
		left := "more effects than allowed"
		if len(e.Result.Invariants) > 0 {
			left = "more effects than allowed or broke an invariant"
		}
		if c.Verdict == Lost {
			left = "fewer effects than required"
		}
		return fmt.Sprintf("the bursts contradict the exploration: %d of %d bursts of the same %d attempts released together left %s, "+
			"though all %d orders of whole steps stayed in the allowed range: what they show is inside one step, below explore's step granularity",
			c.Violations, c.Bursts, e.Result.Attempts, left, len(e.Result.Orders))
	}
	why := e.Result.Why()
	if e.Granularity != "" {
		why += "; each step is " + e.Granularity + ", so a race inside one step is for the bursts"
	}
	switch {
	case c == nil:
		return why + "; no bursts confirmed it (--confirm 0)"
	case c.Skipped != "":
		return why + "; no bursts confirmed it (" + c.Skipped + ")"
	case c.Verdict == Safe:
		return why + fmt.Sprintf("; %d bursts of the same attempts released together agree (%d tested)", c.Bursts, c.Tested)
	}
	return why + fmt.Sprintf("; %d bursts of the same attempts released together were %s: they neither agree nor disagree", c.Bursts, c.Verdict)
}

var fileLine = regexp.MustCompile(`\(([^():]+):(\d+)\)$`)

// Readable writes an order as a person reads it: "A: SELECT … (redeem.sql:2)
// → B: SELECT … (:2) → … — 2 effects".
func (e Exploration) Readable(o explore.Order) string {
	var parts []string
	seen := map[string]bool{}
	for _, ev := range o.Ran {
		d := ev.Name
		if e.Describe != nil {
			d = e.Describe(ev.Name)
		}
		if m := fileLine.FindStringSubmatchIndex(d); m != nil {
			file := d[m[2]:m[3]]
			if seen[file] {
				d = d[:m[2]] + d[m[3]:]
			}
			seen[file] = true
		}
		s := explore.Letter(ev.Worker) + ": " + d
		if ev.Blocked {
			s += " [blocked]"
		}
		parts = append(parts, s)
	}
	var outs []string
	for i, a := range o.Attempts {
		s := explore.Letter(i) + " " + a.Class
		if a.Class == "conflict" {
			if a.Deadlock {
				s += " (deadlock)"
			} else {
				s += " (serialization failure)"
			}
		}
		outs = append(outs, s)
	}
	left := plural(o.Effects, "effect")
	if e.Result != nil && e.Result.Uncounted {
		left = e.invariants(o)
	} else if e.Result != nil && len(e.Result.Invariants) > 0 {
		left += ", " + e.invariants(o)
	}
	return fmt.Sprintf("%s — %s (%s)", strings.Join(parts, " → "), left, strings.Join(outs, ", "))
}

// invariants says what the order did to the invariants: "broke the
// invariant SELECT …", or "kept every invariant".
func (e Exploration) invariants(o explore.Order) string {
	var broke []string
	for i, n := range o.Broken {
		if n > 0 && i < len(e.Result.Invariants) {
			broke = append(broke, e.Result.Invariants[i])
		}
	}
	if len(broke) == 0 {
		return "kept every invariant"
	}
	return "broke the invariant " + strings.Join(broke, " and the invariant ")
}

// ReplayCommand is the command that replays o.
func (e Exploration) ReplayCommand(o explore.Order) string {
	return e.Replay + " --schedule '" + o.Schedule + "'"
}

func (e Exploration) settings() string {
	keys := make([]string, 0, len(e.Settings))
	for k := range e.Settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+"="+e.Settings[k])
	}
	return strings.Join(parts, " ")
}

// ExploreReporter writes an exploration in one format.
type ExploreReporter func(w io.Writer, e Exploration) error

// LookupExplore finds an exploration reporter by name, or says which exist.
func LookupExplore(name string) (ExploreReporter, error) {
	f, err := FormatOf(name)
	return f.Explore, err
}

// maxShown is how many violating orders the text report shows.
const maxShown = 5

// ExploreText is the terminal's report.
func ExploreText(w io.Writer, e Exploration) error {
	var b strings.Builder
	r := e.Result
	title := e.Name + " on " + e.Backend
	if s := e.settings(); s != "" {
		title += " (" + s + ")"
	}
	fmt.Fprintln(&b, title)
	if r != nil {
		if r.Server != "" {
			fmt.Fprintln(&b, "server:", r.Server)
		}
		c := r.Count()
		if !e.Replayed {
			if !r.Alike() {
				fmt.Fprintf(&b, "steps of each attempt: %s\n", r.Shape())
			} else {
				fmt.Fprintf(&b, "steps of one attempt: %s\n", strings.Join(r.Steps, ", "))
			}
			fmt.Fprintf(&b, "orders: %d explored of %s (%d pruned as equivalent", c.Explored, r.Total, r.Pruned)
			if r.Unexplored != "" {
				fmt.Fprintf(&b, ", %s unexplored", r.Unexplored)
			}
			fmt.Fprintf(&b, "), %d violating, %d blocked, %d deadlocked, %d conflicts, %d abandoned — %s\n",
				c.Violating, c.Blocked, c.Deadlocked, c.Conflicts, c.Abandoned, human(r.Elapsed))
		}
		if v := r.Violating(); len(v) > 0 {
			fmt.Fprintf(&b, "\nviolating orders (%d distinct as they ran; the fewest switches between attempts first):\n", len(v))
			for i, o := range v {
				if i == maxShown {
					fmt.Fprintf(&b, "  … and %d more (--format json lists every order)\n", len(v)-maxShown)
					break
				}
				fmt.Fprintf(&b, "  %s\n    %s\n", e.Readable(o), e.ReplayCommand(o))
			}
		} else if e.Replayed {
			fmt.Fprintf(&b, "\norder:\n  %s\n", e.Readable(r.Orders[0]))
		}
		for _, n := range r.Notes {
			fmt.Fprintln(&b, "note:", n)
		}
	}
	fmt.Fprintf(&b, "\n%s  %s\n", e.Verdict(), e.Why())
	if e.Err != nil && r != nil {
		fmt.Fprintln(&b, "stopped:", e.Err)
	}
	_, err := io.WriteString(w, foldLines(b.String(), e.Width))
	return err
}

// foldShell folds a shell command into lines of at most width columns,
// breaking only between words (never inside a quoted one); a word longer
// than a line stays whole.
func foldShell(cmd string, width int, indent string) []string {
	var words []string
	start, quoted := 0, false
	for i := 0; i <= len(cmd); i++ {
		switch {
		case i == len(cmd) || cmd[i] == ' ' && !quoted:
			if i > start {
				words = append(words, cmd[start:i])
			}
			start = i + 1
		case cmd[i] == '\'':
			quoted = !quoted
		}
	}
	var lines []string
	line := indent
	for _, w := range words {
		if line != indent && line != indent+"  " && visibleLen(line)+1+visibleLen(w) > width {
			lines = append(lines, line)
			line = indent + "  "
		}
		if line != indent && line != indent+"  " {
			line += " "
		}
		line += w
	}
	return append(lines, line)
}

// foldLines folds each line of s longer than width (0: DefaultWidth)
// under its own indent, two columns deeper; a replay command is folded
// with a trailing backslash on each line but the last.
func foldLines(s string, width int) string {
	if width <= 0 {
		width = DefaultWidth
	}
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if visibleLen(line) <= width {
			out = append(out, line)
			continue
		}
		indent := line[:len(line)-len(strings.TrimLeft(line, " "))]
		if strings.HasPrefix(line[len(indent):], "racetest replay ") {
			out = append(out, strings.Join(foldShell(line[len(indent):], width-2, indent), " \\\n"))
			continue
		}
		out = append(out, wrapText(line, width, indent, indent+"  ")...)
	}
	return strings.Join(out, "\n")
}

type exploreJSON struct {
	Schema     string            `json:"schema"`
	Name       string            `json:"name"`
	Backend    string            `json:"backend"`
	Settings   map[string]string `json:"settings,omitempty"`
	Verdict    Verdict           `json:"verdict"`
	Why        string            `json:"why"`
	Expect     ExpectKind        `json:"expect"`
	Met        bool              `json:"met"`
	Counts     *explore.Counts   `json:"counts,omitempty"`
	ElapsedSec float64           `json:"elapsed_seconds"`
	Violating  []violationJSON   `json:"violating"`
	Result     *explore.Result   `json:"result,omitempty"`
	Confirm    *Confirmation     `json:"confirm,omitempty"`
	Error      string            `json:"error,omitempty"`
}

type violationJSON struct {
	Schedule string `json:"schedule"`
	Readable string `json:"readable"`
	Effects  int    `json:"effects"`
	Replay   string `json:"replay"`
}

func (e Exploration) doc() exploreJSON {
	ok, _ := e.Met()
	d := exploreJSON{Schema: "racetest.explore/v1", Name: e.Name, Backend: e.Backend, Settings: e.Settings,
		Verdict: e.Verdict(), Why: e.Why(), Expect: e.Expect, Met: ok, Result: e.Result, Confirm: e.Confirm, Violating: []violationJSON{}}
	if e.Err != nil {
		d.Error = e.Err.Error()
	}
	if r := e.Result; r != nil {
		c := r.Count()
		d.Counts, d.ElapsedSec = &c, r.Elapsed.Seconds()
		for _, o := range r.Violating() {
			d.Violating = append(d.Violating, violationJSON{Schedule: o.Schedule, Readable: e.Readable(o), Effects: o.Effects, Replay: e.ReplayCommand(o)})
		}
	}
	return d
}

// ExploreJSON writes the exploration as one JSON document (schema
// racetest.explore/v1): every count of the text report, every order.
func ExploreJSON(w io.Writer, e Exploration) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(e.doc())
}

// ExploreMarkdown writes the exploration for a CI job summary.
func ExploreMarkdown(w io.Writer, e Exploration) error {
	d := e.doc()
	var b strings.Builder
	fmt.Fprintf(&b, "## racetest explore: %s on %s\n\n**%s** — %s\n\n", mdEscape(e.Name), e.Backend, d.Verdict, mdEscape(d.Why))
	if c := d.Counts; c != nil {
		fmt.Fprintf(&b, "| explored | violating | blocked | deadlocked | conflicts | abandoned |\n|---|---|---|---|---|---|\n| %d | %d | %d | %d | %d | %d |\n\n",
			c.Explored, c.Violating, c.Blocked, c.Deadlocked, c.Conflicts, c.Abandoned)
	}
	for _, v := range d.Violating {
		fmt.Fprintf(&b, "- %s  \n  `%s`\n", mdEscape(v.Readable), v.Replay)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ExploreJUnit writes one test case: it fails where the expectation failed.
func ExploreJUnit(w io.Writer, e Exploration) error {
	type failure struct {
		Message string `xml:"message,attr"`
		Text    string `xml:",chardata"`
	}
	type tc struct {
		Name      string   `xml:"name,attr"`
		Classname string   `xml:"classname,attr"`
		Time      float64  `xml:"time,attr"`
		Failure   *failure `xml:"failure,omitempty"`
		SystemOut string   `xml:"system-out,omitempty"`
	}
	type suite struct {
		XMLName  xml.Name `xml:"testsuite"`
		Name     string   `xml:"name,attr"`
		Tests    int      `xml:"tests,attr"`
		Failures int      `xml:"failures,attr"`
		Cases    []tc     `xml:"testcase"`
	}
	d := e.doc()
	c := tc{Name: e.Name + " on " + e.Backend, Classname: "racetest.explore", Time: d.ElapsedSec}
	var lines []string
	for _, v := range d.Violating {
		lines = append(lines, v.Readable, "  "+v.Replay)
	}
	c.SystemOut = strings.Join(lines, "\n")
	s := suite{Name: "racetest explore", Tests: 1, Cases: []tc{c}}
	if ok, _ := e.Met(); !ok {
		s.Failures = 1
		s.Cases[0].Failure = &failure{Message: fmt.Sprintf("%s, expected %s: %s", d.Verdict, e.Expect, d.Why), Text: c.SystemOut}
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(s); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// ExploreHTML writes the exploration on the report's own page (one
// self-contained file, as for runs): its verdict, the counts, each
// violating order with the command that replays it, and the settings.
func ExploreHTML(w io.Writer, e Exploration) error {
	d := e.doc()
	x := &htmlExploration{Name: d.Name, Backend: d.Backend, Verdict: string(d.Verdict),
		VerdictClass: "v-" + strings.ToLower(string(d.Verdict)), Why: d.Why, Expect: string(d.Expect), Met: d.Met,
		Counts: d.Counts, Violating: d.Violating, Settings: htmlPairs(d.Settings)}
	if r := e.Result; r != nil {
		x.Server, x.Lines = r.Server, r.Notes
	}
	if d.Error != "" {
		x.Lines = append(append([]string(nil), x.Lines...), "stopped: "+d.Error)
	}
	return writePage(w, page, htmlPage{Title: "racetest explore: " + e.Name + " on " + e.Backend,
		CSS: template.CSS(pageStyle), JS: template.JS(pageScript), Exploration: x})
}

// htmlExploration is an exploration as the page shows it.
type htmlExploration struct {
	Name, Backend, Verdict, VerdictClass string
	Why, Expect, Server                  string
	Met                                  bool
	Counts                               *explore.Counts
	Violating                            []violationJSON
	Settings                             []htmlPair
	Lines                                []string
}

// htmlPairs lists settings sorted by key.
func htmlPairs(m map[string]string) []htmlPair {
	pairs := make([]htmlPair, 0, len(m))
	for k, v := range m {
		pairs = append(pairs, htmlPair{k, v})
	}
	sort.Slice(pairs, func(i, j int) bool { return pairs[i].Key < pairs[j].Key })
	return pairs
}
