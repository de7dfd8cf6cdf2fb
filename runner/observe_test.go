package runner

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// observed is a counter whose effects check is read as a change
// (Baseliner), with invariants and, optionally, no effects check at all.
type observed struct {
	*counter
	before     func(s Subject) int
	names      []string
	broken     func(s Subject, after bool) []int
	calls      map[string]int // Broken's calls per subject
	uncounted  bool
	baselineOK bool // Baseline was called with the burst's own subject
}

func (o *observed) Baseline(_ context.Context, s Subject) (int, error) {
	o.baselineOK = s.Key != ""
	return o.before(s), nil
}
func (o *observed) Baselined() bool      { return o.before != nil }
func (o *observed) Invariants() []string { return o.names }
func (o *observed) Broken(_ context.Context, s Subject) ([]int, error) {
	if o.calls == nil {
		o.calls = map[string]int{}
	}
	o.calls[s.Key]++
	return o.broken(s, o.calls[s.Key] > 1), nil
}
func (o *observed) Uncounted() bool { return o.uncounted }

// A Baselined run's effects are the change of the check across the burst:
// a shared count that already held 100 is judged by what each burst added.
func TestBaselineMakesEffectsAChange(t *testing.T) {
	o := &observed{counter: newCounter(), before: func(s Subject) int { return 100 + s.Burst }}
	o.effectsOverride = func(s Subject) int { return 101 + s.Burst } // one more than before
	o.before = func(s Subject) int { return 100 + s.Burst }
	res, err := Run(context.Background(), o, Attempts(2), Bursts(3))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Baselined || !o.baselineOK {
		t.Fatalf("baselined %v (subject passed %v), want the run marked Baselined", res.Baselined, o.baselineOK)
	}
	for _, b := range res.Bursts {
		if b.Effects != 1 || b.Before != 100+b.Index {
			t.Errorf("burst %d: effects %d before %d, want 1 and %d", b.Index, b.Effects, b.Before, 100+b.Index)
		}
	}
	if res.Violations() != 0 || res.Lost() != 0 {
		t.Errorf("violations %d lost %d, want none: each burst added exactly 1", res.Violations(), res.Lost())
	}
	if !slices.ContainsFunc(res.Notes, func(n string) bool {
		return strings.Contains(n, "read 100 to 102 before the bursts: a shared count")
	}) {
		t.Errorf("notes %q do not say the count is shared", res.Notes)
	}

	// The same count before every burst reads as such.
	o.before = func(Subject) int { return 7 }
	res, err = Run(context.Background(), o, Attempts(2), Bursts(2))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "(it read 7 before every burst: a shared count") }) {
		t.Errorf("notes %q do not say the check read 7 before every burst", res.Notes)
	}

	// A check that reads 0 before every burst counts per subject.
	o.before = func(Subject) int { return 0 }
	res, err = Run(context.Background(), o, Attempts(2), Bursts(2))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "read 0 before every burst: a count per subject") }) {
		t.Errorf("notes %q do not say the count is per subject", res.Notes)
	}
	if res.Bursts[0].Effects != 101 {
		t.Errorf("effects %d, want 101 (the change from 0)", res.Bursts[0].Effects)
	}

	// A Baseliner that says it counts by itself is read as it counts
	// (Baseline, nil here, is never called).
	o.before = nil
	res, err = Run(context.Background(), o, Attempts(2), Bursts(2))
	if err != nil {
		t.Fatal(err)
	}
	if res.Baselined || res.Bursts[1].Effects != 102 {
		t.Errorf("baselined %v, effects %d; want false and the count itself, 102", res.Baselined, res.Bursts[1].Effects)
	}
}

