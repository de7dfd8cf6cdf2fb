package scenarios

import (
	"context"
	"fmt"
	"time"

	"github.com/racetest/racetest/runner"
)

// Grant is one grant of a lease, valid from From until (not including) Until.
type Grant struct{ From, Until time.Time }

// MostHolders is the most grants valid at one instant: more than one means
// two holders at once, the violation of a lease. It is the effect count of
// ttl-lease on every backend that keeps its grants as time intervals.
func MostHolders(gs []Grant) int {
	most := 0
	for _, g := range gs {
		n := 0
		for _, h := range gs {
			if !h.From.After(g.From) && h.Until.After(g.From) {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// AwaitExpiry ends a lease's liveness check, judged by the client's clock:
// a holder took the lease at start and died without releasing it, and a try
// early after start (before the TTL) was refused. try asks for the lease
// again, every tenth of the TTL, until it is granted or 2 s past the TTL;
// the check passes when the grant came no sooner than the TTL after start.
// clock, when not empty, follows the TTL in the detail (", server clock").
func AwaitExpiry(ctx context.Context, start time.Time, early, ttl time.Duration, clock string, try func() (bool, error)) runner.Check {
	c := runner.Check{Name: "lease liveness"}
	deadline := start.Add(ttl + 2*time.Second)
	for time.Now().Before(deadline) {
		ok, err := try()
		if err != nil {
			c.Detail = err.Error()
			return c
		}
		if ok {
			took := time.Since(start)
			c.OK = took >= ttl
			c.Detail = fmt.Sprintf("a holder died without releasing: refused at %s, granted to the next after %s (TTL %s%s)",
				early.Round(time.Millisecond), took.Round(time.Millisecond), ttl, clock)
			return c
		}
		_ = Sleep(ctx, ttl/10+time.Millisecond)
	}
	c.Detail = fmt.Sprintf("the lease was still held %s after its holder died (TTL %s)", time.Since(start).Round(time.Millisecond), ttl)
	return c
}
