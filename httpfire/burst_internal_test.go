package httpfire

import (
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/racetest/racetest/runner"
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

// answer counts each response's status, keeps the response times it was
// given (0: not known, left out of the parallelism estimate), the first
// server and protocol named, and the span of the arrival stamps the server
// put on its responses (a stamp that is no positive number is none).
func TestAnswerRecordsWhatTheResponsesSay(t *testing.T) {
	b := newBurst(Vars{})
	hdr := func(server, arrival string) http.Header {
		h := http.Header{}
		if server != "" {
			h.Set("Server", server)
		}
		h.Set(ArrivalHeader, arrival)
		return h
	}
	b.answer(200, hdr("", "300"), "HTTP/1.1", 5*time.Millisecond)
	b.answer(409, hdr("first", "100"), "HTTP/2.0", 0)
	b.answer(200, hdr("second", "200"), "HTTP/1.1", time.Millisecond)
	b.answer(200, hdr("", "250"), "HTTP/1.1", time.Millisecond)
	for _, bad := range []string{"0", "-5", "x", ""} {
		b.answer(500, hdr("", bad), "HTTP/1.1", 0)
	}
	if got := b.answered.Load(); got != 8 {
		t.Errorf("%d answered, want 8", got)
	}
	if b.statuses[200] != 3 || b.statuses[409] != 1 || b.statuses[500] != 4 {
		t.Errorf("statuses %v, want 3×200, 1×409, 4×500", b.statuses)
	}
	if len(b.responses) != 3 {
		t.Errorf("response times %v, want the 3 known ones (0 is unknown)", b.responses)
	}
	if b.server != "first" || b.proto != "HTTP/2.0" {
		t.Errorf("server %q over %q, want the first named, %q over HTTP/2.0", b.server, b.proto, "first")
	}
	if b.arrivals != 4 || b.arriveFirst != 100 || b.arriveLast != 300 {
		t.Errorf("%d arrivals from %d to %d, want 4 from 100 to 300", b.arrivals, b.arriveFirst, b.arriveLast)
	}
}

// The spreads are the span from the first to the last send (client) and
// arrival stamp (server), known once there is a send, or two stamps.
func TestSpreadsSpanFirstToLast(t *testing.T) {
	b := newBurst(Vars{})
	if _, ok := b.clientSpread(); ok {
		t.Error("a client spread before any send")
	}
	t0 := time.Unix(100, 0)
	b.sent(t0.Add(3 * time.Millisecond))
	b.sent(t0)
	if d, ok := b.clientSpread(); !ok || d != 3*time.Millisecond {
		t.Errorf("client spread %v, %v; want 3ms", d, ok)
	}
	h := http.Header{}
	h.Set(ArrivalHeader, "1000")
	b.answer(200, h, "HTTP/1.1", 0)
	if _, ok := b.serverSpread(); ok {
		t.Error("a server spread from one stamp")
	}
	h.Set(ArrivalHeader, "1700")
	b.answer(200, h, "HTTP/1.1", 0)
	if d, ok := b.serverSpread(); !ok || d != 700 {
		t.Errorf("server spread %v, %v; want 700ns", d, ok)
	}
}

// outcome counts executed attempts and failed ones (errors and unknown
// outcomes), keeps the first error, and counts a refusal by the server as
// an answer, not a failure.
func TestOutcomeCountsAndKeepsTheFirstError(t *testing.T) {
	b := newBurst(Vars{})
	first, second := errors.New("first"), errors.New("second")
	b.outcome(runner.Done())
	b.outcome(runner.Failed(&rejectedError{status: 409}))
	b.outcome(runner.Failed(first))
	b.outcome(runner.Outcome{Class: runner.Unknown, Err: second})
	if b.executed.Load() != 1 || b.failed.Load() != 2 {
		t.Errorf("%d executed, %d failed; want 1 and 2 (a refusal is no failure)", b.executed.Load(), b.failed.Load())
	}
	if b.firstErr != first {
		t.Errorf("first error %v, want %v", b.firstErr, first)
	}
}