// A check that fell across a burst does not count what the attempts did:
// the run stops with a config error that says what to count instead. A
// check that did not move is no error.
func TestBaselineThatFallsIsAnError(t *testing.T) {
	o := &observed{counter: newCounter(), before: func(Subject) int { return 5 }}
	o.effectsOverride = func(Subject) int { return 5 }
	if _, err := Run(context.Background(), o, Attempts(2), Bursts(2)); err != nil {
		t.Fatalf("a check that did not move: %v", err)
	}
	o.effectsOverride = func(Subject) int { return 4 }
	_, err := Run(context.Background(), o, Attempts(2), Bursts(2))
	var ce *ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "fell from 5 to 4") || !strings.Contains(err.Error(), "invariant") {
		t.Errorf("err = %v, want a ConfigError saying the check fell from 5 to 4 and pointing at invariants", err)
	}
}

// A broken invariant makes its burst a violation whatever the effects; the
// notes name each invariant and how often it broke.
func TestInvariantsAreCheckedAfterEachBurst(t *testing.T) {
	o := &observed{counter: newCounter(), before: func(Subject) int { return 0 },
		names: []string{"no account below 0", "one owner"}}
	// Burst 2 leaves 3 rows broken, burst 3 one more; burst 1 finds one
	// broken row from before and leaves it as it was.
	o.broken = func(s Subject, after bool) []int {
		before := map[int]int{1: 1, 3: 3}[s.Burst]
		if !after {
			return []int{before, 0}
		}
		return []int{before + map[int]int{2: 3, 3: 1}[s.Burst], 0}
	}
	o.effectsOverride = func(Subject) int { return 1 }
	res, err := Run(context.Background(), o, Attempts(2), Bursts(4))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Invariants, o.names) {
		t.Errorf("invariants %q, want %q", res.Invariants, o.names)
	}
	if res.Violations() != 2 || !res.Bursts[2].Violated() || res.Bursts[1].Violated() {
		t.Errorf("violations %d, want bursts 2 and 3 only", res.Violations())
	}
	if n, most := res.BrokenBursts(0); n != 2 || most != 3 {
		t.Errorf("invariant 0 broken in %d bursts (most %d), want 2 (most 3)", n, most)
	}
	if n, most := res.BrokenBursts(1); n != 0 || most != 0 {
		t.Errorf("invariant 1 broken in %d bursts (most %d), want none", n, most)
	}
	if n, _ := res.BrokenBursts(2); n != 0 {
		t.Errorf("an invariant the run did not have broke %d times", n)
	}
	if res.Example == nil || res.Example.Burst != 2 {
		t.Errorf("example burst %v, want 2: the first to break an invariant", res.Example)
	}
	// Burst 1 found it broken and left it so: not judged by it. Burst 3
	// found it broken and added one: judged, and broke it.
	if !slices.Equal(res.Bursts[1].Unjudged, []bool{true, false}) || res.Bursts[3].Unjudged != nil || res.Bursts[1].Unobserved {
		t.Errorf("unjudged %v and %v, unobserved %v: want burst 1 alone unjudged by the first invariant, and observed by its effects",
			res.Bursts[1].Unjudged, res.Bursts[3].Unjudged, res.Bursts[1].Unobserved)
	}
	for _, want := range []string{"invariant no account below 0: already broken before 1 of 4 bursts, which it did not judge; broken after 2 of the 3 it judged (at most 3 violations)", "invariant one owner: held after every burst (4)"} {
		if !slices.Contains(res.Notes, want) {
			t.Errorf("notes %q lack %q", res.Notes, want)
		}
	}

	o.calls = nil
	o.broken = func(s Subject, after bool) []int {
		if after {
			return []int{0}
		}
		return []int{0, 0}
	}
	if _, err := Run(context.Background(), o, Attempts(2), Bursts(1)); err == nil || !strings.Contains(err.Error(), "check invariants: 1 counts for 2 invariants") {
		t.Errorf("err = %v, want one count per invariant", err)
	}
	o.calls = nil
	o.broken = func(Subject, bool) []int { return []int{0} }
	if _, err := Run(context.Background(), o, Attempts(2), Bursts(1)); err == nil || !strings.Contains(err.Error(), "before the burst: 1 counts for 2 invariants") {
		t.Errorf("err = %v, want one count per invariant before the burst too", err)
	}

	// Data broken before the run leaves the bursts it was broken before
	// unjudged by it, and the note says how many.
	o.calls = nil
	o.broken = func(s Subject, _ bool) []int { return []int{2 * btoi(s.Burst == 0), 0} } // the first burst's, repaired before the second
	res, err = Run(context.Background(), o, Attempts(2), Bursts(3))
	if err != nil {
		t.Fatal(err)
	}
	if res.Violations() != 0 || !slices.Contains(res.Notes, "invariant no account below 0: already broken before 1 of 3 bursts, which it did not judge; held after every burst it judged (2)") {
		t.Errorf("violations %d, notes %q", res.Violations(), res.Notes)
	}
	if slices.ContainsFunc(res.Notes, func(n string) bool { return strings.HasPrefix(n, "invariant one owner: already") }) {
		t.Errorf("an invariant that held is said to be broken before the run: %q", res.Notes)
	}
}

