package report

import (
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/runner"
)

// bursts builds a run of n identical bursts of 8 attempts: effects counted
// in the store, the outcomes the attempts saw, and their overlap.
func bursts(n, effects, overlap int, outcomes [runner.NumClasses]int) *runner.Result {
	r := &runner.Result{Attempts: 8, Allowed: 1, Required: 1, Planned: n, Timeout: time.Microsecond, Errors: map[string]int{}}
	for i := range n {
		r.Bursts = append(r.Bursts, runner.Burst{Index: i, Effects: effects, Allowed: 1, Required: 1, Outcomes: outcomes, Overlap: overlap})
	}
	return r
}

var (
	// Every attempt timed out: nothing was tested (issue 10 §1).
	timedOut = func() *runner.Result { return bursts(50, 0, 8, [runner.NumClasses]int{0, 0, 0, 0, 8}) }
	// One executed, seven declined "already done": the guard held.
	heldOnce = func() *runner.Result { return bursts(50, 1, 8, [runner.NumClasses]int{1, 7, 0, 0, 0}) }
	// Every attempt told "already paid", and nothing was paid (§2).
	neverPaid = func() *runner.Result { return bursts(50, 0, 8, [runner.NumClasses]int{0, 8, 0, 0, 0}) }
	// Four got through.
	doubled = func() *runner.Result { return bursts(50, 4, 8, [runner.NumClasses]int{4, 4, 0, 0, 0}) }
)

func TestNothingExecutedIsNeverSafe(t *testing.T) {
	a := Assess(Case{Expect: Expect{Kind: ExpectSafe}, Strict: true, Result: timedOut()})
	if a.Verdict != Inconclusive {
		t.Fatalf("0 attempts executed, every one timed out: verdict %s, want INCONCLUSIVE", a.Verdict)
	}
	if want := "0 of 50 bursts executed anything: every attempt timed out after 1µs"; a.Why != want {
		t.Errorf("why = %q, want %q", a.Why, want)
	}
	if a.Met || !a.Unproven {
		t.Errorf("--strict on nothing executed: met %v unproven %v, want unmet for want of proof", a.Met, a.Unproven)
	}
	// One executed attempt in a burst of timeouts tested nothing either.
	r := bursts(50, 1, 8, [runner.NumClasses]int{1, 0, 0, 0, 7})
	if a := Assess(Case{Result: r}); a.Verdict != Inconclusive || a.Tested != 0 {
		t.Errorf("one answer, seven timeouts: %s with %d tested bursts, want INCONCLUSIVE with 0", a.Verdict, a.Tested)
	}
	// A target's own diagnosis is the reason when it has one.
	r = bursts(4, 0, 8, [runner.NumClasses]int{0, 0, 0, 8, 0})
	r.Diagnosis = "no request succeeded: 404 ×32 — is the URL right? does each burst need --setup?"
	if a := Assess(Case{Result: r}); a.Verdict != Inconclusive || a.Why != "0 of 4 bursts executed anything: "+r.Diagnosis {
		t.Errorf("diagnosed: %s %q", a.Verdict, a.Why)
	}
}

func TestTooFewIsLost(t *testing.T) {
	a := Assess(Case{Expect: Expect{Kind: ExpectSafe}, Result: neverPaid()})
	if a.Verdict != Lost || a.Met || a.Unproven || a.Violations != 50 {
		t.Fatalf("0 payments, 8 told already paid: %+v, want LOST in 50 bursts, unmet", a)
	}
	if !strings.Contains(a.Why, "fewer than 1 effect") {
		t.Errorf("why = %q", a.Why)
	}
	if a := Assess(Case{Expect: Expect{Kind: ExpectLost}, Result: neverPaid()}); !a.Met {
		t.Errorf("expect lost on a LOST run: unmet (%s)", a.Why)
	}
	// A floor of 0 (a scenario where no effect is correct) loses nothing.
	r := neverPaid()
	r.Required = 0
	for i := range r.Bursts {
		r.Bursts[i].Required = 0
	}
	if a := Assess(Case{Result: r}); a.Verdict == Lost {
		t.Errorf("floor 0: %s", a.Verdict)
	}
}

