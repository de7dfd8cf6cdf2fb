package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// counter is a target whose attempts all "execute" after an optional pause,
// with effects kept apart from what the workers report.
type counter struct {
	mu       sync.Mutex
	effects  map[string]int
	pause    time.Duration
	opens    atomic.Int32
	closes   atomic.Int32
	prepared bool
	cleaned  bool
	// attempt, when set, replaces the default attempt.
	attempt func(ctx context.Context, s Subject, w *Worker) Outcome
	// effectsOverride, when set, replaces the store count.
	effectsOverride func(s Subject) int
}

func newCounter() *counter { return &counter{effects: map[string]int{}} }

func (c *counter) Prepare(context.Context) error { c.prepared = true; return nil }
func (c *counter) Cleanup(context.Context) error { c.cleaned = true; return nil }
func (c *counter) Reset(_ context.Context, b int) (Subject, error) {
	return Subject{Burst: b, Key: fmt.Sprint("k", b)}, nil
}
func (c *counter) Effects(_ context.Context, s Subject) (int, error) {
	if c.effectsOverride != nil {
		return c.effectsOverride(s), nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.effects[s.Key], nil
}
func (c *counter) Open(context.Context, int, int) (App, error) {
	c.opens.Add(1)
	return &counterApp{c}, nil
}

type counterApp struct{ c *counter }

func (a *counterApp) Session(context.Context, int) (Session, error) { return (*counterSession)(a), nil }
func (a *counterApp) Close() error                                  { a.c.closes.Add(1); return nil }

type counterSession counterApp

func (*counterSession) Close() error { return nil }
func (a *counterSession) Attempt(ctx context.Context, s Subject, w *Worker) Outcome {
	if a.c.attempt != nil {
		return a.c.attempt(ctx, s, w)
	}
	w.Mark("act")
	if a.c.pause > 0 {
		time.Sleep(a.c.pause)
	}
	a.c.mu.Lock()
	a.c.effects[s.Key]++
	a.c.mu.Unlock()
	return Done()
}

func TestRunCountsEffectsFromTheStore(t *testing.T) {
	c := newCounter()
	// 20ms, not 2: on 2 shared cores under load a goroutine can wait
	// milliseconds for a thread, and the four must still be in flight together.
	c.pause = 20 * time.Millisecond
	res, err := Run(context.Background(), c, Attempts(4), Bursts(5))
	if err != nil {
		t.Fatal(err)
	}
	if !c.prepared || !c.cleaned {
		t.Errorf("prepared=%v cleaned=%v, want both", c.prepared, c.cleaned)
	}
	if len(res.Bursts) != 5 || res.Violations() != 5 {
		t.Fatalf("bursts=%d violations=%d, want 5 and 5", len(res.Bursts), res.Violations())
	}
	for _, b := range res.Bursts {
		if b.Effects != 4 || b.Outcomes[Executed] != 4 {
			t.Errorf("burst %d: effects %d executed %d, want 4 and 4", b.Index, b.Effects, b.Outcomes[Executed])
		}
		// Every attempt sleeps 20ms after a release within microseconds:
		// all four must have been in flight together.
		if b.Overlap != 4 {
			t.Errorf("burst %d: overlap %d, want 4", b.Index, b.Overlap)
		}
	}
	if ex := res.Example; ex == nil || len(ex.Workers) != 4 || ex.Workers[0].Marks[0].Name != "released" ||
		ex.Workers[0].Marks[len(ex.Workers[0].Marks)-1].Name != "done" {
		t.Fatalf("example trace = %+v, want 4 workers with released…done marks", ex)
	}
}

func TestEffectsAreNotWhatWorkersBelieve(t *testing.T) {
	c := newCounter()
	c.effectsOverride = func(Subject) int { return 0 } // the store saw nothing
	res, err := Run(context.Background(), c, Attempts(3), Bursts(2))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.EffectsSummary().Max; got != 0 {
		t.Errorf("effects max = %d, want 0 (counted in the store, not from outcomes)", got)
	}
	if got := res.Outcomes()[Executed]; got != 6 {
		t.Errorf("executed outcomes = %d, want 6", got)
	}
}

func TestExampleIsTheWorstBurst(t *testing.T) {
	c := newCounter()
	c.effectsOverride = func(s Subject) int { return []int{1, 3, 2, 3}[s.Burst] }
	res, err := Run(context.Background(), c, Attempts(2), Bursts(4))
	if err != nil {
		t.Fatal(err)
	}
	if res.Example.Burst != 1 || res.Example.Effects != 3 {
		t.Errorf("example = burst %d with %d effects, want the first worst: burst 1 with 3", res.Example.Burst, res.Example.Effects)
	}
}

func TestReplicasWavesAndDeploy(t *testing.T) {
	c := newCounter()
	res, err := Run(context.Background(), c, Attempts(6), Bursts(2), Replicas(3), Waves(2), Deploy(true))
	if err != nil {
		t.Fatal(err)
	}
	// 3 replicas opened at the start, and again before the second wave of each burst.
	if got := c.opens.Load(); got != 3+2*3 {
		t.Errorf("replicas opened %d times, want 9", got)
	}
	if c.opens.Load() != c.closes.Load() {
		t.Errorf("opened %d, closed %d: every replica must be closed", c.opens.Load(), c.closes.Load())
	}
	if got := res.Bursts[0].Outcomes[Executed]; got != 12 {
		t.Errorf("executed in burst 0 = %d, want 12 (2 waves of 6)", got)
	}
	seen := map[int]bool{}
	for _, w := range res.Example.Workers {
		seen[w.Replica] = true
	}
	if len(seen) != 3 {
		t.Errorf("workers used replicas %v, want all 3", seen)
	}
}

type allowing struct{ *counter }

func (allowing) Allowed(Subject, [NumClasses]int) int { return 10 }

func TestAllowancer(t *testing.T) {
	c := newCounter()
	res, err := Run(context.Background(), allowing{c}, Attempts(4), Bursts(2))
	if err != nil {
		t.Fatal(err)
	}
	if res.Violations() != 0 || res.Bursts[0].Allowed != 10 {
		t.Errorf("violations %d allowed %d, want 0 and 10", res.Violations(), res.Bursts[0].Allowed)
	}
}

func TestInterruptKeepsFinishedBursts(t *testing.T) {
	c := newCounter()
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int32
	c.attempt = func(ctx context.Context, s Subject, w *Worker) Outcome {
		if s.Burst == 3 && n.Add(1) == 1 {
			cancel()
		}
		c.mu.Lock()
		c.effects[s.Key]++
		c.mu.Unlock()
		return Done()
	}
	res, err := Run(ctx, c, Attempts(2), Bursts(100))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if !res.Interrupted || len(res.Bursts) != 3 {
		t.Errorf("interrupted=%v bursts=%d, want true and 3 (the burst in flight is discarded)", res.Interrupted, len(res.Bursts))
	}
	if !c.cleaned {
		t.Error("cleanup did not run after the interrupt")
	}
}

func TestTimeoutMakesUnknown(t *testing.T) {
	c := newCounter()
	c.attempt = func(ctx context.Context, s Subject, w *Worker) Outcome {
		<-ctx.Done()
		return Failed(ctx.Err())
	}
	res, err := Run(context.Background(), c, Attempts(2), Bursts(1), Timeout(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Outcomes()[Unknown]; got != 2 {
		t.Errorf("unknown outcomes = %d, want 2: a timed-out attempt may have run", got)
	}
}

func TestHungSessionDoesNotHangTheRun(t *testing.T) {
	old := hangGrace
	hangGrace = 20 * time.Millisecond
	defer func() { hangGrace = old }()
	c := newCounter()
	release := make(chan struct{})
	defer close(release)
	c.attempt = func(context.Context, Subject, *Worker) Outcome { <-release; return Done() }
	_, err := Run(context.Background(), c, Attempts(2), Bursts(1), Timeout(10*time.Millisecond))
	if !errors.Is(err, ErrHung) {
		t.Fatalf("err = %v, want ErrHung", err)
	}
}

// lockedSession is a session whose Close waits for its attempt, as a
// database/sql connection waits for the call that holds it.
type lockedSession struct {
	mu      sync.Mutex
	release chan struct{}
}

func (s *lockedSession) Attempt(context.Context, Subject, *Worker) Outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	<-s.release
	return Done()
}

func (s *lockedSession) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return nil
}

// lockedApp gives worker 0 the locked session, and the others the
// counter's.
type lockedApp struct {
	s *lockedSession
	c *counter
}

func (a lockedApp) Session(_ context.Context, worker int) (Session, error) {
	if worker == 0 {
		return a.s, nil
	}
	return (*counterSession)(&counterApp{a.c}), nil
}
func (lockedApp) Close() error { return nil }

type lockedTarget struct {
	*counter
	s *lockedSession
}

func (t lockedTarget) Open(context.Context, int, int) (App, error) {
	return lockedApp{t.s, t.counter}, nil
}

// An attempt stuck in a call that ignores its context (the MySQL driver's
// COMMIT on a paused server) holds its connection; closing that connection
// must not hold the run for ever: the run ends, cleans up, and says it
// abandoned the connection, and only that one (the other two closed).
func TestStuckSessionDoesNotHoldTheClose(t *testing.T) {
	oldGrace, oldClose := hangGrace, closeTimeout
	hangGrace, closeTimeout = 20*time.Millisecond, 50*time.Millisecond
	defer func() { hangGrace, closeTimeout = oldGrace, oldClose }()
	c := newCounter()
	s := &lockedSession{release: make(chan struct{})}
	defer close(s.release)
	done := make(chan struct{})
	var res *Result
	var err error
	go func() {
		defer close(done)
		res, err = Run(context.Background(), lockedTarget{c, s}, Attempts(3), Bursts(1), Timeout(10*time.Millisecond))
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not end: closing a stuck session held it")
	}
	if !errors.Is(err, ErrHung) {
		t.Fatalf("err = %v, want ErrHung", err)
	}
	if !c.cleaned {
		t.Error("cleanup did not run")
	}
	if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.HasPrefix(n, "1 connection(s) did not close within 50ms") }) {
		t.Errorf("no note says the one stuck connection was abandoned: %q", res.Notes)
	}
}

