package race

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/racetest/racetest/explore"
	"github.com/racetest/racetest/runner"
)

// fakeT is a testing.TB that records what a user would see. Methods race
// does not call are left to the nil embedded TB: calling one panics.
type fakeT struct {
	testing.TB
	name    string
	ctx     context.Context
	mu      sync.Mutex
	errs    []string
	logs    []string
	stopped bool
}

func newFakeT(t *testing.T) *fakeT { return &fakeT{name: "TestRedeem/naive", ctx: t.Context()} }

func (f *fakeT) Helper()                  {}
func (f *fakeT) Name() string             { return f.name }
func (f *fakeT) Context() context.Context { return f.ctx }
func (f *fakeT) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}
func (f *fakeT) Logf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs = append(f.logs, fmt.Sprintf(format, args...))
}
func (f *fakeT) Fatalf(format string, args ...any) { f.Errorf(format, args...); f.FailNow() }
func (f *fakeT) FailNow() {
	f.mu.Lock()
	f.stopped = true
	f.mu.Unlock()
	runtime.Goexit()
}
func (f *fakeT) failed() bool    { return len(f.errs) > 0 }
func (f *fakeT) errText() string { return strings.Join(f.errs, "\n") }
func (f *fakeT) logText() string { return strings.Join(f.logs, "\n") }

// call runs check as a test body would, so that FailNow's Goexit ends only
// it.
func call(f *fakeT, check func(testing.TB, Case) *Report, c Case) *Report {
	var rep *Report
	done := make(chan struct{})
	go func() {
		defer close(done)
		rep = check(f, c)
	}()
	<-done
	return rep
}

// coupons is an in-memory store: every access locked (the Go race
// detector is silent), each operation a round trip.
type coupons struct {
	mu      sync.Mutex
	used    map[string]bool
	effects map[string]int
	rtt     time.Duration
}

var errUsed = errors.New("already redeemed")

func newCoupons() *coupons {
	return &coupons{used: map[string]bool{}, effects: map[string]int{}, rtt: 300 * time.Microsecond}
}

func (c *coupons) naive(w *Worker, code string) error {
	w.Step("check")
	time.Sleep(c.rtt)
	c.mu.Lock()
	used := c.used[code]
	c.mu.Unlock()
	if used {
		return errUsed
	}
	w.Step("act")
	time.Sleep(c.rtt)
	c.mu.Lock()
	c.used[code] = true
	c.effects[code]++
	c.mu.Unlock()
	return nil
}

func (c *coupons) fixed(w *Worker, code string) error {
	w.Step("act")
	time.Sleep(c.rtt)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.used[code] {
		return errUsed
	}
	c.used[code] = true
	c.effects[code]++
	return nil
}

func (c *coupons) caseFor(redeem func(*Worker, string) error) Case {
	return Case{
		Attempts: 8, Bursts: 40,
		Subject: func(_ context.Context, b Burst) (any, error) { return b.Token(), nil },
		Attempt: func(_ context.Context, s any, w *Worker) Outcome { return From(redeem(w, s.(string)), errUsed) },
		Effects: func(_ context.Context, s any) (int, error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.effects[s.(string)], nil
		},
	}
}

func wantIn(t *testing.T, what, text string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(text, s) {
			t.Errorf("%s lacks %q:\n%s", what, s, text)
		}
	}
}

func TestNaiveFailsWithTableTimelineAndReproduce(t *testing.T) {
	setShort(t, false)
	f := newFakeT(t)
	c := newCoupons()
	rep := call(f, Test, c.caseFor(c.naive))
	if !f.failed() || !f.stopped {
		t.Fatalf("Test passed a check-then-write (failed=%v stopped=%v); logs:\n%s", f.failed(), f.stopped, f.logText())
	}
	if rep != nil {
		t.Errorf("Test returned after FailNow")
	}
	msg := f.errText()
	wantIn(t, "the failure", msg,
		"race: RACE: expected SAFE, but ", " of 40 bursts left more than 1 effect (worst ",
		"CASE", "TestRedeem/naive", "RACE", // the table
		"timeline of burst", "check@", "act@", // the worst burst, with the steps
		"reproduce: (cd ", "go test -race -count=1 -v -run '^TestRedeem$/^naive$' .)")
	if strings.Contains(msg, "-short") {
		t.Errorf("a run without -short says it was short:\n%s", msg)
	}
}

