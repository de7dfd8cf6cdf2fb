package httpfire

import (
	"slices"
	"time"
)

// parallelism estimates, from a burst's response times (each request's time
// from leaving the client to its response being read), how many requests
// the server handled at once.
//
// A server that handles one request at a time queues the rest: the k-th
// response comes back after k service times, so the sorted response times
// climb in steps of one service time S, and the fastest is about S. A
// server with w workers answers w per step: the steps are S/w. A server
// that handles them all at once answers them all after about S. The
// estimate is therefore the fastest response time divided by the step
// between successive responses:
//
//	parallelism ≈ fastest ÷ step ≈ S ÷ (S/w) = w
//
// The step is measured over the middle half of the sorted response times
// (from the lower to the upper quartile), so that a few stragglers — an
// attempt the client's scheduler woke late on a loaded machine — move it
// little. Under minQuartiles responses the quartiles are the extremes, and
// the step is the median gap between successive responses instead: one
// straggler cannot make it. The estimate is capped at the number of
// responses. It errs towards "at once": the fastest response also carries
// the round trip, so a one-at-a-time server whose service time is no
// longer than the round trip reads as two or more.
//
// It returns 0 — cannot tell — under minResponses responses: with two or
// three, one response read late looks like a queue.
func parallelism(responses []time.Duration) float64 {
	n := len(responses)
	if n < minResponses {
		return 0
	}
	r := slices.Clone(responses)
	slices.Sort(r)
	var step float64
	if n < minQuartiles {
		gaps := make([]time.Duration, n-1)
		for i := range gaps {
			gaps[i] = r[i+1] - r[i]
		}
		slices.Sort(gaps)
		step = float64(gaps[len(gaps)/2])
	} else {
		lo, hi := (n-1)/4, (3*(n-1)+3)/4
		step = float64(r[hi]-r[lo]) / float64(hi-lo)
	}
	// A fastest response of no length cannot be divided; a step of none
	// (every response at one instant) divides to +Inf: all at once.
	if r[0] <= 0 {
		return float64(n)
	}
	return min(float64(n), float64(r[0])/step)
}

// minResponses is the fewest answered requests the parallelism is
// estimated from; minQuartiles the fewest whose quartiles are not their
// extremes.
const (
	minResponses = 4
	minQuartiles = 8
)
