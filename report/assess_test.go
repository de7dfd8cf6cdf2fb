package report

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/runner"
)

// The tests in this file are the verdicts a user reads for runs they can
// produce, each on bursts that differ from one another: a verdict computed
// from the wrong burst, the wrong count or the wrong side of a boundary
// reads differently here (see scripts/mutation.sh).

// b is one burst of a run of 4 attempts: effects in the store, the overlap
// measured, and the attempts' outcomes (executed, declined).
type b struct{ effects, overlap, executed, declined int }

func run(bs ...b) *runner.Result {
	r := &runner.Result{Attempts: 4, Allowed: 1, Required: 1, Planned: len(bs), Errors: map[string]int{}}
	for i, x := range bs {
		var o [runner.NumClasses]int
		o[runner.Executed], o[runner.Declined] = x.executed, x.declined
		o[runner.Error] = 4 - x.executed - x.declined
		r.Bursts = append(r.Bursts, runner.Burst{Index: i, Effects: x.effects, Allowed: 1, Required: 1, Outcomes: o, Overlap: x.overlap})
	}
	return r
}

var (
	held  = b{1, 4, 1, 3} // one executed, three declined, all four in flight together
	twice = b{2, 4, 2, 2} // two got through
	apart = b{1, 1, 1, 3} // held, but the attempts never overlapped: proves nothing
)

// One racing burst among many is a RACE: a single double payment is one too
// many, and the rate is over every burst run.
func TestOneRacingBurstIsARace(t *testing.T) {
	r := run(held, held, twice, apart)
	a := Assess(Case{Result: r})
	if a.Verdict != Race || a.Violations != 1 || a.Met {
		t.Fatalf("one burst of 4 twice: %s, %d violations, met %v; want RACE, 1, unmet", a.Verdict, a.Violations, a.Met)
	}
	if a.Rate != 0.25 || a.Upper != UpperBound(1, 4) {
		t.Errorf("rate %v upper %v, want 1/4 over all 4 bursts (upper %v)", a.Rate, a.Upper, UpperBound(1, 4))
	}
	if want := "expected SAFE, but 1 of 4 bursts left more than 1 effect (worst 2)"; a.Why != want {
		t.Errorf("why %q, want %q", a.Why, want)
	}
	if a := Assess(Case{Expect: Expect{Kind: ExpectRace}, Result: run(held, held, twice, apart)}); !a.Met {
		t.Errorf("expect race on one racing burst: unmet (%s)", a.Why)
	}
}

// A lost burst among many is LOST, with its rate over every burst.
func TestOneLostBurstIsLost(t *testing.T) {
	r := run(held, b{0, 4, 0, 4}, held, held, held)
	a := Assess(Case{Result: r})
	if a.Verdict != Lost || a.Violations != 1 || a.Rate != 0.2 || a.Upper != UpperBound(1, 5) {
		t.Fatalf("one burst of 5 lost: %+v", a)
	}
	if want := "expected SAFE, but 1 of 5 bursts left fewer than 1 effect (fewest 0) while an attempt claimed it done"; a.Why != want {
		t.Errorf("why %q, want %q", a.Why, want)
	}
}

// SAFE needs at least half the bursts to have tested the guard: exactly
// half is enough, one fewer is not; the bound is over the tested bursts.
func TestHalfTheBurstsTestedIsTheBoundary(t *testing.T) {
	a := Assess(Case{Result: run(held, apart, held, apart)})
	if a.Verdict != Safe || a.Tested != 2 || a.Upper != UpperBound(0, 2) || !a.Met {
		t.Errorf("2 of 4 tested: %s tested %d upper %v met %v; want SAFE over the 2 tested (upper %v)",
			a.Verdict, a.Tested, a.Upper, a.Met, UpperBound(0, 2))
	}
	a = Assess(Case{Result: run(held, apart, apart, apart)})
	if a.Verdict != Inconclusive || a.Tested != 1 || a.Upper != UpperBound(0, 1) {
		t.Errorf("1 of 4 tested: %s tested %d upper %v; want INCONCLUSIVE", a.Verdict, a.Tested, a.Upper)
	}
	if want := "only 1 of 4 bursts had two attempts in flight at once (need 50%)"; a.Why != want {
		t.Errorf("why %q, want %q", a.Why, want)
	}
	if !a.Met {
		t.Errorf("INCONCLUSIVE without --strict meets expect safe (%s)", a.Why)
	}
	if a := Assess(Case{Strict: true, Result: run(held, apart, apart, apart)}); a.Met || !a.Unproven || a.Why == "" {
		t.Errorf("INCONCLUSIVE under --strict: met %v unproven %v why %q; want unmet for want of proof", a.Met, a.Unproven, a.Why)
	}
}

