package explore

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/racetest/racetest/runner"
)

// store is a tiny shared store: effects per subject, and one lock per
// subject that an attempt may hold across its steps.
type store struct {
	mu       sync.Mutex
	effects  map[string]int
	locks    map[string]chan struct{}
	resets   int
	prepared bool
	cleaned  bool
	// cleanErr and cleanLeft: the cleanup context's error and time left.
	cleanErr  error
	cleanLeft time.Duration
	attempt   func(ctx context.Context, st *store, s runner.Subject, w *runner.Worker) runner.Outcome
}

func newStore(attempt func(ctx context.Context, st *store, s runner.Subject, w *runner.Worker) runner.Outcome) *store {
	return &store{effects: map[string]int{}, locks: map[string]chan struct{}{}, attempt: attempt}
}

func (st *store) count(k string) int { st.mu.Lock(); defer st.mu.Unlock(); return st.effects[k] }
func (st *store) add(k string)       { st.mu.Lock(); defer st.mu.Unlock(); st.effects[k]++ }
func (st *store) lock(k string) chan struct{} {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.locks[k] == nil {
		st.locks[k] = make(chan struct{}, 1)
	}
	return st.locks[k]
}

func (st *store) Prepare(context.Context) error { st.prepared = true; return nil }
func (st *store) Open(context.Context, int, int) (runner.App, error) {
	return app{st}, nil
}
func (st *store) Reset(_ context.Context, b int) (runner.Subject, error) {
	st.mu.Lock()
	st.resets++
	st.mu.Unlock()
	return runner.Subject{Burst: b, Key: fmt.Sprint("s", b)}, nil
}
func (st *store) Effects(_ context.Context, s runner.Subject) (int, error) {
	return st.count(s.Key), nil
}
func (st *store) Cleanup(ctx context.Context) error {
	st.cleaned, st.cleanErr = true, ctx.Err()
	if d, ok := ctx.Deadline(); ok {
		st.cleanLeft = time.Until(d)
	}
	return nil
}

type app struct{ st *store }

func (a app) Session(context.Context, int) (runner.Session, error) { return sess(a), nil }
func (app) Close() error                                           { return nil }

type sess struct{ st *store }

func (s sess) Attempt(ctx context.Context, subj runner.Subject, w *runner.Worker) runner.Outcome {
	return s.st.attempt(ctx, s.st, subj, w)
}
func (sess) Close() error { return nil }

// naive: read, and if free, write.
func naive(ctx context.Context, st *store, s runner.Subject, w *runner.Worker) runner.Outcome {
	w.Step(ctx, "check")
	if st.count(s.Key) > 0 {
		return runner.Refused(errors.New("already"))
	}
	w.Step(ctx, "act")
	st.add(s.Key)
	return runner.Done()
}

// locked: take the subject's lock in the check (as SELECT … FOR UPDATE on
// an existing row does), write and release in the act.
func locked(ctx context.Context, st *store, s runner.Subject, w *runner.Worker) runner.Outcome {
	w.Step(ctx, "check")
	l := st.lock(s.Key)
	select {
	case l <- struct{}{}:
	case <-ctx.Done():
		return runner.Failed(context.Cause(ctx))
	}
	if st.count(s.Key) > 0 {
		<-l
		return runner.Refused(errors.New("already"))
	}
	w.Step(ctx, "act")
	st.add(s.Key)
	<-l
	return runner.Done()
}

