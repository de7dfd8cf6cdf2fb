package report

import (
	"strings"
	"testing"

	"github.com/racetest/racetest/runner"
)

// A counted burst (no solo twin) that executed but left no effect and
// never had two attempts in flight is untested for want of overlap: only
// a twin burst is untested for "changed nothing watched" (kills the
// || mutant of that condition).
func TestUntestedWithoutTwinIsNeverNoEffect(t *testing.T) {
	b := runner.Burst{Overlap: 1, Outcomes: [runner.NumClasses]int{runner.Executed: 1, runner.Declined: 3}}
	r := &runner.Result{Attempts: 4, Bursts: []runner.Burst{b, b, b}}
	got := untested(r, 0)
	if want := "only 0 of 3 bursts had two attempts in flight at once"; !strings.HasPrefix(got, want) {
		t.Errorf("untested = %q, want it to start %q", got, want)
	}
}
