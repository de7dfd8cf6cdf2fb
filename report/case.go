// Package report turns runner Results into verdicts and renders them: a
// table for people, JSON for programs, a timeline for one burst. It never
// touches a backend.
package report

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/racetest/racetest/runner"
)

// Verdict is what a run shows.
type Verdict string

const (
	// Race: some burst left more effects than allowed.
	Race Verdict = "RACE"
	// Lost: some burst left fewer effects than required while an attempt
	// claimed it was done — a user told "already paid" who was never paid.
	Lost Verdict = "LOST"
	// Safe: no burst left the allowed range, and enough bursts put the
	// guard to the test (the action took effect, two attempts overlapped).
	Safe Verdict = "SAFE"
	// Inconclusive: no violation, but too few bursts tested anything.
	Inconclusive Verdict = "INCONCLUSIVE"
	// Errored: the run could not be carried out; nothing is claimed.
	Errored Verdict = "ERROR"
)

// ExpectKind is what kind of outcome a run is expected to show.
type ExpectKind string

const (
	// ExpectSafe: the verdict must be SAFE (the default).
	ExpectSafe ExpectKind = "safe"
	// ExpectRace: the verdict must be RACE: the naive pattern must break.
	ExpectRace ExpectKind = "race"
	// ExpectLost: the verdict must be LOST: the pattern loses the action.
	ExpectLost ExpectKind = "lost"
	// ExpectMax: no burst over Max effects, none under the run's floor.
	ExpectMax ExpectKind = "max"
	// ExpectRange: every burst between Min and Max effects.
	ExpectRange ExpectKind = "range"
)

// Expect is what the user (or the catalog) expects of a run.
type Expect struct {
	Kind     ExpectKind
	Min, Max int
}

// ParseExpect reads "safe", "race", "lost", "max=N" or "range=MIN-MAX".
func ParseExpect(s string) (Expect, error) {
	switch k, arg, _ := strings.Cut(s, "="); ExpectKind(k) {
	case ExpectSafe, ExpectRace, ExpectLost:
		if arg == "" {
			return Expect{Kind: ExpectKind(k)}, nil
		}
	case ExpectMax:
		n, err := strconv.Atoi(arg)
		if err != nil || n < 1 {
			return Expect{}, fmt.Errorf("expectation %q: max=N needs a whole number N of at least 1", s)
		}
		return Expect{Kind: ExpectMax, Max: n}, nil
	case ExpectRange:
		lo, hi, err := ParseRange(arg)
		if err != nil {
			return Expect{}, fmt.Errorf("expectation %q: %w", s, err)
		}
		return Expect{Kind: ExpectRange, Min: lo, Max: hi}, nil
	}
	return Expect{}, fmt.Errorf("%w %q (want safe, race, lost, max=N or range=MIN-MAX)", ErrUnknownExpectation, s)
}

// ErrUnknownExpectation is ParseExpect's error for a word it does not
// know, so that a command that also takes "catalog" can say so.
var ErrUnknownExpectation = errors.New("unknown expectation")

// ParseRange reads "N" (exactly N) or "MIN-MAX" effects per burst.
func ParseRange(s string) (lo, hi int, err error) {
	a, b, isRange := strings.Cut(strings.TrimSpace(s), "-")
	lo, err1 := strconv.Atoi(strings.TrimSpace(a))
	hi, err2 := lo, error(nil)
	if isRange {
		hi, err2 = strconv.Atoi(strings.TrimSpace(b))
	}
	if err1 != nil || err2 != nil || lo < 0 || hi < lo {
		return 0, 0, fmt.Errorf("%q is not a count of effects: write N or MIN-MAX with 0 <= MIN <= MAX (e.g. 1 or 0-1)", s)
	}
	return lo, hi, nil
}

func (e Expect) String() string {
	switch e.Kind {
	case ExpectMax:
		return "max=" + strconv.Itoa(e.Max)
	case ExpectRange:
		return fmt.Sprintf("range=%d-%d", e.Min, e.Max)
	case "":
		return string(ExpectSafe)
	}
	return string(e.Kind)
}

