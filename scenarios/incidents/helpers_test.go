package incidents

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// registry holds the incident scenarios on the named backends only, so that
// a backend's tests run these scenarios and not the core five again.
func registry(backends ...string) *scenarios.Registry {
	r := scenarios.NewRegistry()
	for _, b := range backends {
		r.AddBackend(scenarios.Backend{Name: b, Server: b != "memory"})
	}
	Register(r)
	return r
}

// shape is one run's shape in a targeted test.
type shape struct {
	variant         string
	attempts        int
	bursts          int
	replicas, waves int
	deploy          bool
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
		if c, ok := target.(interface{ Close() error }); ok {
			c.Close()
		}
	})
	res, err := runner.Run(ctx, target,
		runner.Attempts(p.Attempts), runner.Bursts(max(sh.bursts, 10)), runner.Replicas(p.Replicas),
		runner.Waves(max(sh.waves, 1)), runner.Deploy(sh.deploy))
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
			t.Fatalf("burst %d: %s; effects %d, allowed %d, outcomes %v, errors %v", b.Index, what, b.Effects, b.Allowed, b.Outcomes, res.Errors)
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