func TestValidate(t *testing.T) {
	for _, o := range []Option{Attempts(0), Bursts(0), Replicas(0), Waves(0), Allowed(-1), Timeout(-1)} {
		_, err := Run(context.Background(), newCounter(), o)
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("err = %v, want a ConfigError", err)
		}
	}
}

func TestInFlight(t *testing.T) {
	mk := func(from, to time.Duration) *Worker {
		return &Worker{marks: []Mark{{"released", from}, {"done", to}}}
	}
	for _, c := range []struct {
		ws   []*Worker
		want int
	}{
		{[]*Worker{mk(0, 10), mk(10, 20), mk(20, 30)}, 1}, // touching is not overlapping
		{[]*Worker{mk(0, 10), mk(5, 20), mk(6, 7)}, 3},
		{[]*Worker{mk(0, 10), mk(11, 20), mk(15, 30)}, 2},
	} {
		if got := inFlight(c.ws, &edges{}); got != c.want {
			t.Errorf("inFlight = %d, want %d", got, c.want)
		}
	}
}

func TestClassifiers(t *testing.T) {
	if o := Failed(context.DeadlineExceeded); o.Class != Unknown {
		t.Errorf("deadline → %s, want unknown", o.Class)
	}
	if o := Failed(errors.New("boom")); o.Class != Error {
		t.Errorf("boom → %s, want error", o.Class)
	}
	if Refused(nil).Class != Declined || Retry(nil).Class != Conflict || Done().Class != Executed {
		t.Error("constructors map to the wrong classes")
	}
}

