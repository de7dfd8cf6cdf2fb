package pgstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// Checks verifies ttl-lease's liveness: a holder that dies without
// releasing blocks others until the TTL, and not after it.
func (t *target) Checks(ctx context.Context) []runner.Check {
	if t.sc.name != scenarios.TTLLease {
		return nil
	}
	c := runner.Check{Name: "lease liveness"}
	t.mu.Lock()
	defer t.mu.Unlock()
	conn, err := t.adminConn(ctx)
	if err != nil {
		c.Detail = err.Error()
		return []runner.Check{c}
	}
	lctx, cancel := context.WithTimeout(ctx, adminTimeout+t.p.TTL)
	defer cancel()
	c.OK, c.Detail = leaseLiveness(lctx, conn, t.n, t.p.Prefix()+"liveness", t.p.TTL)
	if !c.OK && strings.HasPrefix(c.Detail, tooSlow) {
		c.Inconclusive = true
	}
	return []runner.Check{c}
}

// tooSlow starts the detail of a liveness check the machine was too slow
// to judge: the "early" try reached the server only after the TTL.
const tooSlow = "too slow to judge: "

// leaseLiveness takes a lease for a holder that then "dies", tries again
// before the TTL (must be refused), then polls until the lease is granted.
// Expiry is judged by the server's clock: the next grant must start no
// earlier than the dead holder's lock_until.
func leaseLiveness(ctx context.Context, c *pgx.Conn, n names, name string, ttl time.Duration) (bool, string) {
	if _, err := c.Exec(ctx, "INSERT INTO "+n.locks+" (name, lock_until) VALUES ($1::text, '-infinity')", name); err != nil {
		return false, fmt.Sprintf("cannot create the liveness lease: %v", err)
	}
	start := time.Now()
	first, ok, err := acquire(ctx, c, n, name, "dies", ttl)
	if err != nil || !ok {
		return false, fmt.Sprintf("first holder could not take a free lease (granted=%v, err=%v)", ok, err)
	}
	_ = sleep(ctx, ttl/2)
	early := time.Since(start)
	if g, ok, err := acquire(ctx, c, n, name, "early", ttl); err != nil || ok {
		// Judge by the server's clock: a grant at or after the dead
		// holder's lock_until is correct, and only says that this machine
		// was too slow to try within the TTL.
		if err == nil && !g.from.Before(first.until) {
			return false, fmt.Sprintf("%sthe try meant for half the %s TTL reached the server %s after the grant, past its expiry (the machine is loaded; use a longer --ttl)",
				tooSlow, ttl, g.from.Sub(first.from).Round(time.Millisecond))
		}
		return false, fmt.Sprintf("at %s by the server's clock, before the %s TTL, the lease was granted=%v (err=%v): expected refused",
			g.from.Sub(first.from).Round(time.Millisecond), ttl, ok, err)
	}
	deadline := start.Add(ttl + 2*time.Second)
	for time.Now().Before(deadline) {
		next, ok, err := acquire(ctx, c, n, name, "next", ttl)
		if err != nil {
			return false, fmt.Sprintf("polling the lease: %v", err)
		}
		if ok {
			took := next.from.Sub(first.from)
			return !next.from.Before(first.until), fmt.Sprintf(
				"a holder died without releasing: refused at %s, granted to the next after %s by the server's clock (TTL %s, fence %d → %d)",
				early.Round(time.Millisecond), took.Round(time.Millisecond), ttl, first.fence, next.fence)
		}
		_ = sleep(ctx, ttl/10+time.Millisecond)
	}
	return false, fmt.Sprintf("the lease was still held %s after its holder died (TTL %s)", time.Since(start).Round(time.Millisecond), ttl)
}
