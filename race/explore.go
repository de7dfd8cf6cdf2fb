package race

import (
	"context"
	"errors"
	"testing"

	"github.com/racetest/racetest/explore"
	"github.com/racetest/racetest/runner"
)

// Explore runs c's attempts step by step, in every order of the steps
// they mark with w.Step, one step at a time, each order at a fresh subject
// (see package explore). opts.Attempts is the number of attempts, 2 or 3
// (when 0: 3 if c.Attempts is 3 or there are 3 Transactions, else 2); Bursts do not apply. A step that does not reach the next within
// opts.BlockAfter (50ms when 0) is recorded as blocked and the next goes.
//
// The result's Verdict is RACE with its violating orders, or SAFE for
// every order at this step granularity.
func Explore(ctx context.Context, c Case, opts explore.Options) (*explore.Result, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	if opts.Attempts == 0 {
		// A case sized for bursts (16 attempts) explores with two.
		opts.Attempts = explore.DefaultAttempts
		if c.Attempts == 3 || len(c.Transactions) == 3 {
			opts.Attempts = 3
		}
	}
	if opts.Allowed == 0 && opts.Required == 0 && !opts.AllowanceSet {
		// The bounds the case's bursts run with: its Allowed, and
		// runner.Allowed(0), runner.Required(0) in its Options (none is
		// correct) kept as 0, not taken for "unset".
		cfg := runner.NewConfig(c.options()...)
		opts.Allowed, opts.Required, opts.AllowanceSet = cfg.Allowed, cfg.Required, true
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return explore.Run(ctx, &target{c: &c, run: newRunID()}, opts)
}

// ExploreSafe explores c with two attempts and fails t when some order
// leaves more (or fewer) effects than allowed, naming the orders.
func ExploreSafe(t testing.TB, c Case) *explore.Result {
	t.Helper()
	res, err := Explore(context.Background(), c, explore.Options{})
	var none explore.NoStepsError
	switch {
	case errors.As(err, &none):
		t.Fatalf("%s: %v: mark them with w.Step(\"check\"), w.Step(\"act\")", c.Name, err)
	case err != nil:
		t.Fatalf("%s: %v", c.Name, err)
	}
	if v := res.Verdict(); v != explore.Safe {
		for _, o := range res.Violating() {
			t.Errorf("%s: order %s left %d effects", c.Name, o.Schedule, o.Effects)
		}
		t.Errorf("%s: %s — %s", c.Name, v, res.Why())
	}
	return res
}
