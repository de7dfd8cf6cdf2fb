package explore

import (
	"testing"

	"github.com/racetest/racetest/runner"
)

// An order in which every attempt failed or timed out took no effect and
// decided nothing: it is neither LOST (nobody claimed the work done) nor
// evidence of SAFE. One claimed-done attempt with no effect is LOST.
func TestNothingDecidedIsNeitherLostNorSafe(t *testing.T) {
	failed := Order{Effects: 0, Allowed: 1, Required: 1, Attempts: []Attempt{{Outcome: runner.Unknown}, {Outcome: runner.Error}}}
	r := &Result{Allowed: 1, Required: 1, Orders: []Order{failed}}
	if v := r.Verdict(); v != Inconclusive {
		t.Fatalf("every attempt failed or timed out: verdict %s, want INCONCLUSIVE", v)
	}
	ok := Order{Effects: 1, Allowed: 1, Required: 1, Attempts: []Attempt{{Outcome: runner.Executed}, {Outcome: runner.Declined}}}
	if v := (&Result{Allowed: 1, Required: 1, Orders: []Order{ok}}).Verdict(); v != Safe {
		t.Fatalf("one executed, one declined, one effect: verdict %s, want SAFE", v)
	}
	claimed := Order{Effects: 0, Allowed: 1, Required: 1, Attempts: []Attempt{{Outcome: runner.Declined}, {Outcome: runner.Error}}}
	if v := (&Result{Allowed: 1, Required: 1, Orders: []Order{claimed}}).Verdict(); v != Lost {
		t.Fatalf("declined as done with no effect: verdict %s, want LOST", v)
	}
}
