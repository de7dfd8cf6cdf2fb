package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/racetest/racetest/runner"
)

// serialRun is n bursts that overlapped at the client and took effect
// once each; serial of them the server answered one request at a time.
func serialRun(n, serial int) *runner.Result {
	r := &runner.Result{Attempts: 8, Allowed: 1, Required: 1, Planned: n}
	for i := range n {
		p := 7.5
		if i < serial {
			p = 1.1
		}
		r.Bursts = append(r.Bursts, runner.Burst{Index: i, Effects: 1, Allowed: 1, Required: 1, Overlap: 8,
			Outcomes: [runner.NumClasses]int{runner.Executed: 1, runner.Declined: 7}, ServerParallelism: p})
	}
	return r
}

// A run the server answered one request at a time is INCONCLUSIVE, and
// says so in one line with the figure behind it; one where only some
// bursts were served so counts those among the untested.
func TestServedOneAtATimeIsInconclusive(t *testing.T) {
	a := Assess(Case{Expect: Expect{Kind: ExpectSafe}, Result: serialRun(10, 10)})
	if a.Verdict != Inconclusive || a.Tested != 0 {
		t.Fatalf("verdict %s with %d tested, want INCONCLUSIVE with none", a.Verdict, a.Tested)
	}
	for _, w := range []string{"the server answered one request at a time in 10 of 10 bursts", "median 1.1 requests at once", "below 1.5", "does it have one worker, or one lock held around the whole request?"} {
		if !strings.Contains(a.Why, w) {
			t.Errorf("why %q does not say %q", a.Why, w)
		}
	}
	a = Assess(Case{Expect: Expect{Kind: ExpectSafe}, Result: serialRun(10, 6)})
	if a.Verdict != Inconclusive || a.Tested != 4 || !strings.Contains(a.Why, "one request at a time in 6 of 10 bursts") {
		t.Errorf("6 of 10 served one at a time: verdict %s, %d tested, why %q", a.Verdict, a.Tested, a.Why)
	}
	mixed := serialRun(10, 4)
	for i := 4; i < 7; i++ {
		mixed.Bursts[i].Overlap = 1
	}
	a = Assess(Case{Expect: Expect{Kind: ExpectSafe}, Result: mixed})
	if a.Verdict != Inconclusive || a.Tested != 3 || !strings.Contains(a.Why, "only 3 of 10 bursts put the guard to the test") ||
		!strings.Contains(a.Why, "3 never had two attempts in flight at once") ||
		!strings.Contains(a.Why, "4 were answered one request at a time by the server (one worker, or one lock around the whole request?)") {
		t.Errorf("4 served one at a time, 3 apart: verdict %s, %d tested, why %q", a.Verdict, a.Tested, a.Why)
	}
	// Half served one at a time still leaves enough tested bursts.
	if a := Assess(Case{Expect: Expect{Kind: ExpectSafe}, Result: serialRun(10, 5)}); a.Verdict != Safe || a.Tested != 5 {
		t.Errorf("5 of 10 served one at a time: verdict %s with %d tested, want SAFE over 5", a.Verdict, a.Tested)
	}
}

