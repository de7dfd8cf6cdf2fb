package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/racetest/racetest/runner"
)

// A check read as a change that never moved while attempts said they
// executed observes nothing: `SELECT 1` on a naive script, or a typo that
// counts 0 on a correct one, is INCONCLUSIVE with the line that asks
// about the check — never SAFE, never LOST.
func TestStuckCheckIsInconclusive(t *testing.T) {
	selectOne := bursts(30, 0, 8, [runner.NumClasses]int{8, 0, 0, 0, 0})
	selectOne.Baselined = true
	for i := range selectOne.Bursts {
		selectOne.Bursts[i].Before = 1
	}
	a := Assess(Case{Result: selectOne})
	if a.Verdict != Inconclusive || a.Met && a.Expectation() != "unproven" {
		t.Fatalf("SELECT 1 on a naive script: %s (%s), want INCONCLUSIVE, unproven", a.Verdict, a.Expectation())
	}
	want := "the effects check never changed (it read 1 before and after every burst) while 240 attempts reported success: does the effects check (--effects) count what the attempt does?"
	if a.Why != want {
		t.Errorf("why = %q\nwant  %q", a.Why, want)
	}

	typo := bursts(30, 0, 8, [runner.NumClasses]int{1, 7, 0, 0, 0}) // a correct guard, a check that counts 0
	typo.Baselined = true
	if a := Assess(Case{Result: typo}); a.Verdict != Inconclusive || !strings.Contains(a.Why, "never changed") {
		t.Errorf("a typo that counts 0: %s %q, want INCONCLUSIVE saying the check never changed", a.Verdict, a.Why)
	}
	// The same figures from a target that counts its own effects (the
	// catalog) are a real LOST.
	typo.Baselined = false
	if a := Assess(Case{Result: typo}); a.Verdict != Lost {
		t.Errorf("a catalog count of 0 with successes: %s, want LOST", a.Verdict)
	}
	// A broken invariant is a RACE even when the check is stuck.
	selectOne.Invariants = []string{"no overdraft"}
	selectOne.Bursts[3].Broken = []int{2}
	if a := Assess(Case{Result: selectOne}); a.Verdict != Race {
		t.Errorf("stuck check, broken invariant: %s, want RACE", a.Verdict)
	}
}

// Counting the anomaly (allowed 0) on a correct guard is tested from the
// outcomes and can prove SAFE; the INCONCLUSIVE line never says nothing
// executed beside attempts that executed.
func TestCountingTheAnomalyCanProveSafe(t *testing.T) {
	r := bursts(30, 0, 16, [runner.NumClasses]int{1, 15, 0, 0, 0})
	r.Allowed, r.Required, r.Baselined = 0, 0, true
	for i := range r.Bursts {
		r.Bursts[i].Allowed, r.Bursts[i].Required = 0, 0
	}
	a := Assess(Case{Result: r})
	if a.Verdict != Safe || a.Tested != 30 {
		t.Errorf("anomaly counted 0 on a correct guard: %s with %d tested (%q), want SAFE over 30", a.Verdict, a.Tested, a.Why)
	}
}