func TestFixedPasses(t *testing.T) {
	setShort(t, false)
	f := newFakeT(t)
	c := newCoupons()
	rep := call(f, Test, c.caseFor(c.fixed))
	if f.failed() {
		t.Fatalf("Test failed a conditional write:\n%s", f.errText())
	}
	if rep == nil || rep.Verdict != Safe || rep.Bursts != 40 || rep.Violations != 0 {
		t.Fatalf("report = %+v, want SAFE over 40 bursts", rep)
	}
	wantIn(t, "the log", f.logText(), "race: SAFE", "≤") // the bound
	// The store says one redemption per coupon, and the outcomes agree.
	out := rep.Result.Outcomes()
	if out[runner.Executed] != 40 || out[runner.Declined] != 40*7 {
		t.Errorf("outcomes %v, want 40 executed and 280 declined (errUsed maps to declined)", out)
	}
}

func TestExpectRace(t *testing.T) {
	setShort(t, false)
	t.Run("shown", func(t *testing.T) {
		f := newFakeT(t)
		c := newCoupons()
		call(f, ExpectRace, c.caseFor(c.naive))
		if f.failed() {
			t.Fatalf("ExpectRace failed on a check-then-write:\n%s", f.errText())
		}
		wantIn(t, "the log", f.logText(), "RACE shown, as expected:", "of 40 bursts", "timeline of burst")
	})
	t.Run("not shown", func(t *testing.T) {
		f := newFakeT(t)
		c := newCoupons()
		call(f, ExpectRace, c.caseFor(c.fixed))
		if !f.failed() || !f.stopped {
			t.Fatal("ExpectRace passed on a conditional write")
		}
		wantIn(t, "the failure", f.errText(),
			"ExpectRace: this test demonstrates a known bug, but the race did not show",
			"no burst of 40 exceeded 1 effect (found SAFE)", "make this a race.Test", "reproduce:")
	})
}

func TestInconclusiveFailsUnlessAllowed(t *testing.T) {
	c := newCoupons()
	one := c.caseFor(c.fixed)
	one.Attempts = 1 // one attempt per burst: nothing can overlap
	f := newFakeT(t)
	call(f, Test, one)
	if !f.failed() {
		t.Fatal("an INCONCLUSIVE run passed Test")
	}
	wantIn(t, "the failure", f.errText(), "race: INCONCLUSIVE: ", "proves nothing", "AllowInconclusive")

	one.AllowInconclusive = true
	f = newFakeT(t)
	rep := call(f, Test, one)
	if f.failed() || rep.Verdict != Inconclusive {
		t.Fatalf("AllowInconclusive: failed=%v verdict=%v\n%s", f.failed(), rep.Verdict, f.errText())
	}
}

// An attempt that always fails tests nothing: INCONCLUSIVE, naming the
// error, never SAFE.
func TestFailingAttemptsAreNotSafe(t *testing.T) {
	setShort(t, false)
	c := newCoupons()
	cs := c.caseFor(c.fixed)
	cs.Attempt = func(context.Context, any, *Worker) Outcome { return From(errors.New("dial tcp: connection refused")) }
	f := newFakeT(t)
	call(f, Test, cs)
	wantIn(t, "the failure", f.errText(), "race: INCONCLUSIVE: 0 of 40 bursts executed anything", "connection refused")
}

// An attempt that says "done" while the store shows nothing is LOST.
func TestClaimedButNotDoneIsLost(t *testing.T) {
	setShort(t, false)
	c := newCoupons()
	cs := c.caseFor(c.fixed)
	cs.Attempt = func(_ context.Context, s any, w *Worker) Outcome {
		if strings.HasSuffix(s.(string), "0") {
			return From(c.fixed(w, s.(string)), errUsed) // every tenth burst pays
		}
		if w.ID == 0 {
			return From(nil) // claims it paid, wrote nothing
		}
		return From(errUsed, errUsed)
	}
	f := newFakeT(t)
	call(f, Test, cs)
	wantIn(t, "the failure", f.errText(), "race: LOST: expected SAFE, but 36 of 40 bursts left fewer than 1 effect")
}