// scopedObserved is an observed target whose invariants say which are
// scoped to the burst's subject.
type scopedObserved struct {
	*observed
	scoped []bool
}

func (o *scopedObserved) ScopedInvariants() []bool { return o.scoped }

// A boolean invariant reads 1 once false and stays 1: a burst that starts
// with it broken cannot show whether it held, so it is not judged by it
// (issue 42, item 8). In a run judged by invariants alone such a burst is
// judged by nothing: not tested, and left out of the rate.
func TestInvariantBrokenBeforeJudgesNothing(t *testing.T) {
	// A naive transfer on a clean table: the first burst overdraws, and
	// every later one finds the boolean false already.
	o := &observed{counter: newCounter(), uncounted: true, names: []string{"bool_and(balance >= 0)"}}
	o.broken = func(s Subject, after bool) []int { return []int{btoi(after || s.Burst > 0)} }
	res, err := Run(context.Background(), o, Attempts(2), Bursts(4))
	if err != nil {
		t.Fatal(err)
	}
	if res.Violations() != 1 || !res.Bursts[0].Violated() || res.Judged() != 1 {
		t.Errorf("violations %d (burst 0: %v), judged %d: want burst 0 alone judged, and broken", res.Violations(), res.Bursts[0].Violated(), res.Judged())
	}
	for _, b := range res.Bursts[1:] {
		if !slices.Equal(b.Unjudged, []bool{true}) || !b.Unobserved || b.Tested() {
			t.Errorf("burst %d: unjudged %v unobserved %v tested %v: want judged by nothing, untested", b.Index, b.Unjudged, b.Unobserved, b.Tested())
		}
	}
	if res.Bursts[0].Unobserved || res.Bursts[0].Unjudged != nil {
		t.Errorf("burst 0 unobserved %v unjudged %v: it held before, so its invariant judged it", res.Bursts[0].Unobserved, res.Bursts[0].Unjudged)
	}
	want := "invariant bool_and(balance >= 0): already broken before 3 of 4 bursts, which it did not judge; broken after 1 of the 1 it judged (at most 1 violations)"
	if !slices.Contains(res.Notes, want) {
		t.Errorf("notes %q lack %q", res.Notes, want)
	}

	// An old overdraft: false before every burst; no burst is judged.
	o.calls = nil
	o.broken = func(Subject, bool) []int { return []int{1} }
	res, err = Run(context.Background(), o, Attempts(2), Bursts(3))
	if err != nil {
		t.Fatal(err)
	}
	if res.Judged() != 0 || res.Tested() != 0 || res.Violations() != 0 {
		t.Errorf("judged %d tested %d violations %d: want none", res.Judged(), res.Tested(), res.Violations())
	}
	want = "invariant bool_and(balance >= 0): already broken before every burst (3), so it judged none: fix the data, or scope it to the burst's subject ({{.Token}} in a script)"
	if !slices.Contains(res.Notes, want) {
		t.Errorf("notes %q lack %q", res.Notes, want)
	}

	// Scoped to the subject, it judges every burst by what it adds.
	o.calls = nil
	so := &scopedObserved{observed: o, scoped: []bool{true}}
	res, err = Run(context.Background(), so, Attempts(2), Bursts(3))
	if err != nil {
		t.Fatal(err)
	}
	if res.Judged() != 3 || res.UnjudgedBursts(0) != 0 {
		t.Errorf("scoped: judged %d, unjudged %d: want every burst judged", res.Judged(), res.UnjudgedBursts(0))
	}

	// With an effects check, the effects still judge the burst.
	o.calls, o.uncounted = nil, false
	o.before = func(Subject) int { return 0 }
	o.effectsOverride = func(Subject) int { return 1 }
	res, err = Run(context.Background(), o, Attempts(2), Bursts(3))
	if err != nil {
		t.Fatal(err)
	}
	if res.UnjudgedBursts(0) != 3 || res.Judged() != 3 {
		t.Errorf("counted: unjudged %d judged %d: want 3 and 3: the effects judged them", res.UnjudgedBursts(0), res.Judged())
	}
}

