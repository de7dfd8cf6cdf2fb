package incidents

import (
	"cmp"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// registry holds the incident scenarios on the named backends only.
func registry(backends ...string) *scenarios.Registry { return testenv.Family(Register, backends...) }

// shape is one run's shape in a targeted test.
type shape struct {
	variant         string
	attempts        int
	bursts          int
	replicas, waves int
	deploy          bool
	stopAtRace      bool // end the run at the first burst over the allowance
}

// runCase builds scenario on backend with p and runs it, failing t on a
// setup error. A zero shape field takes a small default.
func runCase(t *testing.T, backend, scenario string, p scenarios.Params, sh shape) (*runner.Result, runner.Target) {
	t.Helper()
	p.RunID = scenarios.NewRunID()
	p.Variant = sh.variant
	p.Replicas = max(sh.replicas, 1)
	p.Attempts = max(sh.attempts, 8)
	if p.Latency == 0 && backend == "memory" {
		p.Latency = scenarios.DefaultLatency
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	target, err := registry(backend).Build(ctx, scenario, backend, p)
	if err != nil {
		t.Fatalf("build %s on %s: %v", scenario, backend, err)
	}
	t.Cleanup(func() {
		if c, ok := target.(runner.Closer); ok {
			c.Close()
		}
	})
	res, err := runner.Run(ctx, target,
		runner.Attempts(p.Attempts), runner.Bursts(cmp.Or(sh.bursts, 10)), runner.Replicas(p.Replicas),
		runner.Waves(max(sh.waves, 1)), runner.Deploy(sh.deploy), runner.StopOnViolation(sh.stopAtRace))
	if err != nil {
		t.Fatalf("run %s (%s) on %s: %v", scenario, sh.variant, backend, err)
	}
	if res.CleanupErr != nil {
		t.Errorf("cleanup: %v", res.CleanupErr)
	}
	return res, target
}

// everyBurst asserts want(b) for each burst, naming the first that fails.
func everyBurst(t *testing.T, res *runner.Result, what string, ok func(b runner.Burst) bool) {
	t.Helper()
	for _, b := range res.Bursts {
		if !ok(b) {
			t.Fatalf("burst %d: %s; effects %d, allowed %d, outcomes %v, took %s, errors %v", b.Index, what, b.Effects, b.Allowed, b.Outcomes, b.Duration, res.Errors)
		}
	}
}

// checkOK asserts that the run reported the named check, and that it held.
func checkOK(t *testing.T, res *runner.Result, name string) runner.Check {
	t.Helper()
	for _, c := range res.Checks {
		if strings.Contains(c.Name, name) {
			if !c.OK {
				t.Errorf("check %q failed: %s", c.Name, c.Detail)
			}
			return c
		}
	}
	t.Fatalf("no check named like %q among %+v", name, res.Checks)
	return runner.Check{}
}

// noteWith returns the first note containing s, failing t if none does.
func noteWith(t *testing.T, res *runner.Result, s string) string {
	t.Helper()
	for _, n := range res.Notes {
		if strings.Contains(n, s) {
			return n
		}
	}
	t.Fatalf("no note contains %q: %q", s, res.Notes)
	return ""
}

// fencingInterleaving scripts the interleaving that fencing only the write
// does not stop, on lb: A takes the lease (token 1) and checks the job is
// not done; A pauses past its TTL; B takes the lease (token 2) and checks;
// A wakes and writes before B does. With the check unfenced both writes are
// accepted (they arrive in token order); with the check fenced, B's check
// raised the token the store has seen and A's write is refused.
func fencingInterleaving(t *testing.T, lb leaseBackend, p scenarios.Params) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := lb.Prepare(ctx); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	defer func() {
		if err := lb.Cleanup(ctx); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}()
	pool, err := lb.Open(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c, err := pool.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ttl := 50 * time.Millisecond
	for _, checkFenced := range []bool{false, true} {
		key := p.Prefix() + "interleave-" + boolArg(checkFenced)
		if err := lb.Reset(ctx, key); err != nil {
			t.Fatal(err)
		}
		gA, tokA, err := c.Acquire(ctx, key, "A", ttl)
		if err != nil || !gA || tokA != 1 {
			t.Fatalf("A: granted=%v token=%d err=%v, want a first grant with token 1", gA, tokA, err)
		}
		if done, err := c.Done(ctx, key, tokA, checkFenced); err != nil || done {
			t.Fatalf("A's check: done=%v err=%v", done, err)
		}
		if err := wait(ctx, ttl*3/2); err != nil {
			t.Fatal(err)
		}
		gB, tokB, err := c.Acquire(ctx, key, "B", 20*ttl)
		if err != nil || !gB || tokB != 2 {
			t.Fatalf("B after A's TTL: granted=%v token=%d err=%v, want token 2", gB, tokB, err)
		}
		if done, err := c.Done(ctx, key, tokB, checkFenced); err != nil || done {
			t.Fatalf("B's check: done=%v err=%v", done, err)
		}
		okA, errA := c.Write(ctx, key, "A", tokA, true)
		okB, errB := c.Write(ctx, key, "B", tokB, true)
		writes, err := lb.Writes(ctx, key)
		if errA != nil || errB != nil || err != nil {
			t.Fatalf("writes: %v, %v, count: %v", errA, errB, err)
		}
		if checkFenced {
			if okA || !okB || writes != 1 {
				t.Errorf("check fenced: A accepted=%v, B accepted=%v, %d writes; want A refused, B accepted, 1 write", okA, okB, writes)
			}
		} else if !okA || !okB || writes != 2 {
			t.Errorf("only the write fenced: A accepted=%v, B accepted=%v, %d writes; want both accepted (the gap fencing the check closes)", okA, okB, writes)
		}
	}
}
