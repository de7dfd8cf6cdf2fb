package runner

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// waveCtx is a wave's attempt context: the run's context bounded by the
// attempt timeout, as context.WithTimeoutCause(ctx, timeout, ErrTimeout)
// bounds it — its deadline counts from when it is made, Err is
// context.DeadlineExceeded once it passed, Cause is ErrTimeout, and a
// context derived from it says the same — except that its timer is armed
// by arm, not when it is made.
//
// A timer in a P's heap makes the scheduler read the clock at every
// goroutine switch on that P (runtime.(*timers).check), and on a VM whose
// clock is slow (kvm-clock: 136 ns a read) that is what kept the engine's
// release spread at N=16 at 1.6× the bare reference's, against 1.3× with no
// timeout (docs/measurements.md). The engine arms the timer once
// every worker of the wave has been released, so that the release pays no
// clock read for it.
//
// The cause goes through inner, a context.WithCancelCause of the parent:
// context.Cause finds a context's cause only in the standard library's own
// cancel contexts, which Value leads it to. Done is waveCtx's own channel,
// so that a derived context registers with AfterFunc below (the standard
// library's hook for a parent of another type) and is cancelled with
// waveCtx's Err, context.DeadlineExceeded; attached to inner, it would say
// context.Canceled.
type waveCtx struct {
	clock    *waveClock
	inner    context.Context
	cancel   context.CancelCauseFunc
	deadline time.Time

	mu    sync.Mutex
	done  chan struct{}
	err   error
	funcs map[*afterFunc]struct{}
	armed bool
}

// afterFunc is a function registered with waveCtx.AfterFunc.
type afterFunc struct{ f func() }

// waveClock is what a run's wave contexts share, so that a wave costs two
// allocations (its context and Done's channel) where a
// context.WithTimeoutCause cost four: inner and its registration with the
// run's context, kept until a wave times out (its cause is then set, for
// good), and one timer, reset for each wave. Waves come one after another:
// cur is the one now running.
type waveClock struct {
	parent  context.Context
	timeout time.Duration
	inner   context.Context
	cancel  context.CancelCauseFunc
	stop    func() bool
	timer   *time.Timer
	cur     atomic.Pointer[waveCtx]
}

func newWaveClock(parent context.Context, timeout time.Duration) *waveClock {
	return &waveClock{parent: parent, timeout: timeout}
}

// next makes the next wave's context, bounded by the timeout from now; its
// timer waits for arm.
func (k *waveClock) next() *waveCtx {
	if k.inner == nil || k.inner.Err() != nil {
		k.close()
		k.inner, k.cancel = context.WithCancelCause(k.parent)
		// The run's context ending ends the running wave's, with its
		// error; inner's own cancel (a wave's timeout) does not.
		k.stop = context.AfterFunc(k.inner, k.parentDone)
	}
	c := &waveCtx{clock: k, inner: k.inner, cancel: k.cancel, deadline: time.Now().Add(k.timeout), done: make(chan struct{})}
	k.cur.Store(c)
	if err := k.parent.Err(); err != nil {
		c.end(err)
	}
	return c
}

func (k *waveClock) parentDone() {
	if err := k.parent.Err(); err != nil {
		if c := k.cur.Load(); c != nil {
			c.end(err)
		}
	}
}

// fire is the timer's: the running wave's deadline passed. A late call
// (the timer was reset for a later wave) finds its deadline ahead.
func (k *waveClock) fire() {
	if c := k.cur.Load(); c != nil && !time.Now().Before(c.deadline) {
		c.expire()
	}
}

// close ends what the waves shared: at the end of the run (a nil k, no
// timeout, has nothing to end).
func (k *waveClock) close() {
	if k == nil || k.inner == nil {
		return
	}
	k.stop()
	k.cancel(context.Canceled)
	if k.timer != nil {
		k.timer.Stop()
	}
}

// arm starts the timer: the context ends at its deadline, still counted
// from when it was made. A nil c (no timeout) has nothing to arm.
func (c *waveCtx) arm() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil || c.armed {
		return
	}
	c.armed = true
	k := c.clock
	if k.timer == nil {
		k.timer = time.AfterFunc(time.Until(c.deadline), k.fire)
	} else {
		k.timer.Reset(time.Until(c.deadline))
	}
}

// expire ends the context at its deadline: the cause first, so that
// whoever sees Done closed finds it.
func (c *waveCtx) expire() {
	c.cancel(ErrTimeout)
	c.end(context.DeadlineExceeded)
}

// release ends the context (its CancelFunc): Err is context.Canceled. A
// nil c (no timeout) has nothing to end.
func (c *waveCtx) release() {
	if c == nil {
		return
	}
	c.end(context.Canceled)
}

// end closes Done with err, once, and runs what derived contexts
// registered.
func (c *waveCtx) end(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	close(c.done)
	if c.armed {
		c.clock.timer.Stop()
	}
	funcs := c.funcs
	c.funcs = nil
	c.mu.Unlock()
	for a := range funcs {
		a.f()
	}
}

func (c *waveCtx) Deadline() (time.Time, bool) {
	if d, ok := c.inner.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

func (c *waveCtx) Done() <-chan struct{} { return c.done }

func (c *waveCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *waveCtx) Value(key any) any { return c.inner.Value(key) }

// AfterFunc arranges for f to run once the context ends, and returns a
// function that stops it: the hook through which the standard library
// cancels a context derived from one of another type (a cancelCtx's
// children are cancelled in the same way, synchronously) without a
// goroutine per derived context. f runs in its own goroutine when the
// context has already ended, as context.AfterFunc does: the standard
// library registers f while it holds the derived context's lock.
func (c *waveCtx) AfterFunc(f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		go f()
		return func() bool { return false }
	}
	a := &afterFunc{f: f}
	if c.funcs == nil {
		c.funcs = make(map[*afterFunc]struct{})
	}
	c.funcs[a] = struct{}{}
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, ok := c.funcs[a]; !ok {
			return false
		}
		delete(c.funcs, a)
		return true
	}
}

func (c *waveCtx) String() string { return "runner.waveCtx(" + c.clock.timeout.String() + ")" }