// TopUp fires one more burst for each that did not test the guard, up to
// twice the plan; without it the run fires the plan and no more.
func TestTopUpReplacesUntestedBursts(t *testing.T) {
	c := newCounter()
	c.pause = 20 * time.Millisecond // in flight together, even under load
	c.attempt = func(ctx context.Context, s Subject, w *Worker) Outcome {
		time.Sleep(c.pause)
		if s.Burst == 1 || s.Burst == 3 {
			return Refused(nil) // no attempt executed: the guard was not tested
		}
		return Done()
	}
	c.effectsOverride = func(Subject) int { return 1 }
	var last Progress
	res, err := Run(context.Background(), c, Attempts(2), Bursts(5), TopUp(true), OnProgress(func(p Progress) { last = p }))
	if err != nil {
		t.Fatal(err)
	}
	if last.Done != len(res.Bursts) || last.Total != len(res.Bursts) {
		t.Errorf("last progress %d of %d after %d bursts: a bar must end full at the bursts fired", last.Done, last.Total, len(res.Bursts))
	}
	untested := len(res.Bursts) - res.Tested()
	if untested < 2 || len(res.Bursts) != min(10, 5+untested) || res.Planned != 5 {
		t.Fatalf("fired %d bursts (%d untested, planned %d), want the 5 planned and one more per untested burst", len(res.Bursts), untested, res.Planned)
	}
	if res.Tested() == 5 && !slices.ContainsFunc(res.Notes, func(n string) bool {
		return strings.Contains(n, fmt.Sprintf("%d bursts fired beyond the 5 planned", untested)) && strings.Contains(n, fmt.Sprintf("(5 of %d did)", 5+untested))
	}) {
		t.Errorf("notes %q do not say the run fired %d bursts beyond its plan", res.Notes, untested)
	}

	c.attempt = nil
	res, err = Run(context.Background(), c, Attempts(2), Bursts(5), TopUp(true))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Bursts) == 5 && len(res.Notes) != 0 {
		t.Errorf("every burst tested the guard, yet notes %q", res.Notes)
	}

	c.attempt = func(context.Context, Subject, *Worker) Outcome { time.Sleep(c.pause); return Refused(nil) } // no burst ever tests the guard
	res, err = Run(context.Background(), c, Attempts(2), Bursts(5), TopUp(true))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Bursts) != 10 {
		t.Errorf("fired %d bursts when none tested the guard, want twice the plan: 10", len(res.Bursts))
	}
	res, err = Run(context.Background(), c, Attempts(2), Bursts(5))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Bursts) != 5 || len(res.Notes) != 0 {
		t.Errorf("without TopUp: fired %d bursts, notes %q; want the 5 planned and no note", len(res.Bursts), res.Notes)
	}
}

