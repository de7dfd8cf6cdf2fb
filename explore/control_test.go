package explore

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// drive2 runs two attempts of two steps each ("s1", "s2") under one
// controller, in the order seq, with probe as the server's answer to "does
// attempt w wait on a lock?"; work(w, step) is what attempt w does once
// granted step. It returns the steps as drive recorded them.
func drive2(t *testing.T, seq []int, blockAfter time.Duration, probe func(context.Context, int) (bool, error), work func(w, step int)) []Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := newController(2)
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Step(ctx, w, "s1")
			work(w, 1)
			c.Step(ctx, w, "s2")
			work(w, 2)
			c.Done(w)
		}()
	}
	ran := c.drive(ctx, seq, 0, blockAfter, probe, nil)
	if ctx.Err() != nil {
		t.Fatalf("the order did not end: %v (steps %+v)", ctx.Err(), ran)
	}
	wg.Wait()
	return ran
}

// blockedSteps lists the steps recorded as blocked, as "A2".
func blockedSteps(ran []Event) []string {
	var out []string
	for _, e := range ran {
		if e.Blocked {
			out = append(out, string(rune('A'+e.Worker))+string(rune('0'+e.Step)))
		}
	}
	return out
}

// lockWork makes A's second step wait on a lock that B's second step
// releases, as a row lock held by B's transaction would; holding says A
// waits on it.
func lockWork() (work func(w, step int), holding *atomic.Bool) {
	holding = new(atomic.Bool)
	lock := make(chan struct{})
	return func(w, step int) {
		switch {
		case w == 0 && step == 2:
			holding.Store(true)
			<-lock
			holding.Store(false)
		case w == 1 && step == 2:
			close(lock)
		}
	}, holding
}

// Where the server can say, a step is blocked when it says the step waits
// on a lock, however soon; the next step goes ahead, and the blocked one
// comes back once the lock is released.
func TestABlockedStepIsWhatTheServerSays(t *testing.T) {
	work, holding := lockWork()
	probe := func(_ context.Context, w int) (bool, error) { return w == 0 && holding.Load(), nil }
	ran := drive2(t, []int{0, 0, 1, 1}, time.Hour, probe, work)
	if got := blockedSteps(ran); len(got) != 1 || got[0] != "A2" {
		t.Errorf("blocked %v, want [A2] (steps %+v)", got, ran)
	}
}

// A step the server says is not waiting on a lock is not blocked, however
// long it takes: the timer is only for servers that cannot say.
func TestASlowStepTheServerSaysRunsIsNotBlocked(t *testing.T) {
	work := func(w, step int) {
		if w == 0 && step == 2 {
			time.Sleep(30 * time.Millisecond)
		}
	}
	probe := func(context.Context, int) (bool, error) { return false, nil }
	ran := drive2(t, []int{0, 0, 1, 1}, time.Millisecond, probe, work)
	if got := blockedSteps(ran); len(got) != 0 {
		t.Errorf("blocked %v, want none: the server said every step ran (steps %+v)", got, ran)
	}
}

// When the server does not answer, the timer decides: a step still out
// after blockAfter is blocked, one back before it is not.
func TestAProbeThatFailsLeavesItToTheTimer(t *testing.T) {
	failing := func(context.Context, int) (bool, error) { return false, errors.New("server gone") }
	work, _ := lockWork()
	ran := drive2(t, []int{0, 0, 1, 1}, 50*time.Millisecond, failing, work)
	if got := blockedSteps(ran); len(got) != 1 || got[0] != "A2" {
		t.Errorf("a lock wait, the probe failing: blocked %v, want [A2] (steps %+v)", got, ran)
	}
	slow := func(w, step int) {
		if w == 0 && step == 2 {
			time.Sleep(20 * time.Millisecond) // past the first probe, well within blockAfter
		}
	}
	ran = drive2(t, []int{0, 0, 1, 1}, 5*time.Second, failing, slow)
	if got := blockedSteps(ran); len(got) != 0 {
		t.Errorf("a step back in 20 ms, the probe failing, blockAfter 5 s: blocked %v, want none (steps %+v)", got, ran)
	}
}

// The timer a failed probe leaves is blockAfter from when the step went,
// not from when the probe gave up: a probe that took 300 ms of a 500 ms
// blockAfter leaves 200 ms, so a step still out at 650 ms is blocked.
func TestTheTimerCountsTheTimeSpentProbing(t *testing.T) {
	failing := func(context.Context, int) (bool, error) {
		time.Sleep(300 * time.Millisecond)
		return false, errors.New("server gone")
	}
	slow := func(w, step int) {
		if w == 0 && step == 2 {
			time.Sleep(650 * time.Millisecond)
		}
	}
	ran := drive2(t, []int{0, 0, 1, 1}, 500*time.Millisecond, failing, slow)
	if got := blockedSteps(ran); len(got) != 1 || got[0] != "A2" {
		t.Errorf("blocked %v, want [A2]: out 650 ms against a 500 ms blockAfter (steps %+v)", got, ran)
	}
}

// A probe that took longer than blockAfter leaves no time: a step still
// waiting on a lock is blocked at once, not waited for.
func TestAProbeSlowerThanBlockAfterLeavesNoTime(t *testing.T) {
	failing := func(context.Context, int) (bool, error) {
		time.Sleep(100 * time.Millisecond)
		return false, errors.New("server gone")
	}
	work, _ := lockWork()
	ran := drive2(t, []int{0, 0, 1, 1}, 10*time.Millisecond, failing, work)
	if got := blockedSteps(ran); len(got) != 1 || got[0] != "A2" {
		t.Errorf("blocked %v, want [A2] (steps %+v)", got, ran)
	}
}

// An order's entries for an attempt that already returned are dropped, and
// the first entry after them goes next: with A done after one step, the
// order A A B A C B C runs A1 B1 C1 B2 C2, never C before B.
func TestEntriesOfAReturnedAttemptAreSkippedInOrder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := newController(3)
	steps := []int{1, 2, 2}
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range steps[w] {
				c.Step(ctx, w, "s"+string(rune('1'+i)))
			}
			c.Done(w)
		}()
	}
	ran := c.drive(ctx, []int{0, 0, 1, 0, 2, 1, 2}, 0, time.Hour, nil, nil)
	wg.Wait()
	var got []string
	for _, e := range ran {
		got = append(got, string(rune('A'+e.Worker))+string(rune('0'+e.Step)))
	}
	if want := []string{"A1", "B1", "C1", "B2", "C2"}; !slices.Equal(got, want) {
		t.Errorf("ran %v, want %v", got, want)
	}
}
