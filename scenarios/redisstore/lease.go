package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// leaseMillis is the lease length as Redis keeps it. Expiry is stored in
// whole milliseconds, so a TTL is rounded up (never down: a shorter lease
// than asked could let a second holder in early), and racetest passes PX
// itself rather than let the driver pick EX or PX and truncate.
func leaseMillis(ttl time.Duration) int64 {
	ms := int64((ttl + time.Millisecond - 1) / time.Millisecond)
	return max(ms, 1)
}

// grant is one lease grant as the server recorded it: it held from
// expires-ttl to expires, in milliseconds of the server's clock.
type grant struct {
	from, expires int64
	owner         string
}

func parseGrants(recs []string) ([]grant, error) {
	gs := make([]grant, 0, len(recs))
	for _, r := range recs {
		parts := strings.SplitN(r, ":", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("redis: unreadable lease grant record %q (want expires:ttl:owner)", r)
		}
		exp, err1 := strconv.ParseInt(parts[0], 10, 64)
		ttl, err2 := strconv.ParseInt(parts[1], 10, 64)
		if err1 != nil || err2 != nil || exp <= 0 {
			return nil, fmt.Errorf("redis: unreadable lease grant record %q (want expires:ttl:owner in milliseconds)", r)
		}
		gs = append(gs, grant{from: exp - ttl, expires: exp, owner: parts[2]})
	}
	return gs, nil
}

// mostAtOnce is the most grants valid at one instant: more than one means two
// holders at once. A grant is valid from its start through its expiry
// millisecond, as Redis keeps a key until its expiry time has passed; a
// grant that came after an expiry starts at least one millisecond later.
func mostAtOnce(gs []grant) int {
	most := 0
	for _, g := range gs {
		n := 0
		for _, h := range gs {
			if h.from <= g.from && g.from <= h.expires {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// Checks verifies the lease's liveness on the server's clock: a holder that
// died without releasing blocks others until the TTL, and not after it.
func (t *target) Checks(ctx context.Context) []runner.Check {
	if t.kind.scenario != scenarios.TTLLease {
		return nil
	}
	var c runner.Check
	// The "refused before the TTL" probe is only meaningful if it really ran
	// before the TTL; on a loaded machine the sleep can overshoot, so such a
	// round is tried again rather than reported as a failure.
	for round := range 3 {
		var late bool
		c, late = t.liveness(ctx, round)
		if !late {
			break
		}
	}
	return []runner.Check{c}
}

func (t *target) liveness(ctx context.Context, round int) (c runner.Check, late bool) {
	c = runner.Check{Name: "lease liveness"}
	k := keys{subject: fmt.Sprintf("%sliveness%d:lease", t.keyPrefix(), round), effects: fmt.Sprintf("%sliveness%d:grants", t.keyPrefix(), round)}
	ttl := time.Duration(t.ttlMS) * time.Millisecond
	try := func(owner string) (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, opTimeout)
		defer cancel()
		return acquire(cctx, t.client(), k, owner, t.ttlMS)
	}
	start := time.Now()
	if ok, err := try("dies"); err != nil || !ok {
		c.Detail = fmt.Sprintf("the first holder could not take a free lease (granted=%v, err=%v)", ok, t.errText(err))
		return c, false
	}
	_ = sleep(ctx, ttl/2)
	early := time.Since(start)
	ok, err := try("early")
	if err != nil {
		c.Detail = "probing the held lease: " + t.errText(err)
		return c, false
	}
	if ok {
		if time.Since(start) >= ttl*9/10 {
			return c, true
		}
		c.Detail = fmt.Sprintf("at %s, before the %s TTL, the lease was granted again: expected refused",
			early.Round(time.Millisecond), ttl)
		return c, false
	}
	deadline := start.Add(ttl + 2*time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		ok, err := try("next")
		if err != nil {
			c.Detail = "waiting for the lease to expire: " + t.errText(err)
			return c, false
		}
		if ok {
			return t.judgeLiveness(ctx, k, early, time.Since(start)), false
		}
		_ = sleep(ctx, ttl/10+time.Millisecond)
	}
	c.Detail = fmt.Sprintf("the lease was still held %s after its holder died (TTL %s)", time.Since(start).Round(time.Millisecond), ttl)
	return c, false
}

// judgeLiveness reads the two grants the server recorded and checks, on the
// server's clock, that the second began only after the first expired.
func (t *target) judgeLiveness(ctx context.Context, k keys, early, took time.Duration) runner.Check {
	c := runner.Check{Name: "lease liveness"}
	cctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	recs, err := t.client().LRange(cctx, k.effects, 0, -1).Result()
	if err != nil {
		c.Detail = "reading the grants: " + t.errText(err)
		return c
	}
	gs, err := parseGrants(recs)
	if err != nil || len(gs) != 2 {
		c.Detail = fmt.Sprintf("expected 2 recorded grants, read %d (%v)", len(gs), err)
		return c
	}
	first, next := gs[0], gs[1]
	c.OK = next.from > first.expires
	c.Detail = fmt.Sprintf("a holder died without releasing: refused at %s, granted to the next %d ms after the first grant by the server's clock (TTL %d ms; %s by the client's)",
		early.Round(time.Millisecond), next.from-first.from, t.ttlMS, took.Round(time.Millisecond))
	return c
}

func (t *target) errText(err error) string {
	if err == nil {
		return "none"
	}
	return describeErr(err, t.c.password)
}