// failingPrepare is a counter whose Prepare fails with err, after cancel.
type failingPrepare struct {
	*counter
	cancel context.CancelCauseFunc
	err    error
}

func (f failingPrepare) Prepare(context.Context) error {
	if f.cancel != nil {
		f.cancel(errors.New("the user pressed Ctrl-C"))
	}
	return f.err
}

// A setup step that fails because the run was cancelled returns the
// cancellation's cause and marks the result interrupted; one that fails on
// its own returns its own error, and the run is not interrupted.
func TestSetupFailureIsAnInterruptOnlyWhenTheRunWasCancelled(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	res, err := Run(ctx, failingPrepare{newCounter(), cancel, context.Canceled}, Attempts(2), Bursts(3))
	if err == nil || err.Error() != "the user pressed Ctrl-C" || !res.Interrupted {
		t.Errorf("cancelled during prepare: err %v, interrupted %v; want the cancellation's cause, interrupted", err, res.Interrupted)
	}
	res, err = Run(context.Background(), failingPrepare{counter: newCounter(), err: errors.New("no such table")}, Attempts(2), Bursts(3))
	if err == nil || err.Error() != "prepare: no such table" || res.Interrupted {
		t.Errorf("prepare failed: err %v, interrupted %v; want 'prepare: no such table', not interrupted", err, res.Interrupted)
	}
}

// sessionFails is a counter whose worker 3 cannot open its session.
type sessionFails struct{ *counter }

func (s sessionFails) Open(ctx context.Context, replica, workers int) (App, error) {
	app, err := s.counter.Open(ctx, replica, workers)
	return failingSessionApp{app}, err
}

type failingSessionApp struct{ App }

func (a failingSessionApp) Session(ctx context.Context, worker int) (Session, error) {
	if worker == 3 {
		return nil, errors.New("too many connections")
	}
	return a.App.Session(ctx, worker)
}

// A worker whose session cannot open stops the run before its first burst,
// with an error that names the worker and the replica it belongs to.
func TestASessionThatCannotOpenNamesItsWorkerAndReplica(t *testing.T) {
	res, err := Run(context.Background(), sessionFails{newCounter()}, Attempts(4), Bursts(3), Replicas(2))
	if err == nil || err.Error() != "replica 1, worker 3: too many connections" {
		t.Fatalf("err = %v, want 'replica 1, worker 3: too many connections'", err)
	}
	if len(res.Bursts) != 0 {
		t.Errorf("%d bursts fired without every session open", len(res.Bursts))
	}
}