// Case is one scenario × backend run with what was expected of it.
type Case struct {
	Name     string // display name, e.g. "memory-set (3 replicas)"
	Scenario string
	Backend  string
	Lesson   string
	Expect   Expect
	// Strict makes INCONCLUSIVE fail the expectation, whatever it is.
	Strict bool
	// ProveSafe makes INCONCLUSIVE fail an expectation of SAFE (exit 4):
	// one the user asked for (--expect safe, or catalog where the catalog
	// expects SAFE) is asked to be proven, and a run that proved nothing
	// has not proven it. --allow-inconclusive leaves it unset.
	ProveSafe bool
	// Settings are the run's knobs worth showing (gap, latency, isolation…).
	Settings map[string]string
	Release  string
	// Prove, when set, is the violation rate a SAFE run must bound at 95%;
	// a run whose overlapping bursts were too few to bound it is INCONCLUSIVE.
	Prove float64
	// Story is the scenario's story as 'racetest explain' tells it, for
	// reports that fold it under the case (HTML).
	Story []StoryPart
	// Command runs the case again, as a person pastes it: 'racetest sql
	// …' as it was given, 'racetest suite FILE --case NAME' for a suite's
	// own code. Empty for a built-in scenario, whose Reproduce line is
	// built from its settings.
	Command string
	Result  *runner.Result
	Err     error
}

// StoryPart is one titled paragraph of a scenario's story.
type StoryPart struct {
	Title string `json:"title"`
	Text  string `json:"text"`
	// Code marks text shown as it is written (the naive code).
	Code bool `json:"code,omitempty"`
}

// Assessment is the verdict on a case and whether it met its expectation.
type Assessment struct {
	Verdict Verdict
	// Violations counts the bursts outside the allowed range: over it for
	// RACE, under it for LOST.
	Violations int
	Bursts     int
	Overlapped int
	// Tested counts the bursts that put the guard to the test: the action
	// took effect and two answered attempts overlapped. SAFE rests on them.
	Tested int
	// Rate is Violations over the bursts something judged (all but those
	// before which every invariant of an invariant-only run was already
	// broken: runner.Result.Judged); Upper is its 95% upper bound. For a
	// SAFE verdict both are computed over the tested bursts, the only ones
	// that could have shown a race.
	Rate, Upper float64
	// Unjudged counts the bursts nothing judged (runner.Burst.Unobserved).
	Unjudged int
	Met      bool
	// Unproven: the expectation failed only because the run was
	// INCONCLUSIVE under --strict, or under an expectation of SAFE to be
	// proven (Case.ProveSafe): exit 4, not 1.
	Unproven bool
	// Why explains an unmet expectation, an error or an inconclusive run;
	// beside SAFE it is a caveat (accountingCaveat), or empty.
	Why         string
	Interrupted bool
}

// Expectation says in one word for every format whether the case met
// its expectation: "met", "unproven" (INCONCLUSIVE let through: by
// --allow-inconclusive, or by an expectation that was not asked to be
// proven; it proves nothing, so it never reads "ok") or "failed" (an
// INCONCLUSIVE that fails its expectation, Unproven, is "failed").
func (a Assessment) Expectation() string {
	if !a.Met {
		return "failed"
	}
	if a.Verdict == Inconclusive {
		return "unproven"
	}
	return "met"
}

// MinTestedShare is the share of bursts that must have put the guard to
// the test (Burst.Tested) for a run without violations to count as SAFE
// rather than INCONCLUSIVE.
const MinTestedShare = 0.5