// When bursts fell short for several reasons, the reason names each count.
func TestInconclusiveSaysWhyEachBurstFellShort(t *testing.T) {
	noEffect := b{0, 4, 0, 0}
	unanswered := b{1, 4, 1, 0}
	a := Assess(Case{Result: run(held, noEffect, apart, unanswered, noEffect)})
	want := "only 1 of 5 bursts put the guard to the test (need 50%): 2 executed nothing, 1 never had two attempts in flight at once, 1 had fewer than two answered attempts"
	if a.Verdict != Inconclusive || a.Why != want {
		t.Errorf("got %s %q\nwant INCONCLUSIVE %q", a.Verdict, a.Why, want)
	}
}

// Two attempts in flight at once are enough overlap: a burst that had
// them but fewer than two answered attempts fell short for want of
// answers, not of overlap.
func TestTwoInFlightIsEnoughOverlap(t *testing.T) {
	twoInFlightOneAnswer := b{1, 2, 1, 0}
	a := Assess(Case{Result: run(held, twoInFlightOneAnswer, twoInFlightOneAnswer)})
	want := "only 1 of 3 bursts put the guard to the test (need 50%): 0 executed nothing, 0 never had two attempts in flight at once, 2 had fewer than two answered attempts"
	if a.Verdict != Inconclusive || a.Why != want {
		t.Errorf("got %s %q\nwant INCONCLUSIVE %q", a.Verdict, a.Why, want)
	}
}

// When nothing took effect in any burst, the reason is what happened to the
// attempts.
func TestNothingTookEffectSaysWhatHappened(t *testing.T) {
	outcomes := func(o [runner.NumClasses]int, timeout time.Duration, errs map[string]int) *runner.Result {
		r := &runner.Result{Attempts: 4, Allowed: 1, Required: 1, Timeout: timeout, Errors: errs}
		for i := range 3 {
			r.Bursts = append(r.Bursts, runner.Burst{Index: i, Allowed: 1, Required: 0, Outcomes: o, Overlap: 4})
		}
		return r
	}
	for _, tc := range []struct {
		name string
		r    *runner.Result
		want string
	}{
		{"timed out", outcomes([runner.NumClasses]int{runner.Unknown: 4}, 300*time.Microsecond, nil),
			"0 of 3 bursts executed anything: every attempt timed out after 300µs"},
		{"timed out, no timeout known", outcomes([runner.NumClasses]int{runner.Unknown: 4}, 0, nil),
			"0 of 3 bursts executed anything: every attempt timed out"},
		{"failed", outcomes([runner.NumClasses]int{runner.Error: 3, runner.Unknown: 1}, time.Second, map[string]int{"connection refused": 9, "reset": 3}),
			"0 of 3 bursts executed anything: every attempt failed (×9: connection refused, … and 1 more kinds of error)"},
		// A result with no attempt recorded (a JSON report trimmed by hand,
		// read back) never claims that its attempts timed out.
		{"no attempt recorded", outcomes([runner.NumClasses]int{}, time.Second, nil),
			"0 of 3 bursts executed anything: attempts (as the workers saw them): executed 0, declined 0"},
		{"declined", outcomes([runner.NumClasses]int{runner.Declined: 3, runner.Error: 1}, time.Second, map[string]int{"x": 3}),
			"0 of 3 bursts executed anything: attempts (as the workers saw them): executed 0, declined 9, error 3"},
	} {
		a := Assess(Case{Result: tc.r})
		if a.Verdict != Inconclusive || a.Why != tc.want {
			t.Errorf("%s: got %s %q\nwant INCONCLUSIVE %q", tc.name, a.Verdict, a.Why, tc.want)
		}
	}
}