// An Effects that never changes while attempts report success observes
// nothing: a constant 1 beside a naive redeem that pays twice, or a count
// that is always 0 beside a correct one, is INCONCLUSIVE with the line
// that asks about the check — never SAFE, never LOST (issue 25 §1).
func TestStuckEffectsAreInconclusive(t *testing.T) {
	c := newCoupons()
	cs := c.caseFor(c.naive)
	cs.Effects = func(context.Context, any) (int, error) { return 1, nil }
	rep, err := Run(context.Background(), cs)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != Inconclusive || !strings.Contains(rep.Why, "the effects check never changed") {
		t.Errorf("a constant Effects on the naive redeem: %s %q, want INCONCLUSIVE saying the check never changed", rep.Verdict, rep.Why)
	}
	cs = c.caseFor(c.fixed)
	cs.Effects = func(context.Context, any) (int, error) { return 0, nil }
	if rep, _ := Run(context.Background(), cs); rep.Verdict != Inconclusive {
		t.Errorf("an Effects that counts 0 on the fixed redeem: %s, want INCONCLUSIVE", rep.Verdict)
	}
}

// An invariant alone judges a case: a stock that must not go below 0
// holds under the fixed sale and breaks under the naive one, named.
func TestInvariantJudgesACase(t *testing.T) {
	var mu sync.Mutex
	stock := map[string]int{}
	sell := func(checkFirst bool) func(context.Context, any, *Worker) Outcome {
		return func(_ context.Context, s any, w *Worker) Outcome {
			k := s.(string)
			time.Sleep(300 * time.Microsecond) // the round trip to the store
			mu.Lock()
			left := stock[k]
			if !checkFirst && left > 0 {
				stock[k]--
			}
			mu.Unlock()
			if left < 1 {
				return From(Declined("sold out"))
			}
			if !checkFirst {
				return From(nil)
			}
			w.Step("act")
			time.Sleep(300 * time.Microsecond)
			mu.Lock()
			stock[k]--
			mu.Unlock()
			return From(nil)
		}
	}
	cs := Case{Attempts: 8, Bursts: 30, InvariantName: "no stock below 0",
		Subject: func(_ context.Context, b Burst) (any, error) {
			mu.Lock()
			defer mu.Unlock()
			stock[b.Token()] = 1
			return b.Token(), nil
		},
		Attempt: sell(false),
		Invariant: func(_ context.Context, s any) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			if stock[s.(string)] < 0 {
				return 1, nil
			}
			return 0, nil
		},
	}
	rep, err := Run(context.Background(), cs)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != Safe {
		t.Errorf("the atomic sale: %s %q, want SAFE", rep.Verdict, rep.Why)
	}
	cs.Attempt = sell(true)
	rep, err = Run(context.Background(), cs)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != Race || !strings.Contains(rep.String(), "invariant no stock below 0 broken after") {
		t.Errorf("check, then sell: %s\n%s", rep.Verdict, rep)
	}
}

func TestRunErrorsFailWithTheCause(t *testing.T) {
	c := newCoupons()
	bad := c.caseFor(c.fixed)
	bad.Subject = func(_ context.Context, b Burst) (any, error) {
		if b.Index == 3 {
			return nil, errors.New("insert coupon: connection refused")
		}
		return b.Token(), nil
	}
	f := newFakeT(t)
	call(f, Test, bad)
	wantIn(t, "the failure", f.errText(), "the run could not be carried out", "burst 3: reset: subject: insert coupon: connection refused")
}

func TestIncompleteCaseSaysWhatIsMissing(t *testing.T) {
	f := newFakeT(t)
	call(f, Test, Case{Subject: func(context.Context, Burst) (any, error) { return "x", nil }})
	if !f.stopped {
		t.Fatal("an incomplete case did not stop the test")
	}
	wantIn(t, "the failure", f.errText(), "Attempt, Effects (or Invariant, or Auto) must be set")

	f = newFakeT(t)
	c := newCoupons()
	neg := c.caseFor(c.fixed)
	neg.Bursts = -1
	call(f, Test, neg)
	wantIn(t, "the failure", f.errText(), "cannot be negative")
}