// TestVerdictByExpectation is every verdict × expectation × strict: whether
// the expectation is met, and whether a failure is for want of proof.
func TestVerdictByExpectation(t *testing.T) {
	type want struct{ met, unproven bool }
	runs := map[Verdict]func() *runner.Result{Safe: heldOnce, Race: doubled, Lost: neverPaid, Inconclusive: timedOut}
	exps := map[string]Expect{
		"safe": {Kind: ExpectSafe}, "race": {Kind: ExpectRace}, "lost": {Kind: ExpectLost},
		"max=4": {Kind: ExpectMax, Max: 4}, "max=1": {Kind: ExpectMax, Max: 1}, "range=0-1": {Kind: ExpectRange, Min: 0, Max: 1},
	}
	met, unmet, unproven := want{true, false}, want{false, false}, want{false, true}
	table := map[Verdict]map[string][2]want{ // [not strict, strict]
		Safe:         {"safe": {met, met}, "race": {unmet, unmet}, "lost": {unmet, unmet}, "max=4": {met, met}, "max=1": {met, met}, "range=0-1": {met, met}},
		Race:         {"safe": {unmet, unmet}, "race": {met, met}, "lost": {unmet, unmet}, "max=4": {met, met}, "max=1": {unmet, unmet}, "range=0-1": {unmet, unmet}},
		Lost:         {"safe": {unmet, unmet}, "race": {unmet, unmet}, "lost": {met, met}, "max=4": {unmet, unmet}, "max=1": {unmet, unmet}, "range=0-1": {met, met}},
		Inconclusive: {"safe": {met, unproven}, "race": {unmet, unmet}, "lost": {unmet, unmet}, "max=4": {met, unproven}, "max=1": {met, unproven}, "range=0-1": {met, unproven}},
	}
	for v, row := range table {
		for name, w := range row {
			for i, strict := range []bool{false, true} {
				a := Assess(Case{Expect: exps[name], Strict: strict, Result: runs[v]()})
				if a.Verdict != v {
					t.Fatalf("fixture for %s assessed %s (%s)", v, a.Verdict, a.Why)
				}
				if got := (want{a.Met, a.Unproven}); got != w[i] {
					t.Errorf("%s, expect %s, strict %v: met %v unproven %v, want %+v (why %q)", v, name, strict, a.Met, a.Unproven, w[i], a.Why)
				}
				if !a.Met && a.Why == "" {
					t.Errorf("%s, expect %s, strict %v: unmet without a reason", v, name, strict)
				}
			}
		}
	}
}

func TestParseExpectKinds(t *testing.T) {
	for in, want := range map[string]Expect{
		"safe": {Kind: ExpectSafe}, "race": {Kind: ExpectRace}, "lost": {Kind: ExpectLost},
		"max=2": {Kind: ExpectMax, Max: 2}, "range=0-1": {Kind: ExpectRange, Min: 0, Max: 1}, "range=2": {Kind: ExpectRange, Min: 2, Max: 2},
	} {
		got, err := ParseExpect(in)
		if err != nil || got != want {
			t.Errorf("ParseExpect(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if back, _ := ParseExpect(got.String()); back != got {
			t.Errorf("%q does not read back: %q", in, got.String())
		}
	}
	for _, bad := range []string{"max=0", "range=3-1", "range=-1", "safe=1", "race=x"} {
		if _, err := ParseExpect(bad); err == nil {
			t.Errorf("ParseExpect(%q) accepted", bad)
		}
	}
}

func TestBugCheckReadsBugShown(t *testing.T) {
	r := doubled()
	r.Checks = []runner.Check{{Name: "prune by age forgets a 24 h alert", OK: true, Bug: true, Detail: "sent twice"}}
	var b strings.Builder
	if err := Table(&b, []Case{{Name: "alert-dedupe", Backend: "memory", Expect: Expect{Kind: ExpectRace}, Result: r}}, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "prune by age forgets a 24 h alert: bug shown") {
		t.Errorf("a check that demonstrates a bug must read \"bug shown\":\n%s", b.String())
	}
	r.Checks[0].OK = false
	if a := Assess(Case{Expect: Expect{Kind: ExpectRace}, Result: r}); a.Met || !strings.Contains(a.Why, "did not show") {
		t.Errorf("the bug did not show, yet met %v (%s)", a.Met, a.Why)
	}
}

func TestLostInEveryFormat(t *testing.T) {
	c := Case{Name: "reward-payout (swallow)", Scenario: "reward-payout", Backend: "memory", Expect: Expect{Kind: ExpectSafe}, Result: neverPaid()}
	for _, f := range Formats() {
		var b strings.Builder
		r, _ := Lookup(f)
		if err := r(&b, []Case{c}, Options{}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), "LOST") {
			t.Errorf("%s does not name the verdict LOST:\n%s", f, b.String())
		}
	}
}

// The table's header names the server the run measured (issue 10 §6).
func TestTableHeaderNamesTheServer(t *testing.T) {
	r := heldOnce()
	r.Server = "MariaDB 10.11.19"
	var b strings.Builder
	if err := Table(&b, []Case{{Name: "unique-insert", Backend: "mysql", Result: r}}, Options{}); err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(b.String(), "SCENARIO")
	if !strings.Contains(head, "server: MariaDB 10.11.19") {
		t.Errorf("the header does not name the server:\n%s", b.String())
	}
}

// A check the machine was too slow to judge fails nothing: the run is
// INCONCLUSIVE, which only --strict fails (issue 10 §5).
func TestUnjudgedCheckIsInconclusive(t *testing.T) {
	r := heldOnce()
	r.Checks = []runner.Check{{Name: "lease liveness", Inconclusive: true, Detail: "too slow to judge: …"}}
	a := Assess(Case{Expect: Expect{Kind: ExpectSafe}, Result: r})
	if a.Verdict != Inconclusive || !a.Met || !strings.Contains(a.Why, "lease liveness could not judge") {
		t.Errorf("unjudged liveness: %s met %v (%s), want INCONCLUSIVE and met", a.Verdict, a.Met, a.Why)
	}
	a = Assess(Case{Expect: Expect{Kind: ExpectSafe}, Strict: true, Result: r})
	if a.Met || !a.Unproven {
		t.Errorf("unjudged liveness under --strict: met %v unproven %v, want exit 4", a.Met, a.Unproven)
	}
}