// A broken invariant is a RACE named after it; invariants that held in
// every tested burst prove SAFE with no effects counted at all.
func TestInvariantsDecideTheVerdict(t *testing.T) {
	r := bursts(20, 0, 8, [runner.NumClasses]int{3, 5, 0, 0, 0})
	r.Uncounted, r.Allowed, r.Required = true, 0, 0
	r.Invariants = []string{"SELECT count(*) FROM accounts WHERE balance < 0"}
	for i := range r.Bursts {
		r.Bursts[i].Allowed, r.Bursts[i].Required = 0, 0
		r.Bursts[i].Broken = []int{0}
	}
	a := Assess(Case{Result: r})
	if a.Verdict != Safe || a.Tested != 20 {
		t.Fatalf("invariant held in 20 tested bursts: %s (%q), want SAFE", a.Verdict, a.Why)
	}
	var out bytes.Buffer
	if err := Table(&out, []Case{{Name: "withdraw", Backend: "postgres", Result: r}}, Options{Width: 200}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "0 of 20 tested bursts broke an invariant: violation rate ≤") {
		t.Errorf("table does not say what held:\n%s", out.String())
	}
	r.Invariants = append(r.Invariants, "one owner")
	for i := range r.Bursts {
		r.Bursts[i].Broken = []int{0, 0}
	}
	r.Bursts[4].Broken = []int{2, 0}
	r.Bursts[9].Broken = []int{1, 0}
	a = Assess(Case{Result: r})
	if a.Verdict != Race || a.Violations != 2 || a.Met {
		t.Fatalf("invariant broken twice: %s, %d violations, met %v; want RACE, 2, unmet", a.Verdict, a.Violations, a.Met)
	}
	want := "expected SAFE, but invariant SELECT count(*) FROM accounts WHERE balance < 0 broken after 2 of 20 bursts (at most 2 violations)"
	if a.Why != want {
		t.Errorf("why = %q\nwant  %q", a.Why, want)
	}
	if a := Assess(Case{Result: r, Expect: Expect{Kind: ExpectRace}}); !a.Met || !strings.HasPrefix(a.Why, "invariant SELECT") {
		t.Errorf("expected race: met %v why %q", a.Met, a.Why)
	}
	out.Reset()
	if err := Table(&out, []Case{{Name: "withdraw", Backend: "postgres", Result: r}}, Options{Width: 200}); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "2 of 20 bursts violated: 95% upper bound") || strings.Contains(s, "left more effects than allowed") {
		t.Errorf("table of a broken invariant:\n%s", s)
	}

	// Effects over the allowance and a broken invariant: both are named.
	r.Uncounted = false
	r.Bursts[0].Effects = 1
	r.Bursts[4].Effects = 3
	a = Assess(Case{Result: r})
	if !strings.Contains(a.Why, "broken after 2 of 20 bursts") || !strings.Contains(a.Why, "2 of 20 bursts left more than 0 effects (worst 3)") {
		t.Errorf("why = %q, want both the invariant and the allowance", a.Why)
	}
}

// Under accounting a burst whose successes did not all land is LOST, one
// with more effects than successes a RACE, and both say "successes".
func TestAccountingVerdicts(t *testing.T) {
	r := bursts(10, 10, 16, [runner.NumClasses]int{16, 0, 0, 0, 0})
	r.Accounting = true
	for i := range r.Bursts {
		r.Bursts[i].Allowed, r.Bursts[i].Required = 16, 16
	}
	a := Assess(Case{Result: r})
	if a.Verdict != Lost || !strings.Contains(a.Why, "fewer than its successes") {
		t.Errorf("16 said success, 10 landed: %s %q, want LOST against the successes", a.Verdict, a.Why)
	}
	for i := range r.Bursts {
		r.Bursts[i].Effects = 17
	}
	if a := Assess(Case{Result: r}); a.Verdict != Race || !strings.Contains(a.Why, "more than its successes") {
		t.Errorf("17 landed for 16 successes: %s %q, want RACE against the successes", a.Verdict, a.Why)
	}
}