// The JSON carries each burst's estimate and the run's summary, and a
// saved report re-read judges the run as the run did.
func TestServerParallelismInJSON(t *testing.T) {
	c := Case{Scenario: "http", Backend: "http", Expect: Expect{Kind: ExpectSafe}, Result: serialRun(4, 3)}
	var buf bytes.Buffer
	if err := JSON(&buf, []Case{c}, Options{Version: "test"}); err != nil {
		t.Fatal(err)
	}
	var doc Document
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	run := doc.Runs[0]
	if run.ServerParallelism == nil || *run.ServerParallelism != (StatF{1.1, 1.1, 7.5}) || run.SerialBursts != 3 {
		t.Errorf("server_parallelism %v, serial_bursts %d; want {1.1 1.1 7.5} and 3", run.ServerParallelism, run.SerialBursts)
	}
	if p := run.PerBurst[3].ServerParallelism; p != 7.5 {
		t.Errorf("burst 3's server_parallelism %.2f, want 7.5", p)
	}
	read, err := ReadDocument(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	again, err := read.Cases()
	if err != nil {
		t.Fatal(err)
	}
	if a, b := Assess(c), Assess(again[0]); a.Verdict != b.Verdict || a.Why != b.Why || b.Verdict != Inconclusive {
		t.Errorf("re-read: %s (%s), the run: %s (%s)", b.Verdict, b.Why, a.Verdict, a.Why)
	}
	// Unmeasured: no summary, no per-burst field.
	c.Result = serialRun(2, 0)
	for i := range c.Result.Bursts {
		c.Result.Bursts[i].ServerParallelism = 0
	}
	buf.Reset()
	if err := JSON(&buf, []Case{c}, Options{Version: "test"}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "server_parallelism") || strings.Contains(buf.String(), "serial_bursts") {
		t.Errorf("an unmeasured run's JSON names the server's parallelism:\n%s", buf.String())
	}
}

// The probe of the server decides the cause of a run answered one request
// at a time: a server that did not answer a second request while a first
// was unfinished has one worker; one that did serializes this endpoint
// itself (a lock around the whole request), which proves nothing either.
// Without a probe the line asks both questions, as before.
func TestServedOneAtATimeNamesTheProbedCause(t *testing.T) {
	for _, c := range []struct {
		probe     *runner.ServerProbe
		want, not []string
	}{
		{&runner.ServerProbe{Result: runner.ProbeSerial, Detail: "did not answer"},
			[]string{"the server answers one request at a time (it did not answer a second request while a first was unfinished), so none of 10 bursts raced: does it have one worker?"},
			[]string{"one lock", "estimated from the response times"}},
		{&runner.ServerProbe{Result: runner.ProbeConcurrent, Detail: "answered"},
			[]string{"the endpoint's requests were answered one at a time in 10 of 10 bursts", "median 1.1 requests at once", "though the server answered a second request while a first was unfinished: one lock held around the whole request?", "one replica only"},
			[]string{"one worker"}},
		{&runner.ServerProbe{Result: runner.ProbeNotRun, Detail: "no HTTP/1.1"},
			[]string{"the server answered one request at a time in 10 of 10 bursts", "does it have one worker, or one lock held around the whole request?"}, nil},
		{nil, []string{"does it have one worker, or one lock held around the whole request?"}, nil},
	} {
		r := serialRun(10, 10)
		r.ServerProbe = c.probe
		a := Assess(Case{Expect: Expect{Kind: ExpectSafe}, Result: r})
		if a.Verdict != Inconclusive || a.Tested != 0 {
			t.Errorf("probe %+v: verdict %s with %d tested, want INCONCLUSIVE with none", c.probe, a.Verdict, a.Tested)
		}
		for _, w := range c.want {
			if !strings.Contains(a.Why, w) {
				t.Errorf("probe %+v: why %q does not say %q", c.probe, a.Why, w)
			}
		}
		for _, w := range c.not {
			if strings.Contains(a.Why, w) {
				t.Errorf("probe %+v: why %q says %q", c.probe, a.Why, w)
			}
		}
	}
	// Among other causes, in a few words.
	mixed := serialRun(10, 4)
	for i := 4; i < 7; i++ {
		mixed.Bursts[i].Overlap = 1
	}
	mixed.ServerProbe = &runner.ServerProbe{Result: runner.ProbeConcurrent}
	if a := Assess(Case{Expect: Expect{Kind: ExpectSafe}, Result: mixed}); !strings.Contains(a.Why, "4 were answered one request at a time by the server (the server is concurrent: one lock around the whole request?)") {
		t.Errorf("why %q", a.Why)
	}
}

// The probe's finding is in the JSON, and a saved report re-read names
// the same cause.
func TestServerProbeInJSON(t *testing.T) {
	r := serialRun(4, 4)
	r.ServerProbe = &runner.ServerProbe{Result: runner.ProbeSerial, Detail: "did not answer OPTIONS * beside a held request"}
	c := Case{Scenario: "http", Backend: "http", Expect: Expect{Kind: ExpectSafe}, Result: r}
	var buf bytes.Buffer
	if err := JSON(&buf, []Case{c}, Options{Version: "test"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"server_probe": {`) || !strings.Contains(buf.String(), `"result": "serial"`) {
		t.Errorf("no server_probe in the JSON:\n%s", buf.String())
	}
	read, err := ReadDocument(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	again, err := read.Cases()
	if err != nil {
		t.Fatal(err)
	}
	if a, b := Assess(c), Assess(again[0]); a.Why != b.Why || !strings.Contains(b.Why, "does it have one worker?") || *again[0].Result.ServerProbe != *r.ServerProbe {
		t.Errorf("re-read: %s (%s), the run: %s (%s)", b.Verdict, b.Why, a.Verdict, a.Why)
	}
	// No probe: no field.
	c.Result = serialRun(4, 4)
	buf.Reset()
	if err := JSON(&buf, []Case{c}, Options{Version: "test"}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "server_probe") {
		t.Errorf("a run without a probe names one:\n%s", buf.String())
	}
}

// accountingRun is n tested bursts under accounting in which each of
// per attempts reported success and each success landed.
func accountingRun(n, per int) *runner.Result {
	r := &runner.Result{Attempts: 8, Accounting: true, Planned: n}
	for i := range n {
		r.Bursts = append(r.Bursts, runner.Burst{Index: i, Effects: per, Allowed: per, Required: per, Overlap: 8,
			Outcomes: [runner.NumClasses]int{runner.Executed: per, runner.Declined: 8 - per}, ServerParallelism: 7.5})
	}
	return r
}

// Accounting checks that every reported success landed: a redeem-once
// endpoint that told four callers "redeemed" and recorded four
// redemptions passes it. The verdict stands (for a counter that is right),
// and a line beside SAFE says what accounting did not check, in the table
// too; one success per burst, or an invariant, needs no such line.
func TestAccountingSaysItDoesNotCountOnce(t *testing.T) {
	a := Assess(Case{Expect: Expect{Kind: ExpectSafe}, Result: accountingRun(10, 4)})
	if a.Verdict != Safe || !a.Met {
		t.Fatalf("verdict %s (%s), want SAFE, met", a.Verdict, a.Why)
	}
	for _, w := range []string{"landed, and 10 of 10 bursts had more than one (up to 4)", "accounting checks that successes landed, not that the action happened once", "--allowed 1 or an --invariant"} {
		if !strings.Contains(a.Why, w) {
			t.Errorf("why %q does not say %q", a.Why, w)
		}
	}
	var buf bytes.Buffer
	if err := Table(&buf, []Case{{Name: "redeem", Scenario: "http", Backend: "http", Expect: Expect{Kind: ExpectSafe}, Result: accountingRun(10, 4)}}, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(strings.Fields(buf.String()), " "), "not that the action happened once") {
		t.Errorf("the table does not show the caveat:\n%s", buf.String())
	}
	// Some bursts with one success, some with several: only the latter
	// are counted.
	mixed := accountingRun(10, 3)
	for i := range 4 {
		mixed.Bursts[i] = accountingRun(1, 1).Bursts[0]
		mixed.Bursts[i].Index = i
	}
	if a := Assess(Case{Expect: Expect{Kind: ExpectSafe}, Result: mixed}); !strings.Contains(a.Why, "landed, and 6 of 10 bursts had more than one (up to 3)") {
		t.Errorf("4 bursts of one success and 6 of three: why %q, want …landed, and 6 of 10 bursts had more than one (up to 3)…", a.Why)
	}
	if a := Assess(Case{Expect: Expect{Kind: ExpectSafe}, Result: accountingRun(10, 1)}); a.Verdict != Safe || a.Why != "" {
		t.Errorf("one success per burst: %s (%s), want SAFE with no caveat", a.Verdict, a.Why)
	}
	inv := accountingRun(10, 4)
	inv.Invariants = []string{"SELECT count(*) FROM redemptions GROUP BY coupon HAVING count(*) > 1"}
	for i := range inv.Bursts {
		inv.Bursts[i].Broken = []int{0}
	}
	if a := Assess(Case{Expect: Expect{Kind: ExpectSafe}, Result: inv}); a.Verdict != Safe || a.Why != "" {
		t.Errorf("with an invariant: %s (%s), want SAFE with no caveat", a.Verdict, a.Why)
	}
	plain := accountingRun(10, 4)
	plain.Accounting = false
	for i := range plain.Bursts {
		plain.Bursts[i].Allowed = 4
	}
	if a := Assess(Case{Expect: Expect{Kind: ExpectSafe}, Result: plain}); a.Verdict != Safe || a.Why != "" {
		t.Errorf("without accounting: %s (%s), want SAFE with no caveat", a.Verdict, a.Why)
	}
}

// Two successes in a burst are already more than one: a redeem-once
// endpoint that told two callers "redeemed" gets the caveat as one that
// told four did (issue 48: the tests had 1, 3 and 4 successes, and n > 2
// lived).
func TestAccountingCaveatFromTwoSuccesses(t *testing.T) {
	a := Assess(Case{Expect: Expect{Kind: ExpectSafe}, Result: accountingRun(10, 2)})
	if a.Verdict != Safe || !strings.Contains(a.Why, "landed, and 10 of 10 bursts had more than one (up to 2)") {
		t.Errorf("two successes per burst: %s (%s), want SAFE with …10 of 10 bursts had more than one (up to 2)…", a.Verdict, a.Why)
	}
}