// Assess decides a case's verdict and checks it against the expectation.
func Assess(c Case) (a Assessment) {
	r := c.Result
	if r != nil {
		a.Bursts = len(r.Bursts)
		a.Overlapped = r.Overlapped()
		a.Tested = r.Tested()
		a.Unjudged = a.Bursts - r.Judged()
		a.Interrupted = r.Interrupted
	}
	if a.Interrupted || errors.Is(c.Err, context.Canceled) {
		// Report what finished; the expectation is not met by a run cut short.
		a.Interrupted = true
		c.Err = nil
		defer func() {
			a.Met, a.Unproven = false, false
			a.Why = "interrupted after " + plural(a.Bursts, "burst") + " of " + plural(planned(r), "planned burst")
		}()
	}
	// Ifs rather than switches where a verdict is decided: gremlins v0.6.0
	// never mutates a switch's case expressions (scripts/mutation.sh).
	if c.Err != nil {
		a.Verdict, a.Why = Errored, c.Err.Error()
		return a
	}
	if a.Bursts == 0 {
		a.Verdict, a.Why = Errored, "no burst completed"
		return a
	}
	a.Verdict, a.Violations, a.Why = verdict(r, a.Tested)
	for _, ch := range r.Checks {
		if ch.Inconclusive && a.Verdict == Safe {
			a.Verdict, a.Why = Inconclusive, "check "+ch.Name+" could not judge: "+ch.Detail
		}
	}
	// An invariant the user asked to hold that judged no burst (it read
	// broken before every one) leaves SAFE unproven, whatever else held.
	if why := unjudgedWhy(r, true); why != "" && a.Verdict == Safe {
		a.Verdict, a.Why = Inconclusive, why
	}
	switch a.Verdict {
	case Race, Lost:
		// Over the bursts something judged: one that started with every
		// invariant broken could show neither a violation nor its absence.
		judged := a.Bursts - a.Unjudged
		a.Rate = float64(a.Violations) / float64(judged)
		a.Upper = UpperBound(a.Violations, judged)
	default:
		a.Upper = UpperBound(0, a.Tested)
	}
	if a.Verdict == Safe && c.Prove > 0 && a.Upper > c.Prove {
		a.Verdict = Inconclusive
		a.Why = fmt.Sprintf("asked to prove a violation rate ≤%s at 95%%, but only %d of %d bursts were tested, which proves ≤%s",
			percent(c.Prove), a.Tested, a.Bursts, percent(a.Upper))
	}
	a.Met, a.Unproven, a.Why = met(c, r, a)
	if a.Verdict == Safe && a.Why == "" {
		a.Why = accountingCaveat(r)
	}
	return a
}

// accountingCaveat is the line beside a SAFE run judged by accounting
// (--allowed successes) alone in which some tested burst had more than one
// success. Accounting answers "did every reported success land?", and for
// a counter or a balance several per burst are what should happen, so the
// verdict stands; but on a redeem-once endpoint SAFE would read as "never
// twice" when four callers were each told "redeemed" and four redemptions
// landed. "" when no such burst, or an invariant judged the run too.
func accountingCaveat(r *runner.Result) string {
	if !r.Accounting || len(r.Invariants) > 0 {
		return ""
	}
	several, most := 0, 0
	for _, b := range r.Bursts {
		if n := b.Outcomes[runner.Executed]; b.Tested() && n > 1 {
			several++
			most = max(most, n)
		}
	}
	if several == 0 {
		return ""
	}
	return fmt.Sprintf("every reported success landed, and %d of %d bursts had more than one (up to %d): accounting checks that successes landed, not that the action happened once; if it must happen once per subject (a coupon, a payment), use --allowed 1 or an --invariant",
		several, len(r.Bursts), most)
}

// verdict is what the bursts show, before any expectation: a burst over
// its allowance is a RACE, one under its floor LOST; otherwise SAFE when
// enough bursts tested the guard, else INCONCLUSIVE with the reason.
func verdict(r *runner.Result, tested int) (Verdict, int, string) {
	if why := r.Twins.Reason(); why != "" {
		return Inconclusive, 0, why
	}
	if n := r.Violations(); n > 0 {
		return Race, n, ""
	}
	if r.Stuck() {
		return Inconclusive, 0, stuck(r)
	}
	if n := r.Lost(); n > 0 {
		return Lost, n, ""
	}
	if r.Attempts < 2 {
		return Inconclusive, 0, "one attempt per burst can never race: use -n 2 or more"
	}
	if float64(tested) < MinTestedShare*float64(len(r.Bursts)) {
		return Inconclusive, 0, untested(r, tested)
	}
	return Safe, 0, ""
}

