package httpfire

import (
	"math"
	"testing"
	"time"

	"github.com/racetest/racetest/runner"
)

func ms(xs ...float64) []time.Duration {
	out := make([]time.Duration, len(xs))
	for i, x := range xs {
		out[i] = time.Duration(x * float64(time.Millisecond))
	}
	return out
}

// The estimator on the shapes it must tell apart: a one-at-a-time queue
// (responses one service time apart), w workers (w per step), all at
// once, and all at once with stragglers.
func TestParallelismEstimate(t *testing.T) {
	serial := make([]float64, 16) // one worker, 2 ms a request, 0.1 ms round trip
	two := make([]float64, 16)    // two workers
	for i := range serial {
		serial[i] = 0.1 + 2*float64(i+1)
		two[i] = 0.1 + 2*float64(i/2+1)
	}
	for _, c := range []struct {
		name     string
		took     []time.Duration
		lo, hi   float64
		estimate float64 // exact, when > 0
	}{
		{name: "none", took: nil, estimate: 0},
		{name: "one response", took: ms(3), estimate: 0},
		{name: "one worker", took: ms(serial...), lo: 1, hi: 1.1},
		{name: "one worker, shuffled", took: ms(serial[5], serial[0], serial[15], serial[9], serial[2], serial[1], serial[14], serial[3], serial[4], serial[6], serial[7], serial[8], serial[10], serial[11], serial[12], serial[13]), lo: 1, hi: 1.1},
		{name: "two workers", took: ms(two...), lo: 1.8, hi: 2.3},
		{name: "all at once", took: ms(2.1, 2.1, 2.2, 2.2, 2.3, 2.2, 2.1, 2.4, 2.2, 2.3, 2.2, 2.1, 2.5, 2.2, 2.2, 2.3), lo: 10, hi: 16},
		{name: "all at once, three stragglers", took: ms(2.1, 2.1, 2.2, 2.2, 2.3, 2.2, 2.1, 9, 2.2, 2.3, 2.2, 2.1, 14, 2.2, 2.2, 30), lo: 10, hi: 16},
		{name: "identical", took: ms(2, 2, 2, 2), estimate: 4},
		// Two or three: one response read late would look like a queue.
		{name: "pair, one at a time", took: ms(2, 4), estimate: 0},
		{name: "three, one at a time", took: ms(2, 4, 6), estimate: 0},
		// Four to seven: the median gap, which one straggler cannot make.
		{name: "four, one at a time", took: ms(2, 4, 6, 8), estimate: 1},
		{name: "four, together, one read late", took: ms(2, 2.2, 2.4, 12), estimate: 4},
		{name: "seven, one at a time", took: ms(2.1, 4.1, 6.1, 8.1, 10.1, 12.1, 14.1), lo: 1, hi: 1.1},
		{name: "seven, together, two read late", took: ms(2.1, 2.2, 2.4, 2.5, 2.6, 9, 20), lo: 7, hi: 7},
		// Eight: the quartiles, at index 1 and 6.
		{name: "eight, one at a time", took: ms(2, 4, 6, 8, 10, 12, 14, 16), estimate: 1},
		{name: "eight, two workers", took: ms(2, 2, 4, 4, 6, 6, 8, 8), lo: 1.6, hi: 2.2},
		// Uneven, so that the quartiles' indices matter: (14 - 2.1) / 5 is
		// the step, not (14 - 6) / 4.
		{name: "eight, uneven", took: ms(2, 2.1, 6, 8, 10, 12, 14, 16), estimate: 2 / (11.9 / 5)},
		// A step or a fastest response of no length cannot divide: all at once.
		{name: "all four at the same instant", took: ms(3, 3, 3, 3), estimate: 4},
		{name: "the fastest at zero", took: ms(0, 2, 4, 6), estimate: 4},
	} {
		got := parallelism(c.took)
		if c.lo == 0 && c.hi == 0 {
			if math.Abs(got-c.estimate) > 1e-9 {
				t.Errorf("%s: parallelism = %.3f, want %.3f", c.name, got, c.estimate)
			}
			continue
		}
		if got < c.lo || got > c.hi {
			t.Errorf("%s: parallelism = %.3f, want between %.1f and %.1f", c.name, got, c.lo, c.hi)
		}
	}
}

// A one-at-a-time server with jittery timings, at four to seven
// responses: one response a little late and the next a little early put
// two of them close together, and the gap between those is not the
// service time. The median gap is (the others are two service times or
// about one); the smallest gap would read the queue as concurrent (issue
// 48: the queues above are perfectly even, and gaps[0] lived).
func TestParallelismJitteredQueues(t *testing.T) {
	// 2 ms a request, 0.1 ms round trip; the 2nd response 0.8 ms late,
	// the 3rd 0.8 ms early: gaps 2.8, 0.4, 2.8, then 2 each.
	queue := []float64{2.1, 4.9, 5.3, 8.1, 10.1, 12.1, 14.1}
	for n := minResponses; n < minQuartiles; n++ {
		took := ms(queue[:n]...)
		took[0], took[n-1] = took[n-1], took[0] // in the order they were sent, not answered
		if got := parallelism(took); got <= 0 || got >= runner.SerialBelow {
			t.Errorf("%d responses of a jittery one-at-a-time server: parallelism %.2f, want one at a time (under %.1f)", n, got, runner.SerialBelow)
		}
	}
}
