package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// The defaults and the small rules the verdict rests on, each pinned by a
// test that fails when its one line slips (issue 27).

// deadlineTarget is a counter that records the deadline its attempts and
// its Cleanup were given.
type deadlineTarget struct {
	*counter
	mu              sync.Mutex
	attemptLeft     []time.Duration
	attemptNone     int
	cleanupLeft     time.Duration
	cleanupDeadline bool
}

func (d *deadlineTarget) Cleanup(ctx context.Context) error {
	dl, ok := ctx.Deadline()
	d.cleanupDeadline, d.cleanupLeft = ok, time.Until(dl)
	return d.counter.Cleanup(ctx)
}

// By default each attempt has DefaultTimeout (10 s, the flags' default too)
// to finish: an attempt without a deadline would hang a run on a server
// that stopped answering.
func TestAttemptsHaveTheDefaultTimeout(t *testing.T) {
	d := &deadlineTarget{counter: newCounter()}
	d.attempt = func(ctx context.Context, s Subject, w *Worker) Outcome {
		dl, ok := ctx.Deadline()
		d.mu.Lock()
		defer d.mu.Unlock()
		if !ok {
			d.attemptNone++
		} else {
			d.attemptLeft = append(d.attemptLeft, time.Until(dl))
		}
		return Done()
	}
	res, err := Run(context.Background(), d, Attempts(2), Bursts(1))
	if err != nil {
		t.Fatal(err)
	}
	if res.Timeout != 10*time.Second {
		t.Errorf("the result's timeout %s, want the default 10s", res.Timeout)
	}
	if d.attemptNone != 0 || len(d.attemptLeft) != 2 {
		t.Fatalf("%d attempts without a deadline, %d with: want every attempt to have one", d.attemptNone, len(d.attemptLeft))
	}
	for _, left := range d.attemptLeft {
		if left <= 5*time.Second || left > 10*time.Second {
			t.Errorf("an attempt had %s left, want just under the default 10s", left)
		}
	}
}

// Cleanup runs with its own bound (30 s), even after the run's context
// was cancelled (Ctrl-C): it must have time to drop what the run made.
func TestCleanupHasItsOwnTime(t *testing.T) {
	d := &deadlineTarget{counter: newCounter()}
	ctx, cancel := context.WithCancel(context.Background())
	d.attempt = func(context.Context, Subject, *Worker) Outcome { cancel(); return Done() }
	Run(ctx, d, Attempts(2), Bursts(3))
	if !d.cleaned {
		t.Fatal("Cleanup did not run after an interrupt")
	}
	if !d.cleanupDeadline || d.cleanupLeft <= 20*time.Second || d.cleanupLeft > 30*time.Second {
		t.Errorf("Cleanup had a deadline %v with %s left: want one just under 30s", d.cleanupDeadline, d.cleanupLeft)
	}
}

// StopOnViolation stops at the first burst over the allowance, and only
// there: a clean burst never stops the run, and without the option a
// violation does not either.
func TestStopOnViolationStopsAtTheFirstViolationOnly(t *testing.T) {
	for _, stop := range []bool{true, false} {
		c := newCounter()
		// Bursts 0-2 leave one effect, burst 3 two.
		c.effectsOverride = func(s Subject) int {
			if s.Burst == 3 {
				return 2
			}
			return 1
		}
		res, err := Run(context.Background(), c, Attempts(2), Bursts(8), StopOnViolation(stop))
		if err != nil {
			t.Fatal(err)
		}
		want := 8
		if stop {
			want = 4
		}
		if len(res.Bursts) != want || res.Stopped != stop {
			t.Errorf("StopOnViolation(%v): %d bursts, stopped %v; want %d, stopped %v", stop, len(res.Bursts), res.Stopped, want, stop)
		}
	}
}

// A timed-out attempt may have run: it is unknown, never an error, whether
// the attempt says so with the context's deadline or with ErrTimeout.
func TestATimedOutAttemptIsUnknown(t *testing.T) {
	for _, err := range []error{ErrTimeout, fmt.Errorf("insert: %w", ErrTimeout), context.DeadlineExceeded, fmt.Errorf("x: %w", context.DeadlineExceeded)} {
		if o := Failed(err); o.Class != Unknown {
			t.Errorf("Failed(%v) is %v, want unknown", err, o.Class)
		}
	}
	if o := Failed(errors.New("connection refused")); o.Class != Error {
		t.Errorf("Failed(connection refused) is %v, want error", o.Class)
	}
	// An attempt whose own error does not say it timed out, returned after
	// the engine's timeout fired, is unknown too.
	c := newCounter()
	c.attempt = func(ctx context.Context, s Subject, w *Worker) Outcome {
		<-ctx.Done()
		return Failed(errors.New("the driver's own words"))
	}
	res, err := Run(context.Background(), c, Attempts(2), Bursts(1), Timeout(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if o := res.Bursts[0].Outcomes; o[Unknown] != 2 || o[Error] != 0 {
		t.Errorf("outcomes %v: want 2 unknown, none an error", o)
	}
}

// A run with no options has the shape the flags and the docs promise: 100
// bursts of 16 attempts, one replica, one wave, exactly one effect allowed
// and required.
func TestARunWithoutOptionsHasTheDocumentedShape(t *testing.T) {
	c := newCounter()
	c.attempt = func(context.Context, Subject, *Worker) Outcome { return Done() }
	res, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Bursts) != 100 || res.Attempts != 16 || res.Replicas != 1 || res.Waves != 1 ||
		res.Allowed != 1 || res.Required != 1 || c.opens.Load() != 1 {
		t.Errorf("%d bursts of %d attempts, %d replica(s) (%d opened), %d wave(s), allowed %d, required %d; want 100 of 16, 1 (1), 1, 1, 1",
			len(res.Bursts), res.Attempts, res.Replicas, c.opens.Load(), res.Waves, res.Allowed, res.Required)
	}
	if n := res.Bursts[0].Outcomes[Executed]; n != 16 {
		t.Errorf("burst 0: %d attempts executed, want 16", n)
	}
}