// stuck is the one line of a run whose effects check never moved while
// attempts reported that they executed the action (runner.Result.Stuck).
func stuck(r *runner.Result) string {
	return fmt.Sprintf("the effects check never changed (it read %d before and after every burst) while %d attempts reported success: does the effects check (--effects) count what the attempt does?",
		r.Bursts[0].Before, r.Outcomes()[runner.Executed])
}

// unjudgedWhy names the invariants that were already broken before some
// burst and so did not judge it (runner.Burst.Unjudged), in one line, with
// what to do; with none, only those that judged no burst at all. "" when
// there are none.
func unjudgedWhy(r *runner.Result, none bool) string {
	var parts []string
	n := len(r.Bursts)
	for i, name := range r.Invariants {
		u := r.UnjudgedBursts(i)
		if u == 0 || none && u < n {
			continue
		}
		what := "which it could not judge"
		if u == n {
			what = "nothing it could judge"
		}
		parts = append(parts, fmt.Sprintf("invariant %s was already broken before %d of %d bursts: %s", name, u, n, what))
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, "; ") + "; fix the data, or scope it to the burst's subject ({{.Token}})"
}

// untested says in one line why too few bursts tested the guard, from the
// attempts' outcomes (runner.Burst.Tested), never from the effects.
func untested(r *runner.Result, tested int) string {
	var noneRan, noEffect, turned, apart, unanswered, serial, unobserved, unheld int
	heldWhy, heldAt := "", 0
	for _, b := range r.Bursts {
		if b.Tested() {
			continue
		}
		if b.Unobserved {
			unobserved++
		} else if b.Outcomes[runner.Executed] == 0 {
			noneRan++
		} else if b.Twin != nil && b.Twin.Turned {
			turned++
		} else if b.Twin != nil && !b.TookEffect() {
			noEffect++
		} else if b.Hold != nil && b.Hold.Untested {
			if unheld++; unheld == 1 {
				heldWhy, heldAt = b.Hold.Why, b.Index
			}
		} else if b.Serial() {
			serial++
		} else if b.Overlap < 2 {
			apart++
		} else {
			unanswered++
		}
	}
	n := len(r.Bursts)
	if unobserved == n-tested {
		return unjudgedWhy(r, false)
	}
	if noneRan == n {
		return fmt.Sprintf("0 of %d bursts executed anything: %s", n, nothingRan(r))
	}
	if turned == n-tested {
		return turnedWhy(r, turned)
	}
	if unheld == n-tested {
		return fmt.Sprintf("the requests of %d of %d bursts never met at the database proxy's hold point (burst %d: %s)", unheld, n, heldAt, heldWhy)
	}
	if serial == n-tested {
		return serialWhy(r, serial)
	}
	if apart == n-tested {
		return fmt.Sprintf("only %d of %d bursts had two attempts in flight at once (need %.0f%%)",
			tested, n, MinTestedShare*100)
	}
	why := fmt.Sprintf("only %d of %d bursts put the guard to the test (need %.0f%%): %d executed nothing, %d never had two attempts in flight at once, %d had fewer than two answered attempts",
		tested, n, MinTestedShare*100, noneRan, apart, unanswered)
	if noEffect > 0 {
		why += fmt.Sprintf(", %d changed nothing that racetest watches (in a run judged by solo twins)", noEffect)
	}
	if turned > 0 {
		why += fmt.Sprintf(", %d had fewer attempts execute than one at a time, and changed less (the others did not execute together and did alone)", turned)
	}
	if unheld > 0 {
		why += fmt.Sprintf(", %d never met at the database proxy's hold point (%s)", unheld, heldWhy)
	}
	if serial > 0 {
		why += fmt.Sprintf(", %d were answered one request at a time by the server (%s)", serial, serialCause(r))
	}
	if unobserved > 0 {
		why += fmt.Sprintf(", %d were judged by nothing (%s)", unobserved, unjudgedWhy(r, false))
	}
	return why
}

