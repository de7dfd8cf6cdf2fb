package race

import (
	"context"
	"sync"
	"testing"

	"github.com/racetest/racetest/explore"
	"github.com/racetest/racetest/runner"
)

// naiveRedeem is a check-then-write in memory, marked with steps.
func naiveRedeem(attempts, allowed int) Case {
	var mu sync.Mutex
	done := map[string]int{}
	return Case{
		Name: "redeem", Attempts: attempts, Allowed: allowed,
		Subject: func(_ context.Context, b Burst) (any, error) { return b.Token(), nil },
		Attempt: func(_ context.Context, s any, w *Worker) Outcome {
			w.Step("check")
			mu.Lock()
			used := done[s.(string)]
			mu.Unlock()
			if used >= max(allowed, 1) {
				return From(Declined("already redeemed"))
			}
			w.Step("act")
			mu.Lock()
			done[s.(string)]++
			mu.Unlock()
			return From(nil)
		},
		Effects: func(_ context.Context, s any) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return done[s.(string)], nil
		},
	}
}

// Explore's defaults come from the case: three attempts when the case has
// three (two otherwise, whatever N the bursts use), and the case's own
// allowance, so that a case allowing two effects is never explored as
// allowing one (issue 27).
func TestExploreTakesItsDefaultsFromTheCase(t *testing.T) {
	for _, tc := range []struct {
		attempts, allowed         int
		wantAttempts, wantAllowed int
		wantOrders                int
		want                      explore.Verdict
	}{
		{0, 0, 2, 1, 6, explore.Race},  // N unset: two attempts, exactly once
		{16, 1, 2, 1, 6, explore.Race}, // a case sized for bursts explores with two
		{3, 1, 3, 1, 90, explore.Race}, // a case of three explores three
		{2, 2, 2, 2, 6, explore.Safe},  // two allowed: two writers are fine
		{3, 2, 3, 2, 90, explore.Race}, // three writers are not
	} {
		res, err := Explore(context.Background(), naiveRedeem(tc.attempts, tc.allowed), explore.Options{})
		if err != nil {
			t.Fatalf("attempts %d, allowed %d: %v", tc.attempts, tc.allowed, err)
		}
		if res.Attempts != tc.wantAttempts || res.Allowed != tc.wantAllowed || res.Required != tc.wantAllowed ||
			len(res.Orders) != tc.wantOrders || res.Verdict() != tc.want {
			t.Errorf("case attempts %d, allowed %d: explored %d attempts, allowed %d, required %d, %d orders, %s; want %d, %d, %d, %d, %s",
				tc.attempts, tc.allowed, res.Attempts, res.Allowed, res.Required, len(res.Orders), res.Verdict(),
				tc.wantAttempts, tc.wantAllowed, tc.wantAllowed, tc.wantOrders, tc.want)
		}
	}
	// Options given are kept.
	res, err := Explore(context.Background(), naiveRedeem(3, 2), explore.Options{Attempts: 2, Allowed: 1, Required: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Attempts != 2 || res.Allowed != 1 || res.Verdict() != explore.Race {
		t.Errorf("options given: %d attempts, allowed %d, %s; want 2, 1, RACE", res.Attempts, res.Allowed, res.Verdict())
	}
}

// Options that set either bound are taken as given: an allowance of two
// with no floor is not replaced by the case's exactly-once.
func TestExploreKeepsTheBoundsGiven(t *testing.T) {
	res, err := Explore(context.Background(), naiveRedeem(2, 1), explore.Options{Allowed: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Allowed != 2 || res.Required != 0 || res.Verdict() != explore.Safe {
		t.Errorf("Options{Allowed: 2}: explored allowing %d, requiring %d, %s; want 2, 0, SAFE", res.Allowed, res.Required, res.Verdict())
	}
}

// A case that leaves Attempts and Bursts at 0 runs the engine's defaults:
// 16 attempts in each of 100 bursts.
func TestACaseWithoutSizesRunsTheDefaults(t *testing.T) {
	c := newCoupons()
	cs := c.caseFor(c.fixed)
	cs.Attempts, cs.Bursts = 0, 0
	res, err := run(context.Background(), cs)
	if err != nil {
		t.Fatal(err)
	}
	if res.Attempts != 16 || len(res.Bursts) != 100 {
		t.Errorf("ran %d bursts of %d attempts, want 100 of 16", len(res.Bursts), res.Attempts)
	}
}

// A case where no effect is correct says so as its bursts do,
// runner.Allowed(0) and runner.Required(0) in Options; explore keeps
// those 0s (it took them for "unset" and judged by exactly once, so an
// order of one effect was SAFE).
func TestExploreKeepsAnAllowanceOfZero(t *testing.T) {
	c := naiveRedeem(2, 1) // one effect in the serial orders
	c.Options = []runner.Option{runner.Allowed(0), runner.Required(0)}
	res, err := Explore(context.Background(), c, explore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Allowed != 0 || res.Required != 0 || res.Verdict() != explore.Race {
		t.Errorf("runner.Allowed(0): explored allowing %d, requiring %d, %s; want 0, 0, RACE", res.Allowed, res.Required, res.Verdict())
	}
}