func TestShortRunsFewerBursts(t *testing.T) {
	setShort(t, true)
	c := newCoupons()
	for _, tc := range []struct{ bursts, short, want int }{{200, 0, 40}, {50, 0, 20}, {10, 0, 10}, {200, 7, 7}, {0, 0, 20}} {
		cs := c.caseFor(c.fixed)
		cs.Bursts, cs.ShortBursts = tc.bursts, tc.short
		f := newFakeT(t)
		rep := call(f, Test, cs)
		if rep == nil || len(rep.Result.Bursts) != tc.want {
			t.Errorf("Bursts %d ShortBursts %d under -short: ran %v, want %d\n%s", tc.bursts, tc.short, rep, tc.want, f.errText())
		}
	}
	f := newFakeT(t)
	call(f, Test, c.caseFor(c.naive))
	wantIn(t, "a failure under -short", f.errText(), "This run was under -short, with fewer bursts.")
}

// Each worker gets a session of its own, made before the first burst (not
// per attempt), and closed after the last.
func TestSessionPerWorker(t *testing.T) {
	var made, closed atomic.Int32
	var attemptsBeforeAllSessions atomic.Int32
	c := newCoupons()
	cs := c.caseFor(c.fixed)
	cs.Attempts, cs.Bursts = 4, 5
	cs.Session = func(_ context.Context, worker int) (any, error) {
		made.Add(1)
		return &conn{worker: worker, closed: &closed}, nil
	}
	inner := cs.Attempt
	cs.Attempt = func(ctx context.Context, s any, w *Worker) Outcome {
		if made.Load() != 4 {
			attemptsBeforeAllSessions.Add(1)
		}
		if got := w.Session.(*conn).worker; got != w.ID {
			return From(fmt.Errorf("worker %d got worker %d's session", w.ID, got))
		}
		return inner(ctx, s, w)
	}
	rep, err := Run(t.Context(), cs)
	if err != nil {
		t.Fatal(err)
	}
	if made.Load() != 4 || closed.Load() != 4 || attemptsBeforeAllSessions.Load() != 0 {
		t.Errorf("sessions made %d, closed %d, attempts before all were made %d; want 4, 4, 0",
			made.Load(), closed.Load(), attemptsBeforeAllSessions.Load())
	}
	if n := rep.Result.Outcomes()[runner.Error]; n != 0 {
		t.Errorf("%d attempts errored: %v", n, rep.Result.Errors)
	}
}

type conn struct {
	worker int
	closed *atomic.Int32
}

func (c *conn) Close() error { c.closed.Add(1); return nil }

func TestPanickingAttemptIsAnError(t *testing.T) {
	c := newCoupons()
	cs := c.caseFor(c.fixed)
	cs.Attempts, cs.Bursts = 2, 2
	cs.Attempt = func(context.Context, any, *Worker) Outcome { panic("nil map") }
	rep, err := Run(t.Context(), cs)
	if err != nil {
		t.Fatal(err)
	}
	if n := rep.Result.Outcomes()[runner.Error]; n != 4 || rep.Result.Errors["attempt panicked: nil map"] != 4 {
		t.Errorf("errors %d %v, want 4 'attempt panicked: nil map'", n, rep.Result.Errors)
	}
}