// turnedWhy is the one line of a run judged by solo twins whose untested
// bursts changed less than the same attempts one at a time, with fewer of
// their attempts executed (runner.Twin.Turned): a guard whose answer
// depends on time is correct so, and one that wrongly says no is not.
func turnedWhy(r *runner.Result, turned int) string {
	w := turnedExample(r)
	var others []string
	for _, c := range runner.Classes()[1:] {
		if n := w.Outcomes[c]; n > 0 {
			others = append(others, fmt.Sprintf("%d %s", n, c))
		}
	}
	return fmt.Sprintf("in %d of %d bursts fewer attempts executed together than one at a time (burst %d: %d executed together, %s; %d executed one at a time) and the database changed less: the others did not execute together and did alone — a correct guard whose answer depends on time (a rate limiter, a window) does that, and so do conflicts (deadlocks: --retry N retries them) and a guard that says no when it should not. --effects auto cannot tell which: count what each attempt must do with --effects and say how many may happen with --allowed",
		turned, len(r.Bursts), w.Index, w.Outcomes[runner.Executed], strings.Join(others, ", "), w.Twin.ReferenceExecuted())
}

// turnedExample is the first burst left unjudged because it was turned away.
func turnedExample(r *runner.Result) runner.Burst {
	for _, b := range r.Bursts {
		if b.Twin != nil && b.Twin.Turned {
			return b
		}
	}
	return runner.Burst{}
}

// serialWhy is the one line of a run whose untested bursts were all
// answered one request at a time. Its cause comes from the server probe
// when there was one (runner.ServerProbe): a server that did not answer a
// second request while a first was unfinished has one worker; one that
// did, but answered this endpoint's requests one at a time, serializes
// them itself. That stays INCONCLUSIVE too: a lock in the process is
// exactly the guard that fails with several replicas, and from outside it
// looks the same as a lock in the database, unless the database was
// watched and a session waited on a lock (Burst.LockSerialized): such a
// burst is not serial, and never reaches here.
func serialWhy(r *runner.Result, serial int) string {
	n := len(r.Bursts)
	if r.ServerProbe.Serial() {
		return fmt.Sprintf("the server answers one request at a time (it did not answer a second request while a first was unfinished), so none of %d bursts raced: does it have one worker? racing needs a server that handles requests concurrently",
			n)
	}
	if r.ServerProbe.Concurrent() {
		return fmt.Sprintf("the endpoint's requests were answered one at a time in %d of %d bursts (%s), though the server answered a second request while a first was unfinished: one lock held around the whole request? a lock inside the process holds with one replica only, one in the database with any; a lock in the database shows as a session waiting on it, which racetest watches for when --effects or --invariant reads the service's SQL database, and none was seen (or none was watched)",
			serial, n, serialFigure(r))
	}
	return fmt.Sprintf("the server answered one request at a time in %d of %d bursts (%s): does it have one worker, or one lock held around the whole request? racing needs a server that handles requests concurrently",
		serial, n, serialFigure(r))
}

// serialCause is serialWhy's question in a few words.
func serialCause(r *runner.Result) string {
	switch {
	case r.ServerProbe.Serial():
		return "the probe found one worker"
	case r.ServerProbe.Concurrent():
		return "the server is concurrent: one lock around the whole request?"
	}
	return "one worker, or one lock around the whole request?"
}

