package httpfire

import (
	"sync"
	"testing"
	"time"
)

// firedAt records how many attempts had arrived each time the release
// loop ran.
type firedAt struct {
	b  *burst
	mu sync.Mutex
	at []int32
}

func (f *firedAt) fire(time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.at = append(f.at, f.b.arrivedN.Load())
}

func (f *firedAt) fired() []int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int32(nil), f.at...)
}

// The release loop runs once, in the call of the last attempt to arrive:
// not before (the first would go alone), not releaseWait later, and the
// burst is not called late.
func TestReleaseRunsWhenTheLastAttemptArrives(t *testing.T) {
	b := newBurst(Vars{})
	f := &firedAt{b: b}
	b.releasers = []releaser{f}
	b.expected = 3
	b.arrive()
	b.arrive()
	if got := f.fired(); len(got) != 0 {
		t.Fatalf("the loop ran with %v of 3 attempts arrived, want it to wait for the third", got)
	}
	b.arrive()
	if got := f.fired(); len(got) != 1 || got[0] != 3 {
		t.Fatalf("after the third arrival the loop ran %v times (arrivals at each: %v), want once, at once", len(got), got)
	}
	time.Sleep(3 * releaseWait)
	if got := f.fired(); len(got) != 1 {
		t.Errorf("the loop ran %d times, want once", len(got))
	}
	if b.late.Load() {
		t.Error("every attempt arrived, yet the burst is called late")
	}
}

// An attempt that never arrives does not hold the others: the loop runs
// releaseWait after the first arrival, without it, and the burst says so.
func TestReleaseGoesWithoutAMissingAttempt(t *testing.T) {
	b := newBurst(Vars{})
	f := &firedAt{b: b}
	b.releasers = []releaser{f}
	b.expected = 2
	start := time.Now()
	b.arrive()
	deadline := time.Now().Add(10 * time.Second)
	for len(f.fired()) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := f.fired(); len(got) != 1 || got[0] != 1 {
		t.Fatalf("with one attempt of two arrived the loop ran %v times (arrivals: %v), want once, without the missing one", len(got), got)
	}
	if took := time.Since(start); took < releaseWait {
		t.Errorf("the loop ran %v after the first arrival, want it to wait releaseWait (%v) for the others", took, releaseWait)
	}
	if !b.late.Load() {
		t.Error("the loop ran without an attempt, and the burst is not called late")
	}
}

// sent keeps the earliest and the latest send of the burst, whatever the
// order the workers report them in, equal times included.
func TestSentKeepsTheFirstAndTheLastSend(t *testing.T) {
	b := newBurst(Vars{})
	t0 := time.Unix(100, 0)
	for _, d := range []time.Duration{2 * time.Second, 0, 5 * time.Second, time.Second, 0, 5 * time.Second} {
		b.sent(t0.Add(d))
	}
	if first, last := b.sentFirst.Load(), b.sentLast.Load(); first != t0.UnixNano() || last != t0.Add(5*time.Second).UnixNano() {
		t.Errorf("first %v, last %v; want %v and %v", time.Unix(0, first), time.Unix(0, last), t0, t0.Add(5*time.Second))
	}
}