// An Uncounted target is judged by its invariants alone: its effects are
// never read, and nothing is allowed or required of them.
func TestUncountedTargetCountsNothing(t *testing.T) {
	o := &observed{counter: newCounter(), uncounted: true, names: []string{"inv"},
		broken: func(Subject, bool) []int { return []int{0} }}
	o.before = func(Subject) int { t.Error("Baseline called on an Uncounted target"); return 0 }
	o.effectsOverride = func(Subject) int { t.Error("Effects called on an Uncounted target"); return 7 }
	res, err := Run(context.Background(), o, Attempts(2), Bursts(2), Allowed(3), Required(2))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Uncounted || res.Baselined {
		t.Errorf("uncounted %v baselined %v, want true and false", res.Uncounted, res.Baselined)
	}
	for _, b := range res.Bursts {
		if b.Effects != 0 || b.Allowed != 0 || b.Required != 0 || b.Lost() {
			t.Errorf("burst %d: effects %d allowed %d required %d", b.Index, b.Effects, b.Allowed, b.Required)
		}
	}
	if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.HasPrefix(n, "effects: none counted") }) {
		t.Errorf("notes %q do not say no effects were counted", res.Notes)
	}
}

// Under accounting, each burst allows and requires exactly its successes:
// fewer effects is LOST, more is RACE, whatever the run's Allowed.
func TestAccountingAllowsTheSuccesses(t *testing.T) {
	c := newCounter()
	c.attempt = func(_ context.Context, s Subject, w *Worker) Outcome {
		if w.ID == 0 {
			return Refused(nil)
		}
		return Done()
	}
	c.effectsOverride = func(s Subject) int { return []int{2, 1, 3}[s.Burst] } // 2 successes per burst
	res, err := Run(context.Background(), c, Attempts(3), Bursts(3), Allowed(5), Required(0), Accounting(true))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Accounting {
		t.Error("result does not say it was judged by accounting")
	}
	for _, b := range res.Bursts {
		if b.Allowed != 2 || b.Required != 2 {
			t.Errorf("burst %d: allowed %d required %d, want 2 and 2 (its successes)", b.Index, b.Allowed, b.Required)
		}
	}
	if res.Bursts[0].Violated() || res.Bursts[0].Lost() || !res.Bursts[1].Lost() || !res.Bursts[2].Violated() {
		t.Errorf("bursts judged %v/%v, %v/%v, %v/%v; want ok, lost, race",
			res.Bursts[0].Violated(), res.Bursts[0].Lost(), res.Bursts[1].Violated(), res.Bursts[1].Lost(), res.Bursts[2].Violated(), res.Bursts[2].Lost())
	}
	if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.HasPrefix(n, "accounting: ") }) {
		t.Errorf("notes %q do not say the run was judged by accounting", res.Notes)
	}
}