// brokenWhy names the invariants a run broke, and how often: "invariant
// X broken after 3 of 30 bursts (at most 2 violations)"; "" when none broke.
func brokenWhy(r *runner.Result) string {
	var parts []string
	for i, name := range r.Invariants {
		n, most := r.BrokenBursts(i)
		if n == 0 {
			continue
		}
		if u := r.UnjudgedBursts(i); u > 0 {
			parts = append(parts, fmt.Sprintf("invariant %s broken after %d of the %d bursts it judged (at most %s; already broken before the other %d, which it could not judge)",
				name, n, len(r.Bursts)-u, plural(most, "violation"), u))
			continue
		}
		parts = append(parts, fmt.Sprintf("invariant %s broken after %d of %d bursts (at most %s)", name, n, len(r.Bursts), plural(most, "violation")))
	}
	return strings.Join(parts, "; ")
}

// serialFigure is the median server parallelism of the bursts served one
// at a time, as the reader can check it.
func serialFigure(r *runner.Result) string {
	var ps []float64
	for _, b := range r.Bursts {
		if b.Serial() {
			ps = append(ps, b.ServerParallelism)
		}
	}
	sort.Float64s(ps)
	return fmt.Sprintf("estimated from the response times: median %.1f requests at once, below %.1f", ps[len(ps)/2], runner.SerialBelow)
}

// nothingRan is the cause of a run in which no burst took effect.
func nothingRan(r *runner.Result) string {
	if r.Diagnosis != "" {
		return r.Diagnosis
	}
	out := r.Outcomes()
	total := 0
	for _, n := range out {
		total += n
	}
	if total > 0 && out[runner.Unknown] == total && r.Timeout > 0 {
		return "every attempt timed out after " + human(r.Timeout)
	}
	if total > 0 && out[runner.Unknown] == total {
		return "every attempt timed out"
	}
	if total > 0 && out[runner.Error]+out[runner.Unknown] == total {
		return fmt.Sprintf("every attempt failed (%s)", strings.TrimPrefix(strings.Join(topErrors(r.Errors, 1), ", "), "error "))
	}
	return outcomes(r)
}

func planned(r *runner.Result) int {
	if r == nil {
		return 0
	}
	return r.Planned
}

// met checks the assessment against the expectation: whether it was met,
// whether it failed only for want of proof (strict on INCONCLUSIVE), and why.
func met(c Case, r *runner.Result, a Assessment) (ok, unproven bool, why string) {
	for _, ch := range r.Checks {
		if !ch.OK && !ch.Inconclusive {
			what := "check failed: "
			if ch.Bug {
				what = "the known bug did not show: "
			}
			return false, false, what + ch.Name + ": " + ch.Detail
		}
	}
	switch c.Expect.Kind {
	case ExpectRace:
		if a.Verdict != Race && twinRun(r) {
			return false, false, fmt.Sprintf("expected RACE, but no burst of %d changed the database more than the same attempts one at a time (%s)", a.Bursts, found(a))
		}
		if a.Verdict != Race {
			return false, false, fmt.Sprintf("expected RACE, but no burst of %d exceeded %s (%s)", a.Bursts, ceiling(r), found(a))
		}
		if why := brokenWhy(r); why != "" {
			return true, false, why
		}
		return true, false, a.Why
	case ExpectLost:
		if a.Verdict != Lost {
			return false, false, fmt.Sprintf("expected LOST, but no burst of %d left fewer than %s while an attempt claimed it done (%s)", a.Bursts, floor(r), found(a))
		}
		return true, false, a.Why
	case ExpectMax, ExpectRange:
		lo, hi := c.Expect.Min, c.Expect.Max
		if c.Expect.Kind == ExpectMax {
			lo = -1 // the run's own floor applies (LOST below)
		}
		e := r.EffectsSummary()
		if e.Max > hi {
			return false, false, fmt.Sprintf("expected at most %s per burst, the worst burst had %d", plural(hi, "effect"), e.Max)
		}
		if lo >= 0 && e.Min < lo {
			return false, false, fmt.Sprintf("expected at least %s per burst, a burst had %d", plural(lo, "effect"), e.Min)
		}
		if lo < 0 && a.Verdict == Lost {
			return false, false, lostWhy(r, a)
		}
	default:
		if twinRun(r) && (a.Verdict == Race || a.Verdict == Lost) {
			if why := brokenWhy(r); why != "" {
				return false, false, "expected SAFE, but " + why
			}
			return false, false, twinUnmet(a)
		}
		switch a.Verdict {
		case Race:
			return false, false, raceWhy(r, a)
		case Lost:
			return false, false, lostWhy(r, a)
		}
	}
	if a.Verdict == Inconclusive && c.Strict {
		return false, true, a.Why
	}
	// An expectation of SAFE asked to be proven is met by SAFE alone.
	if a.Verdict == Inconclusive && c.ProveSafe && expectsSafe(c.Expect) {
		return false, true, a.Why
	}
	return true, false, a.Why
}