// One attempt per burst can never race, however many bursts ran.
func TestOneAttemptIsInconclusive(t *testing.T) {
	r := run(held, held, held)
	r.Attempts = 1
	if a := Assess(Case{Result: r}); a.Verdict != Inconclusive || !strings.Contains(a.Why, "one attempt per burst can never race") {
		t.Errorf("one attempt: %s %q", a.Verdict, a.Why)
	}
	r.Attempts = 2
	if a := Assess(Case{Result: r}); a.Verdict != Safe {
		t.Errorf("two attempts, all bursts tested: %s %q, want SAFE", a.Verdict, a.Why)
	}
}

// A run that could not start, or finished no burst, claims nothing.
func TestNoBurstIsAnError(t *testing.T) {
	a := Assess(Case{Result: &runner.Result{Attempts: 4, Planned: 10}})
	if a.Verdict != Errored || a.Met || a.Why != "no burst completed" {
		t.Errorf("0 bursts: %s met %v %q, want ERROR, unmet, \"no burst completed\"", a.Verdict, a.Met, a.Why)
	}
	a = Assess(Case{Err: errors.New("mysql: cannot connect to 127.0.0.1:3306")})
	if a.Verdict != Errored || a.Met || a.Why != "mysql: cannot connect to 127.0.0.1:3306" {
		t.Errorf("setup error: %s met %v %q", a.Verdict, a.Met, a.Why)
	}
}

// A run cut short by Ctrl-C reports the bursts it finished and meets no
// expectation, whatever they showed.
func TestInterruptedMeetsNothing(t *testing.T) {
	r := run(held, held, held)
	r.Planned, r.Interrupted = 10, true
	a := Assess(Case{Result: r})
	if !a.Interrupted || a.Met || a.Unproven || a.Why != "interrupted after 3 bursts of 10 planned bursts" || a.Bursts != 3 {
		t.Errorf("interrupted: %+v", a)
	}
	a = Assess(Case{Result: run(held), Err: fmt.Errorf("burst 1: %w", context.Canceled)})
	if !a.Interrupted || a.Met || a.Verdict == Errored || a.Why != "interrupted after 1 burst of 1 planned burst" {
		t.Errorf("cancelled: %+v", a)
	}
}

// max=N is about the worst burst, not the typical one; range=MIN-MAX also
// about the fewest.
func TestMaxAndRangeLookAtTheExtremes(t *testing.T) {
	// Effects 1, 1, 3, 1: the median burst is fine, the worst is not.
	r := func() *runner.Result {
		x := run(held, held, b{3, 4, 3, 1}, held)
		x.Allowed = 3
		for i := range x.Bursts {
			x.Bursts[i].Allowed = 3
		}
		return x
	}
	a := Assess(Case{Expect: Expect{Kind: ExpectMax, Max: 2}, Result: r()})
	if a.Met || a.Why != "expected at most 2 effects per burst, the worst burst had 3" {
		t.Errorf("max=2, worst 3: met %v %q", a.Met, a.Why)
	}
	if a := Assess(Case{Expect: Expect{Kind: ExpectMax, Max: 3}, Result: r()}); !a.Met {
		t.Errorf("max=3, worst 3: unmet (%s)", a.Why)
	}
	// Effects 2, 1, 2: one burst under the range's floor.
	rr := run(b{2, 4, 2, 2}, held, b{2, 4, 2, 2})
	a = Assess(Case{Expect: Expect{Kind: ExpectRange, Min: 2, Max: 3}, Result: rr})
	if a.Met || a.Why != "expected at least 2 effects per burst, a burst had 1" {
		t.Errorf("range=2-3, fewest 1: met %v %q", a.Met, a.Why)
	}
	if a := Assess(Case{Expect: Expect{Kind: ExpectRange, Min: 1, Max: 2}, Result: run(b{2, 4, 2, 2}, held, b{2, 4, 2, 2})}); !a.Met {
		t.Errorf("range=1-2 on 2, 1, 2: unmet (%s)", a.Why)
	}
}

