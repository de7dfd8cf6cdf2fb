package runner

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// valueKey is a context value's key.
type valueKey struct{}

// oneWave is a wave's context on a clock of its own.
func oneWave(parent context.Context, timeout time.Duration) *waveCtx {
	return newWaveClock(parent, timeout).next()
}

// waitDone fails t unless ctx ends within a second.
func waitDone(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the context did not end")
	}
}

// The wave's context says what context.WithTimeoutCause(ctx, d, ErrTimeout)
// says, itself and through every context derived from it: a user's
// attempt that checks errors.Is(err, context.DeadlineExceeded), or the
// engine that checks context.Cause for ErrTimeout, sees no difference.
func TestWaveContextTimesOutAsWithTimeoutCause(t *testing.T) {
	c := oneWave(context.Background(), 20*time.Millisecond)
	defer c.release()
	if d, ok := c.Deadline(); !ok || time.Until(d) > 20*time.Millisecond || time.Until(d) < 10*time.Millisecond {
		t.Errorf("deadline %v, %v: want about 20ms from now", d, ok)
	}
	if s := fmt.Sprint(c); s != "runner.waveCtx(20ms)" {
		t.Errorf("the context prints as %q, want runner.waveCtx(20ms)", s)
	}
	child, cancelChild := context.WithCancel(c)
	defer cancelChild()
	timed, cancelTimed := context.WithTimeout(c, time.Hour)
	defer cancelTimed()
	valued := context.WithValue(c, valueKey{}, 1)
	ran := make(chan struct{})
	context.AfterFunc(c, func() { close(ran) })
	if c.Err() != nil || child.Err() != nil || context.Cause(c) != nil {
		t.Fatalf("ended before its time: %v, %v, %v", c.Err(), child.Err(), context.Cause(c))
	}
	if d, _ := timed.Deadline(); d != c.deadline {
		t.Errorf("a derived context's deadline %v, want the wave's %v", d, c.deadline)
	}
	c.arm()
	waitDone(t, c)
	waitDone(t, child)
	waitDone(t, timed)
	for name, ctx := range map[string]context.Context{"the wave's": c, "a derived": child, "a derived with its own timeout": timed, "a valued": valued} {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Errorf("%s context's Err %v, want context.DeadlineExceeded", name, ctx.Err())
		}
		if !errors.Is(context.Cause(ctx), ErrTimeout) {
			t.Errorf("%s context's cause %v, want ErrTimeout", name, context.Cause(ctx))
		}
	}
	select {
	case <-ran:
	case <-time.After(time.Second):
		t.Error("context.AfterFunc's function did not run")
	}
}

// Until it is armed, no timer runs: the release pays no clock read for
// it. Armed late, the deadline still counts from when it was made.
func TestWaveContextWaitsForArm(t *testing.T) {
	c := oneWave(context.Background(), time.Millisecond)
	defer c.release()
	time.Sleep(5 * time.Millisecond)
	if c.Err() != nil || c.clock.timer != nil {
		t.Fatalf("ended (%v) or timer set (%v) before arm", c.Err(), c.clock.timer)
	}
	start := time.Now()
	c.arm()
	waitDone(t, c)
	if late := time.Since(start); late > 500*time.Millisecond {
		t.Errorf("armed after its deadline, it ended %v later, want at once", late)
	}
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Errorf("Err %v, want context.DeadlineExceeded", c.Err())
	}
}

// The run's context ending (Ctrl-C, a --duration) ends the wave's, with
// the run's error and cause; release ends it as a cancel does.
func TestWaveContextEndsWithItsParent(t *testing.T) {
	parent, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("interrupted")
	c := oneWave(parent, time.Hour)
	defer c.release()
	child, cancelChild := context.WithCancel(c)
	defer cancelChild()
	cancel(stop)
	waitDone(t, c)
	waitDone(t, child)
	for name, ctx := range map[string]context.Context{"the wave's": c, "a derived": child} {
		if !errors.Is(ctx.Err(), context.Canceled) || !errors.Is(context.Cause(ctx), stop) {
			t.Errorf("%s context: Err %v, cause %v; want context.Canceled and the run's cause", name, ctx.Err(), context.Cause(ctx))
		}
	}

	r := oneWave(context.Background(), time.Hour)
	rchild, cancelR := context.WithCancel(r)
	defer cancelR()
	r.arm()
	r.release()
	waitDone(t, rchild)
	if !errors.Is(r.Err(), context.Canceled) || !errors.Is(rchild.Err(), context.Canceled) {
		t.Errorf("released: Err %v, a derived one's %v; want context.Canceled", r.Err(), rchild.Err())
	}
	if r.clock.timer.Stop() {
		t.Error("release left the timer running")
	}
	// Armed once it has ended (a wire wave whose run was interrupted during
	// its release), no timer starts: it would end a later wave's cause.
	gone := oneWave(context.Background(), time.Millisecond)
	gone.release()
	gone.arm()
	if gone.clock.timer != nil {
		t.Error("a context armed after its end started the timer")
	}

	// A parent with an earlier deadline gives it.
	early, cancelEarly := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancelEarly()
	e := oneWave(early, time.Hour)
	defer e.release()
	if d, _ := e.Deadline(); d.After(time.Now().Add(time.Second)) {
		t.Errorf("deadline %v: want the parent's, earlier", d)
	}
	waitDone(t, e)
	if !errors.Is(e.Err(), context.DeadlineExceeded) {
		t.Errorf("the parent's deadline passed: Err %v, want context.DeadlineExceeded", e.Err())
	}
}

