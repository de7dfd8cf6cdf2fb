package report

import (
	"testing"
	"time"
)

// BurstsFor outside (0, 1) is 0 at once: a bound of 0 (no violation rate
// at all can be proved) once looped through every int when the check
// slipped to bound < 0 (issue 27), which a test saw only as a time-out.
func TestBurstsForOutsideTheOpenIntervalIsZeroAtOnce(t *testing.T) {
	for _, bound := range []float64{0, -0.5, 1, 1.5} {
		got := make(chan int, 1)
		go func() { got <- BurstsFor(bound) }()
		select {
		case n := <-got:
			if n != 0 {
				t.Errorf("BurstsFor(%g) = %d, want 0", bound, n)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("BurstsFor(%g) did not return within 2s (want 0 at once)", bound)
		}
	}
}