// expect race is met by RACE only: a run that proved nothing shows no race.
func TestExpectRaceNeedsARace(t *testing.T) {
	a := Assess(Case{Expect: Expect{Kind: ExpectRace}, Result: run(held, apart, apart)})
	if a.Verdict != Inconclusive || a.Met || a.Unproven {
		t.Fatalf("expect race on INCONCLUSIVE: %s met %v unproven %v", a.Verdict, a.Met, a.Unproven)
	}
	want := "expected RACE, but no burst of 3 exceeded 1 effect (INCONCLUSIVE: only 1 of 3 bursts had two attempts in flight at once (need 50%))"
	if a.Why != want {
		t.Errorf("why %q\nwant %q", a.Why, want)
	}
	a = Assess(Case{Expect: Expect{Kind: ExpectRace}, Result: run(held, held)})
	if a.Met || a.Why != "expected RACE, but no burst of 2 exceeded 1 effect (found SAFE)" {
		t.Errorf("expect race on SAFE: met %v %q", a.Met, a.Why)
	}
}

// prove: a SAFE run must bound the rate below what was asked; a run whose
// tested bursts are too few to is INCONCLUSIVE, and says what it proved.
func TestProveNeedsEnoughTestedBursts(t *testing.T) {
	bs := make([]b, 0, 60)
	for range 59 {
		bs = append(bs, held)
	}
	bs = append(bs, apart)
	upper := UpperBound(0, 59) // about 4.95%
	a := Assess(Case{Prove: 0.05, Result: run(bs...)})
	if a.Verdict != Safe || a.Upper != upper {
		t.Errorf("prove 5%% with 59 tested (≤%.4f): %s %q", upper, a.Verdict, a.Why)
	}
	a = Assess(Case{Prove: 0.04, Result: run(bs...)})
	want := "asked to prove a violation rate ≤4.0% at 95%, but only 59 of 60 bursts were tested, which proves ≤5.0%"
	if a.Verdict != Inconclusive || a.Why != want {
		t.Errorf("prove 4%%: %s %q\nwant INCONCLUSIVE %q", a.Verdict, a.Why, want)
	}
	if a := Assess(Case{Prove: upper, Result: run(bs...)}); a.Verdict != Safe {
		t.Errorf("a bound exactly at the asked rate proves it: %s %q", a.Verdict, a.Why)
	}
}

// A failed check fails the expectation, whatever the counts showed; a
// passing one changes nothing.
func TestFailedCheckFailsTheRun(t *testing.T) {
	r := run(held, held)
	r.Checks = []runner.Check{{Name: "lease liveness", OK: true}, {Name: "fencing", OK: false, Detail: "a late write landed"}}
	a := Assess(Case{Result: r})
	if a.Verdict != Safe || a.Met || a.Why != "check failed: fencing: a late write landed" {
		t.Errorf("failed check: %s met %v %q", a.Verdict, a.Met, a.Why)
	}
	r.Checks = r.Checks[:1]
	if a := Assess(Case{Result: r}); !a.Met {
		t.Errorf("passing check: unmet (%s)", a.Why)
	}
}

// The bound a SAFE verdict prints is the one-sided 95% Clopper-Pearson
// bound: 0 of 299 proves ≤1%, and 1 in 10 is bounded at 39.4%.
func TestUpperBoundFigures(t *testing.T) {
	for _, tc := range []struct {
		k, n int
		want float64
	}{
		{0, 299, 0.00997}, {0, 1, 0.95}, {1, 10, 0.3942}, {5, 10, 0.7775}, {10, 10, 1}, {0, 0, 1}, {3, 2, 1},
	} {
		if got := UpperBound(tc.k, tc.n); math.Abs(got-tc.want) > 0.0005 {
			t.Errorf("UpperBound(%d, %d) = %.5f, want %.4f", tc.k, tc.n, got, tc.want)
		}
	}
	for bound, want := range map[float64]int{0.01: 299, 0.05: 59, 0.5: 5, 0: 0, 1: 0} {
		if got := BurstsFor(bound); got != want {
			t.Errorf("BurstsFor(%v) = %d, want %d", bound, got, want)
		}
	}
}

// max=1 is the tightest expectation a user can write, and a valid one.
func TestMaxOneIsAnExpectation(t *testing.T) {
	if e, err := ParseExpect("max=1"); err != nil || e != (Expect{Kind: ExpectMax, Max: 1}) {
		t.Errorf("max=1: %+v, %v", e, err)
	}
	if _, err := ParseExpect("max=0"); err == nil || !strings.Contains(err.Error(), "at least 1") {
		t.Errorf("max=0: %v, want a refusal saying at least 1", err)
	}
}