// A derived context registers with the wave's (AfterFunc), as with a
// standard one: no goroutine waits for each, and one cancelled on its own
// unregisters.
func TestWaveContextDerivedCostNoGoroutine(t *testing.T) {
	c := oneWave(context.Background(), time.Hour)
	defer c.release()
	before := runtime.NumGoroutine()
	var cancels []context.CancelFunc
	for range 100 {
		_, cancel := context.WithCancel(c)
		cancels = append(cancels, cancel)
	}
	if got := runtime.NumGoroutine() - before; got > 10 {
		t.Errorf("100 derived contexts started %d goroutines, want none", got)
	}
	if len(c.funcs) != 100 {
		t.Errorf("%d registered, want 100", len(c.funcs))
	}
	for _, cancel := range cancels {
		cancel()
	}
	if len(c.funcs) != 0 {
		t.Errorf("%d still registered after their cancels, want 0", len(c.funcs))
	}
	c.release()
	// Registered after the end: it runs at once.
	_, cancel := context.WithCancel(c)
	defer cancel()
	ran := make(chan struct{})
	if stop := c.AfterFunc(func() { close(ran) }); stop() {
		t.Error("stop after the end reported it stopped a function")
	}
	select {
	case <-ran:
	case <-time.After(time.Second):
		t.Error("a function registered after the end never ran")
	}
}

// The engine's waves: an attempt blocked on its context ends at the
// timeout, and reads context.DeadlineExceeded through a context it derived,
// as a driver would.
func TestWaveTimeoutReachesDerivedContexts(t *testing.T) {
	var seen []error
	tg := newCounter()
	tg.attempt = func(ctx context.Context, _ Subject, _ *Worker) Outcome {
		q, cancel := context.WithCancel(ctx) // a driver's per-query context
		defer cancel()
		<-q.Done()
		seen = append(seen, q.Err())
		return Failed(q.Err())
	}
	res, err := Run(context.Background(), tg, Attempts(1), Bursts(1), Timeout(30*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || !errors.Is(seen[0], context.DeadlineExceeded) {
		t.Errorf("the attempt's derived context said %v, want context.DeadlineExceeded", seen)
	}
	if res.Bursts[0].Outcomes[Unknown] != 1 {
		t.Errorf("outcomes %v, want the timed-out attempt unknown", res.Bursts[0].Outcomes)
	}
}

// A run's waves share one registration with its context and one timer: a
// wave released before its deadline is not ended by the timer reset for
// the next, and after a wave timed out the next starts afresh.
func TestWaveClockServesWaveAfterWave(t *testing.T) {
	k := newWaveClock(context.Background(), 300*time.Millisecond)
	defer k.close()
	first := k.next()
	first.arm()
	first.release()
	second := k.next()
	second.arm()
	k.fire() // late, as the first wave's timer would be
	if second.Err() != nil {
		t.Fatalf("the second wave ended early: %v", second.Err())
	}
	waitDone(t, second)
	if !errors.Is(second.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(second), ErrTimeout) {
		t.Fatalf("the second wave: %v, cause %v; want its timeout", second.Err(), context.Cause(second))
	}
	if !errors.Is(first.Err(), context.Canceled) {
		t.Errorf("the first wave, released: %v, want context.Canceled", first.Err())
	}
	third := k.next()
	if third.Err() != nil || context.Cause(third) != nil {
		t.Fatalf("the wave after a timeout starts ended: %v, cause %v", third.Err(), context.Cause(third))
	}
	// Released, it says so: the timeout before it is not its cause.
	third.release()
	if c := context.Cause(third); !errors.Is(c, context.Canceled) {
		t.Errorf("the wave released after a timed-out one: cause %v, want context.Canceled", c)
	}
	fourth := k.next()
	fourth.arm()
	waitDone(t, fourth)
	if !errors.Is(context.Cause(fourth), ErrTimeout) {
		t.Errorf("the fourth wave's cause %v, want ErrTimeout", context.Cause(fourth))
	}

	// Interrupted: the running wave ends with the run's error, and one made
	// after ends at once.
	parent, cancel := context.WithCancel(context.Background())
	k2 := newWaveClock(parent, time.Hour)
	defer k2.close()
	running := k2.next()
	cancel()
	waitDone(t, running)
	if late := k2.next(); !errors.Is(late.Err(), context.Canceled) {
		t.Errorf("a wave made after the interrupt: %v, want context.Canceled", late.Err())
	}
}