func TestNaiveCheckThenWriteRacesInExactlyTheOrdersThatInterleave(t *testing.T) {
	st := newStore(naive)
	var counted string
	// A probe far longer than any step here: nothing blocks, and a loaded
	// machine must not make a slow step look blocked.
	res, err := Run(context.Background(), st, Options{Attempts: 2, BlockAfter: time.Second, Counted: func(r *Result) error {
		counted = r.Total
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if counted != "6" || res.Planned != 6 || len(res.Orders) != 6 {
		t.Fatalf("counted %s, planned %d, ran %d orders: want C(4,2) = 6 of each", counted, res.Planned, len(res.Orders))
	}
	if got := strings.Join(res.Steps, ","); got != "check,act" {
		t.Errorf("steps %q, want check,act", got)
	}
	if st.resets != 6 || !st.cleaned {
		t.Errorf("resets %d (want a fresh subject per order: 6), cleaned %v", st.resets, st.cleaned)
	}
	// Of the 6 orders, the 4 where both checks precede both acts break.
	c := res.Count()
	if c.Explored != 6 || c.Violating != 4 || c.Blocked != 0 {
		t.Fatalf("counts %+v, want 6 explored, 4 violating, 0 blocked", c)
	}
	if res.Verdict() != Race {
		t.Fatalf("verdict %s, want RACE", res.Verdict())
	}
	want := map[string]bool{"A1 B1 A2 B2": true, "A1 B1 B2 A2": true, "B1 A1 A2 B2": true, "B1 A1 B2 A2": true}
	for _, o := range res.Violating() {
		if !want[o.Schedule] || o.Effects != 2 {
			t.Errorf("violating order %s with %d effects: want one of %v with 2", o.Schedule, o.Effects, want)
		}
	}
	for _, o := range res.Orders {
		if !want[o.Planned] && o.Effects != 1 {
			t.Errorf("serial-ish order %s left %d effects, want 1", o.Planned, o.Effects)
		}
	}
}

func TestLockedCheckBlocksAndIsSafe(t *testing.T) {
	st := newStore(locked)
	res, err := Run(context.Background(), st, Options{Attempts: 2, BlockAfter: 200 * time.Millisecond, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if v := res.Verdict(); v != Safe {
		t.Fatalf("verdict %s (%s), want SAFE", v, res.Why())
	}
	if !strings.HasPrefix(res.Why(), SafeScope) {
		t.Errorf("why %q does not claim exactly %q", res.Why(), SafeScope)
	}
	c := res.Count()
	// A1 B1 … : B's check waits on A's lock: blocked, A goes on.
	// (A loaded machine may make a quick step look blocked too: at least.)
	if c.Explored != 6 || c.Blocked < 4 {
		t.Fatalf("counts %+v, want 6 explored and (at least) the 4 orders with both checks first blocked", c)
	}
	for _, o := range res.Orders {
		if o.Planned == "A1 B1 A2 B2" {
			if !strings.HasPrefix(o.Schedule, "A1 B1 A2") || !o.Ran[1].Blocked {
				t.Errorf("A1 B1 A2 B2 ran as %q (%+v): want B1 blocked, then A2, and B's act never reached", o.Schedule, o.Ran)
			}
		}
	}
}

func TestReplayRunsOneOrder(t *testing.T) {
	st := newStore(naive)
	seq, err := ParseSchedule("B1 A1 B2 A2", 2)
	if err != nil {
		t.Fatal(err)
	}
	var paced []string
	res, err := Run(context.Background(), st, Options{Attempts: 2, BlockAfter: time.Second, Schedule: seq, Pace: func(e Event) { paced = append(paced, e.Label()) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Orders) != 1 || res.Orders[0].Effects != 2 || res.Orders[0].Schedule != "B1 A1 B2 A2" {
		t.Fatalf("replay ran %+v, want one order B1 A1 B2 A2 with 2 effects", res.Orders)
	}
	if strings.Join(paced, " ") != "B1 A1 B2 A2" {
		t.Errorf("paced %v, want each step announced before it goes", paced)
	}
	// The in-memory store cannot say that a step waits on a lock: the
	// timer tells, and the result says so.
	if res.Blocking != "timer" || !strings.Contains(res.note, "--block-after 1s counts as blocked") {
		t.Errorf("blocking %q (%s), want the timer's", res.Blocking, res.note)
	}
	// The cleanup runs on a context of its own, with up to 30 s.
	if !st.cleaned || st.cleanErr != nil || st.cleanLeft <= 20*time.Second || st.cleanLeft > 30*time.Second {
		t.Errorf("cleanup: ran %v, context error %v, %v left; want a live context with up to 30 s", st.cleaned, st.cleanErr, st.cleanLeft)
	}
}

func TestNoStepsIsRefused(t *testing.T) {
	st := newStore(func(_ context.Context, st *store, s runner.Subject, _ *runner.Worker) runner.Outcome {
		st.add(s.Key)
		return runner.Done()
	})
	_, err := Run(context.Background(), st, Options{Attempts: 2})
	var ns NoStepsError
	if !errors.As(err, &ns) || !st.cleaned {
		t.Fatalf("err %v, cleaned %v: want NoStepsError and the store cleaned", err, st.cleaned)
	}
}

func TestTooManyOrdersAreRefusedOrCapped(t *testing.T) {
	st := newStore(naive)
	_, err := Run(context.Background(), st, Options{Attempts: 3, MaxSchedules: 50})
	var tm *TooManyError
	if !errors.As(err, &tm) || tm.Orders.Cmp(big.NewInt(90)) != 0 {
		t.Fatalf("err %v: want a TooManyError with 90 orders", err)
	}
	st = newStore(naive)
	res, err := Run(context.Background(), st, Options{Attempts: 3, MaxSchedules: 50, Cap: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Orders) != 50 || res.Unexplored != "40" {
		t.Fatalf("ran %d, unexplored %s: want 50 and 40", len(res.Orders), res.Unexplored)
	}
	if res.Verdict() != Race {
		t.Errorf("verdict %s: a violation found among the explored is RACE", res.Verdict())
	}
}

func TestEnumerationPrunesOnlyEquivalentOrders(t *testing.T) {
	count := func(n, k int, indep func(a, i, b, j int) bool) (kept, pruned int) {
		ks := make([]int, n)
		for i := range ks {
			ks[i] = k
		}
		pruned = enumerate(ks, indep, func([]int) bool { kept++; return true })
		return
	}
	for _, tc := range []struct{ n, k int }{{2, 2}, {2, 3}, {3, 2}, {3, 3}} {
		kept, pruned := count(tc.n, tc.k, nil)
		want := Orders(tc.n, tc.k).Int64()
		if int64(kept) != want || pruned != 0 {
			t.Errorf("%d×%d: %d orders (%d pruned), want %d", tc.n, tc.k, kept, pruned, want)
		}
		// Only the first step (a read) commutes with other reads.
		reads := func(_, i, _, j int) bool { return i == 0 && j == 0 }
		kept, pruned = count(tc.n, tc.k, reads)
		if int64(kept+pruned) != want || pruned == 0 {
			t.Errorf("%d×%d with reads first: kept %d + pruned %d, want a total of %d and some pruned", tc.n, tc.k, kept, pruned, want)
		}
	}
	// Two attempts, read then write: A1 B1 … and B1 A1 … are one class
	// each way: 6 orders, 4 classes.
	kept, _ := count(2, 2, func(_, i, _, j int) bool { return i == 0 && j == 0 })
	if kept != 4 {
		t.Errorf("2×2 with the reads commuting: kept %d, want 4 (B1 A1 A2 B2 is A1 B1 A2 B2; B1 A1 B2 A2 is A1 B1 B2 A2)", kept)
	}
}

func TestParseSchedule(t *testing.T) {
	for _, bad := range []string{"", "A2 A1", "C1", "A", "Ax", "A1 A1"} {
		if _, err := ParseSchedule(bad, 2); err == nil {
			t.Errorf("%q parsed; want an error", bad)
		}
	}
	seq, err := ParseSchedule("a1, b1 → A2 B2", 2)
	if err != nil || Format(seq) != "A1 B1 A2 B2" {
		t.Errorf("got %v %v", seq, err)
	}
}

// An attempt that never finishes its step is abandoned at the timeout:
// the order is reported, nothing waits forever, and the verdict claims
// nothing.
func TestAHungAttemptIsAbandonedAtTheTimeout(t *testing.T) {
	st := newStore(func(ctx context.Context, st *store, s runner.Subject, w *runner.Worker) runner.Outcome {
		w.Step(ctx, "check")
		w.Step(ctx, "act")
		if w.ID == 1 {
			<-ctx.Done() // a lock that is never released
			return runner.Failed(context.Cause(ctx))
		}
		st.add(s.Key)
		return runner.Done()
	})
	start := time.Now()
	res, err := Run(context.Background(), st, Options{Attempts: 2, BlockAfter: 10 * time.Millisecond, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Count()
	if c.Explored != 6 || c.Abandoned != 6 || res.Verdict() != Inconclusive || !strings.Contains(res.Why(), "abandoned at --timeout") {
		t.Fatalf("counts %+v, verdict %s (%s): want all 6 orders abandoned and INCONCLUSIVE", c, res.Verdict(), res.Why())
	}
	if took := time.Since(start); took > 6*(200*time.Millisecond+hangGrace) {
		t.Errorf("took %s: an abandoned order must end at its timeout", took)
	}
}

// Far too many orders even to count are refused, or with --cap the first
// ones run and the rest are reported unexplored.
func TestHugeOrderCountsAreCappedWithoutEnumerating(t *testing.T) {
	chain := func(ctx context.Context, st *store, s runner.Subject, w *runner.Worker) runner.Outcome {
		for i := range 9 {
			w.Step(ctx, fmt.Sprint("s", i))
		}
		if w.ID == 0 {
			st.add(s.Key)
		}
		return runner.Done()
	}
	_, err := Run(context.Background(), newStore(chain), Options{Attempts: 3})
	var tm *TooManyError
	if !errors.As(err, &tm) || tm.Orders.String() != "227873431500" {
		t.Fatalf("err %v: want a refusal naming 27!/(9!)^3 = 227873431500 orders", err)
	}
	res, err := Run(context.Background(), newStore(chain), Options{Attempts: 3, MaxSchedules: 5, Cap: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Orders) != 5 || res.Unexplored != "227873431495" || res.Verdict() != Inconclusive {
		t.Fatalf("ran %d, unexplored %s, verdict %s: want 5, 227873431495, INCONCLUSIVE", len(res.Orders), res.Unexplored, res.Verdict())
	}
}

// --max-schedules is the most orders that run: exactly that many run, one
// more is refused (issue 27: a boundary slip refused exactly the cap).
func TestExactlyMaxSchedulesOrdersRun(t *testing.T) {
	res, err := Run(context.Background(), newStore(naive), Options{Attempts: 2, MaxSchedules: 6})
	if err != nil {
		t.Fatalf("6 orders with --max-schedules 6: %v (want them run)", err)
	}
	if len(res.Orders) != 6 || res.Unexplored != "" {
		t.Fatalf("ran %d, unexplored %q: want all 6 and none left", len(res.Orders), res.Unexplored)
	}
	_, err = Run(context.Background(), newStore(naive), Options{Attempts: 2, MaxSchedules: 5})
	var tm *TooManyError
	if !errors.As(err, &tm) || tm.Orders.Cmp(big.NewInt(6)) != 0 {
		t.Fatalf("err %v: want a TooManyError with 6 orders over the 5 allowed", err)
	}
}

// A replay naming a step past an attempt's end is refused before it runs,
// with the step and the attempt's length named.
func TestReplayOfAStepThatDoesNotExistIsRefused(t *testing.T) {
	seq, err := ParseSchedule("A1 A2 A3 B1 B2", 2)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), newStore(naive), Options{Attempts: 2, BlockAfter: time.Second, Schedule: seq})
	var se *StepError
	if !errors.As(err, &se) || se.Step != "A3" || se.Steps != 2 ||
		!strings.Contains(err.Error(), "--schedule names A3, but attempt A takes 2 steps (A1..A2)") {
		t.Fatalf("err %v: want A3 refused, attempt A taking 2 steps", err)
	}
}

// The refusal of too many orders says how many, how many before the
// reduction when it spared some, the shape, and the three ways out.
func TestTooManyErrorSaysHowManyAndWhatToDo(t *testing.T) {
	e := &TooManyError{Orders: big.NewInt(90), Total: big.NewInt(90), Max: 50, Steps: []string{"check", "act"}, N: 3}
	if got, want := e.Error(), "3 attempts × 2 steps (check, act) have 90 orders, more than --max-schedules 50: raise --max-schedules, use fewer attempts, or add --cap to explore the first 50 (verdict INCONCLUSIVE)"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	e.Total, e.Shape = big.NewInt(252), "A: 2 steps (a, b); B: 3 steps (a, b, c)"
	if got, want := e.Error(), "A: 2 steps (a, b); B: 3 steps (a, b, c) have 252 orders (90 once those equivalent to another by swapping steps that commute are left out), more than"; !strings.HasPrefix(got, want) {
		t.Errorf("got  %s\nwant %s…", got, want)
	}
}