func TestBrokeInvariant(t *testing.T) {
	if (Burst{Broken: []int{0, 0}}).BrokeInvariant() || (Burst{}).BrokeInvariant() {
		t.Error("invariants that held read as broken")
	}
	if !(Burst{Broken: []int{0, 1}}).BrokeInvariant() {
		t.Error("one violation did not break the invariant")
	}
	if !(Burst{Effects: 0, Allowed: 1, Broken: []int{1}}).Violated() {
		t.Error("a broken invariant within the allowance is not a violation")
	}
	if (Burst{Effects: 1, Allowed: 1, Broken: []int{0}}).Violated() {
		t.Error("a burst at its allowance with its invariant held is a violation")
	}
}

// A Baselined check that never moved while attempts reported success is
// stuck; one that moved once, or a run that allows no effect (counting an
// anomaly), or a run whose attempts never executed, is not.
func TestStuck(t *testing.T) {
	exec := [NumClasses]int{Executed: 1, Declined: 1}
	none := [NumClasses]int{Declined: 2}
	for _, tc := range []struct {
		name string
		r    Result
		want bool
	}{
		{"never moved", Result{Baselined: true, Bursts: []Burst{{Allowed: 1, Outcomes: exec}, {Allowed: 1, Outcomes: exec}}}, true},
		{"not baselined", Result{Bursts: []Burst{{Allowed: 1, Outcomes: exec}}}, false},
		{"moved once", Result{Baselined: true, Bursts: []Burst{{Allowed: 1, Outcomes: exec}, {Effects: 1, Allowed: 1, Outcomes: exec}}}, false},
		{"moved first", Result{Baselined: true, Bursts: []Burst{{Effects: 1, Allowed: 1, Outcomes: exec}, {Allowed: 1, Outcomes: exec}}}, false},
		{"counts an anomaly", Result{Baselined: true, Bursts: []Burst{{Allowed: 0, Outcomes: exec}}}, false},
		{"nothing executed", Result{Baselined: true, Bursts: []Burst{{Allowed: 1, Outcomes: none}}}, false},
		{"one claim is enough", Result{Baselined: true, Bursts: []Burst{{Allowed: 1, Outcomes: none}, {Allowed: 1, Outcomes: exec}}}, true},
	} {
		if got := tc.r.Stuck(); got != tc.want {
			t.Errorf("%s: stuck = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// --allowed reads the same on every command: N, MIN-MAX, successes.
func TestParseAllowance(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Allowance
	}{
		{"1", Allowance{Min: 1, Max: 1}},
		{"0", Allowance{}},
		{"0-1", Allowance{Min: 0, Max: 1}},
		{" 2 - 3 ", Allowance{Min: 2, Max: 3}},
		{"3-3", Allowance{Min: 3, Max: 3}},
		{"successes", Allowance{Successes: true}},
		{"Successes", Allowance{Successes: true}},
	} {
		got, err := ParseAllowance(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseAllowance(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "-1", "2-1", "x", "1-", "-", "1-x", "success"} {
		if _, err := ParseAllowance(bad); err == nil || !strings.Contains(err.Error(), "write N") {
			t.Errorf("ParseAllowance(%q): err = %v, want one that says how to write it", bad, err)
		}
	}
	for _, a := range []Allowance{{Min: 1, Max: 1}, {Min: 0, Max: 2}, {Successes: true}, {}} {
		back, err := ParseAllowance(a.String())
		if err != nil || back != a {
			t.Errorf("%+v wrote %q, read back as %+v (%v)", a, a.String(), back, err)
		}
	}
	c := NewConfig(Allowance{Min: 0, Max: 2}.Options()...)
	if c.Allowed != 2 || c.Required != 0 || c.Accounting {
		t.Errorf("0-2 set allowed %d required %d accounting %v", c.Allowed, c.Required, c.Accounting)
	}
	c = NewConfig(Allowance{Successes: true}.Options()...)
	if !c.Accounting {
		t.Error("successes did not turn accounting on")
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