func TestFrom(t *testing.T) {
	mine := errors.New("coupon already used")
	for _, tc := range []struct {
		err  error
		want runner.Class
	}{
		{nil, runner.Executed},
		{ErrDeclined, runner.Declined},
		{Declined("lease held by w3"), runner.Declined},
		{fmt.Errorf("redeem: %w", mine), runner.Declined},
		{context.DeadlineExceeded, runner.Unknown},
		{fmt.Errorf("query: %w", context.DeadlineExceeded), runner.Unknown},
		{errors.New("connection reset"), runner.Error},
		{context.Canceled, runner.Error},
	} {
		if got := From(tc.err, mine).Class; got != tc.want {
			t.Errorf("From(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if got := From(mine).Class; got != runner.Error {
		t.Errorf("From(own sentinel) without naming it = %v, want error (never taken for 'already done')", got)
	}
	if msg := Declined("lease held by w3").Error(); msg != "declined: lease held by w3" {
		t.Errorf("Declined message = %q", msg)
	}
}

// holdActs keeps every worker at its "act" step until all n reached it: the
// interleaving "every check before any write", chosen rather than hoped for.
type holdActs struct {
	n       int
	mu      sync.Mutex
	arrived int
	open    chan struct{}
}

func (h *holdActs) Step(ctx context.Context, _ int, step string) {
	if step != "act" {
		return
	}
	h.mu.Lock()
	open := h.open
	if h.arrived++; h.arrived == h.n {
		close(h.open)
		h.arrived, h.open = 0, make(chan struct{})
	}
	h.mu.Unlock()
	select {
	case <-open:
	case <-ctx.Done():
	}
}

func (h *holdActs) Done(int) {}

// Worker.Step reaches a scheduler passed in Options: with every check
// held before any write, the naive Redeem pays N times in every burst.
func TestStepReachesTheScheduler(t *testing.T) {
	c := newCoupons()
	c.rtt = 0
	cs := c.caseFor(c.naive)
	cs.Attempts, cs.Bursts = 4, 10
	cs.Options = []runner.Option{runner.Schedule(&holdActs{n: 4, open: make(chan struct{})})}
	rep, err := Run(t.Context(), cs)
	if err != nil {
		t.Fatal(err)
	}
	if s := rep.Result.EffectsSummary(); s.Min != 4 || s.Max != 4 {
		t.Errorf("effects per burst %d..%d, want 4 in every burst (the scheduler holds each act until all checked)", s.Min, s.Max)
	}
}

// Exploring a naive check-then-write in memory finds the four orders in
// which both checks come before either write; a mutex held across the
// check and the write leaves every order SAFE, its second check blocked.
func TestExploreOrdersTheSteps(t *testing.T) {
	naive := func(locked bool) Case {
		var mu sync.Mutex
		var lock sync.Mutex
		done := map[string]int{}
		return Case{
			Name:    "redeem",
			Subject: func(_ context.Context, b Burst) (any, error) { return b.Token(), nil },
			Attempt: func(_ context.Context, s any, w *Worker) Outcome {
				w.Step("check")
				if locked {
					lock.Lock()
					defer lock.Unlock()
				}
				mu.Lock()
				used := done[s.(string)] > 0
				mu.Unlock()
				if used {
					return From(Declined("already redeemed"))
				}
				w.Step("act")
				mu.Lock()
				done[s.(string)]++
				mu.Unlock()
				return From(nil)
			},
			Effects: func(_ context.Context, s any) (int, error) {
				mu.Lock()
				defer mu.Unlock()
				return done[s.(string)], nil
			},
		}
	}
	res, err := Explore(context.Background(), naive(false), explore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict() != explore.Race || res.Count().Violating != 4 || len(res.Orders) != 6 {
		t.Fatalf("naive: %s, %+v; want RACE in 4 of 6 orders", res.Verdict(), res.Count())
	}
	res = ExploreSafe(t, naive(true))
	if res.Count().Blocked == 0 {
		t.Errorf("locked: %+v; want the second check blocked on the lock in some order", res.Count())
	}
}

// One function per transaction: a writer that sets a value and puts it
// back, a reader that reads it twice and records what it saw. Explored,
// the reader's 3 steps and the writer's 2 give C(5,2) = 10 orders, and the
// orders where the reader reads between the writer's two steps break; a
// burst's workers alternate between the two functions.
func TestTransactionsAreOneFunctionPerWorker(t *testing.T) {
	var mu sync.Mutex
	value := map[string]int{}
	seen := map[string]int{}
	ran := map[int]string{}
	c := Case{
		Attempts: 4, Bursts: 3,
		Subject: func(_ context.Context, b Burst) (any, error) { return b.Token(), nil },
		Transactions: []func(ctx context.Context, s any, w *Worker) Outcome{
			func(_ context.Context, s any, w *Worker) Outcome { // the reader
				mu.Lock()
				ran[w.ID] = "reader"
				mu.Unlock()
				dirty := false
				for _, step := range []string{"read", "read again"} {
					w.Step(step)
					mu.Lock()
					dirty = dirty || value[s.(string)] != 0
					mu.Unlock()
				}
				w.Step("record")
				mu.Lock()
				defer mu.Unlock()
				seen[s.(string)] += 1 + b2i(dirty)
				return From(nil)
			},
			func(_ context.Context, s any, w *Worker) Outcome { // the writer, rolled back
				mu.Lock()
				ran[w.ID] = "writer"
				mu.Unlock()
				w.Step("update")
				mu.Lock()
				value[s.(string)] = 1
				mu.Unlock()
				w.Step("rollback")
				mu.Lock()
				value[s.(string)] = 0
				mu.Unlock()
				return From(nil)
			},
		},
		Effects: func(_ context.Context, s any) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return seen[s.(string)], nil
		},
	}
	res, err := Explore(context.Background(), c, explore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict() != explore.Race || res.Total != "10" || len(res.AttemptSteps[0]) != 3 || len(res.AttemptSteps[1]) != 2 {
		t.Fatalf("%s, %s orders, steps %v: want RACE among C(5,2) = 10 orders of 3 and 2 steps", res.Verdict(), res.Total, res.AttemptSteps)
	}
	if _, err := Run(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if ran[0] != "reader" || ran[1] != "writer" || ran[2] != "reader" || ran[3] != "writer" {
		t.Errorf("workers ran %v: want reader, writer, reader, writer", ran)
	}
	c.Attempt = c.Transactions[0]
	if _, err := Explore(context.Background(), c, explore.Options{}); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("Attempt and Transactions both set: %v, want a refusal", err)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// The report names where the case's state lives as the case says, and
// "func" when it says nothing: never a backend racetest did not see.
func TestReportNamesTheCaseBackend(t *testing.T) {
	c := newCoupons()
	one := c.caseFor(c.fixed)
	one.Attempts = 1 // INCONCLUSIVE: Test fails and prints its table
	for _, tc := range []struct{ backend, want string }{{"", "on func:"}, {"postgres", "on postgres:"}} {
		one.Backend = tc.backend
		f := newFakeT(t)
		call(f, Test, one)
		wantIn(t, "the failure", f.errText(), tc.want)
	}
}

// setShort runs the rest of t as if 'go test' had (or had not) been given
// -short, and puts the flag back when t ends. The tests that read a full
// run's figures (40 bursts) set it false, so that 'go test -short ./race'
// passes too.
func setShort(t *testing.T, short bool) {
	t.Helper()
	was := testing.Short()
	if err := flag.Set("test.short", fmt.Sprint(short)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { flag.Set("test.short", fmt.Sprint(was)) })
}

// Allowed: 3 is exactly three effects per burst, as --allowed 3 and a
// suite's allowed: 3 are; it read 1-3 here. A case that lands one effect
// per burst falls short of it, and the table says 3.
func TestAllowedIsExactlyThatMany(t *testing.T) {
	var mu sync.Mutex
	done := map[string]int{}
	c := Case{
		Name: "three per coupon", Attempts: 4, Bursts: 3, Allowed: 3,
		Subject: func(_ context.Context, b Burst) (any, error) { return b.Token(), nil },
		Attempt: func(_ context.Context, s any, _ *Worker) Outcome {
			mu.Lock()
			defer mu.Unlock()
			if done[s.(string)] > 0 {
				return From(Declined("already redeemed"))
			}
			done[s.(string)]++
			return From(nil)
		},
		Effects: func(_ context.Context, s any) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return done[s.(string)], nil
		},
	}
	rep, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != Lost || rep.Violations != rep.Bursts {
		t.Errorf("one effect per burst with Allowed: 3: %s, %d of %d bursts outside; want LOST in every burst\n%s", rep.Verdict, rep.Violations, rep.Bursts, rep)
	}
	if strings.Contains(rep.String(), "1-3") {
		t.Errorf("the table shows the allowance as a range:\n%s", rep)
	}
}
