// Package conformance is the one set of expectations every backend meets:
// each backend's test file calls Run with a few lines.
package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// Suite describes one backend under test.
type Suite struct {
	Registry *scenarios.Registry
	Backend  string
	// Params carries the connections and options; RunID, Attempts and
	// Replicas are set per case.
	Params   scenarios.Params
	Attempts int // default 8
	Bursts   int // default 30
	// Override replaces the catalog's expectation for a scenario on this
	// server, with the reason (FerretDB's non-atomic findAndModify, ...).
	Override map[string]Override
	// Skip names scenarios not to run here, with the reason.
	Skip map[string]string
	// Release, when set, makes a fresh release for one run: the dial hook
	// and the runner options (release.New gives both; this package cannot
	// import it, since release's own tests use this suite). A backend whose
	// attempts are one short round trip (Redis) may need last-byte for its
	// bursts to overlap on a loaded machine; SAFE is asserted only for bursts
	// that overlapped, so the release decides what the suite can prove.
	Release func(t *testing.T) (scenarios.DialFunc, []runner.Option)
}

// Override is a server's measured behaviour where it differs from the catalog.
type Override struct {
	Expect scenarios.Expectation
	Why    string
}

// Run runs every scenario the backend implements and asserts the catalog's
// expectation for it: SAFE means exactly Allowed effects in every burst, in
// bursts that really overlapped, with no errors; RACE means at least one
// burst over the allowance; LOST at least one under its floor.
func Run(t *testing.T, s Suite) {
	t.Helper()
	if s.Attempts == 0 {
		s.Attempts = 8
	}
	if s.Bursts == 0 {
		s.Bursts = 30
	}
	for _, spec := range s.Registry.Scenarios() {
		if !contains(s.Registry.BackendsOf(spec.Name), s.Backend) || spec.Topology != "" {
			continue // a clustered scenario needs more than the one server
		}
		cases := spec.Demo
		if len(cases) == 0 {
			cases = []scenarios.DemoCase{{}}
		}
		for _, dc := range cases {
			name := spec.Name
			if dc.Label != "" {
				name += "/" + dc.Label
			}
			t.Run(name, func(t *testing.T) {
				if why, ok := s.Skip[spec.Name]; ok {
					t.Skip(why)
				}
				runCase(t, s, spec, dc)
			})
		}
	}
}

func runCase(t *testing.T, s Suite, spec scenarios.Spec, dc scenarios.DemoCase) {
	p := s.Params
	p.RunID = scenarios.NewRunID()
	p.Attempts = s.Attempts
	p.Replicas = max(dc.Replicas, 1)
	if dc.Variant != "" {
		p.Variant = dc.Variant
	}
	if dc.Gap > 0 && p.Gap == 0 {
		p.Gap = dc.Gap
	}
	// The catalog's table decides, as it does for every command: a
	// scenario whose outcome depends on the server has its rows there.
	want, why := s.Registry.Expect(spec.Name, s.Backend, p, "")
	if why != "" {
		t.Logf("expectation: %s (%s)", want, why)
	}
	if o, ok := s.Override[spec.Name]; ok {
		want = o.Expect
		t.Logf("expectation on this server: %s (%s)", want, o.Why)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var relOpts []runner.Option
	// memory-set's race is decided in the replica's memory, before the wire:
	// only the gate releases that decision; the losers never write a byte.
	if s.Release != nil && spec.Name != scenarios.MemorySet {
		p.Dial, relOpts = s.Release(t)
	}
	target, err := s.Registry.Build(ctx, spec.Name, s.Backend, p)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	bursts := s.Bursts
	if dc.Bursts > 0 {
		bursts = min(bursts, dc.Bursts)
	}
	opts := append([]runner.Option{
		runner.Attempts(s.Attempts), runner.Bursts(bursts), runner.Replicas(p.Replicas),
		runner.Waves(max(dc.Waves, 1)), runner.Deploy(dc.Deploy), runner.Allowed(spec.Allowed),
	}, relOpts...)
	res, err := runner.Run(ctx, target, opts...)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if res.CleanupErr != nil {
		t.Errorf("cleanup: %v", res.CleanupErr)
	}
	if len(res.Bursts) != bursts {
		t.Fatalf("ran %d bursts, want %d", len(res.Bursts), bursts)
	}
	for _, c := range res.Checks {
		if c.Inconclusive {
			// The check could not judge (a loaded machine could not try
			// within the lease's TTL): it fails nothing, as in a report,
			// where it makes a SAFE run INCONCLUSIVE. It failed this suite
			// under CI's load (ttl-lease on FerretDB, 84 ms for a 25 ms try).
			t.Logf("check %s could not judge: %s", c.Name, c.Detail)
			continue
		}
		if !c.OK {
			t.Errorf("check %s failed: %s", c.Name, c.Detail)
		}
	}
	out := res.Outcomes()
	switch want {
	case scenarios.ExpectSafe:
		for _, b := range res.Bursts {
			if b.Effects != b.Allowed {
				t.Errorf("burst %d: %d effects in the store, want exactly %d (outcomes %v)", b.Index, b.Effects, b.Allowed, b.Outcomes)
			}
		}
		if out[runner.Error]+out[runner.Unknown] > 0 {
			t.Errorf("%d errors and %d unknown outcomes, want none: %v", out[runner.Error], out[runner.Unknown], res.Errors)
		}
		if ov := res.Overlapped(); ov*2 < len(res.Bursts) {
			t.Errorf("only %d of %d bursts had two attempts in flight at once: a SAFE here proves nothing", ov, len(res.Bursts))
		}
	case scenarios.ExpectLost:
		if res.Lost() == 0 {
			t.Errorf("no burst left fewer effects than required in %d bursts; effects %+v, outcomes %v",
				len(res.Bursts), res.EffectsSummary(), out)
		}
	case scenarios.ExpectRace:
		if res.Violations() == 0 {
			t.Errorf("no burst exceeded %d effect(s) in %d bursts; effects %+v, overlap %+v",
				spec.Allowed, len(res.Bursts), res.EffectsSummary(), res.OverlapSummary())
		}
	}
	t.Logf("%s on %s: violations %d/%d, effects %+v, overlap %+v, spread %+v, outcomes %v",
		spec.Name, s.Backend, res.Violations(), len(res.Bursts), res.EffectsSummary(), res.OverlapSummary(), res.SpreadSummary(), out)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
