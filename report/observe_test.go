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