// expectsSafe reports whether e is an expectation of SAFE (the default).
func expectsSafe(e Expect) bool {
	return e.Kind == ExpectSafe || e.Kind == ""
}

// overAllowance counts the bursts that left more effects than allowed
// (a burst that only broke an invariant is not among them).
func overAllowance(r *runner.Result) int {
	over := 0
	for _, b := range r.Bursts {
		if b.Effects > b.Allowed {
			over++
		}
	}
	return over
}

// heldWhat is what a SAFE run's tested bursts did not do: leave the
// allowed range, break an invariant, or both.
func heldWhat(r *runner.Result) string {
	if r.Uncounted {
		return "broke an invariant"
	}
	s := "left the allowed range (" + allowance(r) + ")"
	if len(r.Invariants) > 0 {
		s += " or broke an invariant"
	}
	return s
}

// raceWhy says why a RACE fails an expectation of SAFE: the invariants it
// broke, and the bursts over their allowance.
func raceWhy(r *runner.Result, a Assessment) string {
	over := overAllowance(r)
	var parts []string
	if why := brokenWhy(r); why != "" {
		parts = append(parts, why)
	}
	if over > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d bursts left more than %s (worst %d)", over, a.Bursts, ceiling(r), r.EffectsSummary().Max))
	}
	return "expected SAFE, but " + strings.Join(parts, "; ")
}

func lostWhy(r *runner.Result, a Assessment) string {
	return fmt.Sprintf("expected SAFE, but %d of %d bursts left fewer than %s (fewest %d) while an attempt claimed it done",
		a.Violations, a.Bursts, floor(r), r.EffectsSummary().Min)
}

// found names the verdict, and an inconclusive run's reason.
func found(a Assessment) string {
	if a.Why != "" {
		return string(a.Verdict) + ": " + a.Why
	}
	return "found " + string(a.Verdict)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// where names a case and what it ran on: "check-then-write on memory",
// with the server when one was measured. An HTTP case's name is its
// request ("POST http://…/redeem"), so it does not add "on http"; a named
// HTTP case says it went over HTTP.
func where(c Case) string {
	w := placeOf(c)
	if c.Result != nil && c.Result.Server != "" {
		w += " (" + c.Result.Server + ")"
	}
	return w
}

// placeOf is where without the server. A name that says its backend
// already ("redeem on memory", as a suite or a race.Case may name a case)
// does not get it twice.
func placeOf(c Case) string {
	w := displayName(c)
	switch {
	case c.Backend != "http" && namesBackend(w, c.Backend):
	case c.Backend != "http":
		w += " on " + c.Backend
	case !strings.Contains(w, "://"):
		w += " over HTTP"
	}
	return w
}

// namesBackend reports whether name says "on BACKEND" as words of its own.
func namesBackend(name, backend string) bool {
	on := " on " + backend
	for i := strings.Index(name, on); i >= 0; {
		rest := name[i+len(on):]
		if rest == "" || strings.ContainsRune(" ,;:)", rune(rest[0])) {
			return true
		}
		j := strings.Index(rest, on)
		if j < 0 {
			break
		}
		i += len(on) + j
	}
	return false
}