// EXPECTED never reads "ok" for an INCONCLUSIVE run, in any format.
func TestInconclusiveIsNeverOK(t *testing.T) {
	c := Case{Scenario: "redeem", Backend: "postgres", Result: timedOut()}
	a := Assess(c)
	if a.Verdict != Inconclusive || !a.Met || a.Expectation() != "unproven" {
		t.Fatalf("inconclusive: %s met %v expectation %q", a.Verdict, a.Met, a.Expectation())
	}
	if got := (Assessment{Verdict: Safe, Met: true}).Expectation(); got != "met" {
		t.Errorf("SAFE, met: %q", got)
	}
	if got := (Assessment{Verdict: Inconclusive}).Expectation(); got != "failed" {
		t.Errorf("INCONCLUSIVE under --strict: %q, want failed", got)
	}
	var tbl bytes.Buffer
	if err := Table(&tbl, []Case{c}, Options{Width: 200}); err != nil {
		t.Fatal(err)
	}
	if s := tbl.String(); strings.Contains(s, "safe ok") || !strings.Contains(s, "safe unproven") {
		t.Errorf("table:\n%s", s)
	}
	var md bytes.Buffer
	if err := Markdown(&md, []Case{c}, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| INCONCLUSIVE | safe unproven |") {
		t.Errorf("markdown:\n%s", md.String())
	}
	var js bytes.Buffer
	if err := JSON(&js, []Case{c}, Options{}); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Runs []struct {
			Expectation string `json:"expectation"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil || len(doc.Runs) != 1 || doc.Runs[0].Expectation != "unproven" {
		t.Errorf("json expectation: %+v (%v)", doc, err)
	}
	var ju bytes.Buffer
	if err := JUnit(&ju, []Case{c}, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ju.String(), `name="expectation" value="unproven"`) {
		t.Errorf("junit:\n%s", ju.String())
	}
	var html bytes.Buffer
	if err := HTML(&html, []Case{c}, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html.String(), "? unproven") || strings.Contains(html.String(), "✓ met") {
		t.Error("html reads met for an INCONCLUSIVE run")
	}
}

// An invariant already broken before a burst did not judge it (issue 42,
// item 8). A run judged by invariants alone in which none judged a burst
// is INCONCLUSIVE with the line that says why, never SAFE; a RACE's rate
// is over the bursts something judged; and a saved report reads back the
// same verdict.
func TestInvariantBrokenBeforeEveryBurstProvesNothing(t *testing.T) {
	const inv = "SELECT bool_and(balance >= 0) FROM acct"
	overdraft := bursts(30, 0, 8, [runner.NumClasses]int{3, 5, 0, 0, 0})
	overdraft.Uncounted, overdraft.Allowed, overdraft.Required = true, 0, 0
	overdraft.Invariants = []string{inv}
	for i := range overdraft.Bursts {
		b := &overdraft.Bursts[i]
		b.Allowed, b.Required = 0, 0
		b.Broken, b.Unjudged, b.Unobserved = []int{0}, []bool{true}, true
	}
	c := Case{Name: "transfer", Backend: "postgres", Result: overdraft}
	a := Assess(c)
	want := "invariant " + inv + " was already broken before 30 of 30 bursts: nothing it could judge; fix the data, or scope it to the burst's subject ({{.Token}})"
	if a.Verdict != Inconclusive || a.Why != want || a.Tested != 0 || a.Unjudged != 30 {
		t.Fatalf("an old overdraft: %s (tested %d, unjudged %d) %q\nwant INCONCLUSIVE %q", a.Verdict, a.Tested, a.Unjudged, a.Why, want)
	}
	roundTrip := func(c Case) Case {
		t.Helper()
		again, _ := reread(t, c)
		return again
	}
	if b := Assess(roundTrip(c)); b.Verdict != a.Verdict || b.Why != a.Why || b.Tested != a.Tested {
		t.Errorf("re-read: %s %q (tested %d), want %s %q (tested %d)", b.Verdict, b.Why, b.Tested, a.Verdict, a.Why, a.Tested)
	}

	// With an effects check the effects still judge each burst, but an
	// invariant that judged none leaves SAFE unproven.
	counted := bursts(30, 1, 8, [runner.NumClasses]int{1, 7, 0, 0, 0})
	counted.Invariants = []string{inv}
	for i := range counted.Bursts {
		counted.Bursts[i].Broken, counted.Bursts[i].Unjudged = []int{0}, []bool{true}
	}
	if a := Assess(Case{Result: counted}); a.Verdict != Inconclusive || a.Why != want {
		t.Errorf("counted, the invariant judged none: %s %q, want INCONCLUSIVE %q", a.Verdict, a.Why, want)
	}
	counted.Bursts[0].Unjudged = nil // it judged one burst, and held
	if a := Assess(Case{Result: counted}); a.Verdict != Safe {
		t.Errorf("counted, the invariant judged a burst: %s %q, want SAFE", a.Verdict, a.Why)
	}

	// A naive transfer on a clean table: the first burst broke it, and
	// every later one started broken. The rate is 1 of the 1 judged.
	naive := overdraft
	naive.Bursts = append([]runner.Burst(nil), overdraft.Bursts...)
	naive.Bursts[0].Broken, naive.Bursts[0].Unjudged, naive.Bursts[0].Unobserved = []int{1}, nil, false
	c = Case{Name: "transfer", Backend: "postgres", Result: naive}
	a = Assess(c)
	if a.Verdict != Race || a.Violations != 1 || a.Rate != 1 || a.Unjudged != 29 {
		t.Fatalf("naive transfer: %s, %d violations, rate %v, unjudged %d; want RACE 1, rate 1 over the 1 judged, 29 unjudged", a.Verdict, a.Violations, a.Rate, a.Unjudged)
	}
	wantWhy := "expected SAFE, but invariant " + inv + " broken after 1 of the 1 bursts it judged (at most 1 violation; already broken before the other 29, which it could not judge)"
	if a.Why != wantWhy {
		t.Errorf("why = %q\nwant  %q", a.Why, wantWhy)
	}
	if b := Assess(roundTrip(c)); b.Verdict != a.Verdict || b.Rate != a.Rate || b.Why != a.Why {
		t.Errorf("re-read: %s rate %v %q, want %s rate %v %q", b.Verdict, b.Rate, b.Why, a.Verdict, a.Rate, a.Why)
	}
	var out bytes.Buffer
	if err := Table(&out, []Case{c}, Options{Width: 300}); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, " 1/1 ") || !strings.Contains(s, "RACE 100%") ||
		!strings.Contains(s, "1 of the 1 bursts judged violated (29 started with every invariant broken, and nothing judged them)") {
		t.Errorf("the table does not count over the judged bursts:\n%s", s)
	}
}

// An expectation of SAFE asked to be proven (--expect safe) is not met by
// INCONCLUSIVE: unproven, exit 4; nor after a saved report is read back.
// Without ProveSafe it is let through, read "unproven"; an expectation of
// RACE is not an expectation of SAFE (issue 42, item 10).
func TestProveSafeIsNotMetByInconclusive(t *testing.T) {
	flat := bursts(3, 1, 4, [runner.NumClasses]int{1, 3, 0, 0, 0})
	for i := range flat.Bursts {
		flat.Bursts[i].Overlap = 1 // never two in flight: INCONCLUSIVE
	}
	c := Case{Name: "flat", Backend: "memory", Expect: Expect{Kind: ExpectSafe}, Result: flat}
	if a := Assess(c); a.Verdict != Inconclusive || !a.Met || a.Expectation() != "unproven" {
		t.Fatalf("not asked for proof: %s met %v %q, want INCONCLUSIVE let through, unproven", a.Verdict, a.Met, a.Expectation())
	}
	c.ProveSafe = true
	a := Assess(c)
	if a.Met || !a.Unproven || a.Expectation() != "failed" {
		t.Errorf("asked for proof: met %v unproven %v %q, want unmet, unproven (exit 4), failed", a.Met, a.Unproven, a.Expectation())
	}
	back, _ := reread(t, c)
	if b := Assess(back); b.Met != a.Met || b.Unproven != a.Unproven {
		t.Errorf("re-read: met %v unproven %v, want %v %v", b.Met, b.Unproven, a.Met, a.Unproven)
	}
	c.Expect = Expect{Kind: ExpectMax, Max: 1}
	if a := Assess(c); !a.Met {
		t.Errorf("max=1 under ProveSafe: met %v, want met: only an expectation of SAFE asks for SAFE", a.Met)
	}
}

// When some bursts were tested and every other one was judged by nothing,
// the reason is the invariants', not the general count.
func TestSomeBurstsUnobservedSayWhy(t *testing.T) {
	const inv = "SELECT bool_and(balance >= 0) FROM acct"
	r := bursts(30, 0, 8, [runner.NumClasses]int{3, 5, 0, 0, 0})
	r.Uncounted, r.Allowed, r.Required = true, 0, 0
	r.Invariants = []string{inv}
	for i := range r.Bursts {
		b := &r.Bursts[i]
		b.Allowed, b.Required = 0, 0
		b.Broken = []int{0}
		if i >= 10 {
			b.Unjudged, b.Unobserved = []bool{true}, true
		}
	}
	a := Assess(Case{Name: "transfer", Backend: "postgres", Result: r})
	want := "invariant " + inv + " was already broken before 20 of 30 bursts"
	if a.Verdict != Inconclusive || a.Tested != 10 || !strings.HasPrefix(a.Why, want) {
		t.Fatalf("%s (tested %d) %q\nwant INCONCLUSIVE, 10 tested, %q…", a.Verdict, a.Tested, a.Why, want)
	}
}

// A name says its backend only as words of its own: "on memory" at its
// end or before punctuation, anywhere in the name, never "on memoryX".
func TestNamesBackend(t *testing.T) {
	for _, c := range []struct {
		name string
		want bool
	}{
		{"redeem on memory", true},
		{" on memory", true},
		{"redeem on memory, fast", true},
		{"redeem on memoryX", false},
		{"a on memoryX then on memory", true},
		{"a on memoryX then on memoryY", false},
		{"redeem", false},
	} {
		if got := namesBackend(c.name, "memory"); got != c.want {
			t.Errorf("namesBackend(%q) = %v, want %v", c.name, got, c.want)
		}
	}
}
