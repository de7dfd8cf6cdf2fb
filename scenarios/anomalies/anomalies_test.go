package anomalies

import (
	"cmp"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/conformance"
)

// registry holds the anomaly scenarios on the named backends.
func registry(backends ...string) *scenarios.Registry { return testenv.Family(Register, backends...) }

var memParams = scenarios.Params{Latency: scenarios.DefaultLatency}

func TestConformanceMemory(t *testing.T) {
	conformance.Run(t, conformance.Suite{Registry: registry("memory"), Backend: "memory", Params: memParams, Bursts: 15})
}

// run builds scenario on backend with variant and p, and runs it.
func run(t *testing.T, backend, scenario, variant string, p scenarios.Params, bursts int, opts ...runner.Option) (*runner.Result, runner.Target) {
	t.Helper()
	if p.RunID == "" {
		p.RunID = scenarios.NewRunID()
	}
	p.Variant = variant
	p.Attempts = cmp.Or(p.Attempts, 8)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	target, err := registry(backend).Build(ctx, scenario, backend, p)
	if err != nil {
		t.Fatalf("build %s (%s) on %s: %v", scenario, variant, backend, err)
	}
	t.Cleanup(func() {
		if c, ok := target.(runner.Closer); ok {
			c.Close()
		}
	})
	res, err := runner.Run(ctx, target, append([]runner.Option{runner.Attempts(p.Attempts), runner.Bursts(bursts)}, opts...)...)
	if err != nil {
		t.Fatalf("run %s (%s) on %s: %v", scenario, variant, backend, err)
	}
	if res.CleanupErr != nil {
		t.Errorf("cleanup: %v", res.CleanupErr)
	}
	return res, target
}

// verdict is what the bursts show, as the report reads them: RACE over the
// allowance, LOST under the floor, else SAFE.
func verdict(res *runner.Result) scenarios.Expectation {
	switch {
	case res.Violations() > 0:
		return scenarios.ExpectRace
	case res.Lost() > 0:
		return scenarios.ExpectLost
	}
	return scenarios.ExpectSafe
}

// TestMemoryVariants: on the embedded store each naive pattern shows its
// anomaly in every burst, and each fix holds with the effects counted.
func TestMemoryVariants(t *testing.T) {
	for scenario, variants := range Variants {
		for _, v := range variants {
			t.Run(scenario+"/"+v, func(t *testing.T) {
				res, _ := run(t, "memory", scenario, v, memParams, 10)
				want, _ := registry("memory").Expect(scenario, "memory", scenarios.Params{Variant: v}, "")
				if got := verdict(res); got != want {
					t.Fatalf("verdict %s, the catalog expects %s; effects %+v, outcomes %v", got, want, res.EffectsSummary(), res.Outcomes())
				}
				if want == scenarios.ExpectSafe {
					for _, b := range res.Bursts {
						if b.Effects != b.Allowed || b.Effects < b.Required {
							t.Fatalf("burst %d: %d effects, allowed %d, required %d", b.Index, b.Effects, b.Allowed, b.Required)
						}
					}
				}
			})
		}
	}
}

// TestMemoryLostUpdateCounts: the naive increment's effects are the
// increments that landed and its floor the writes that ran: 8 writes, fewer
// increments, in each burst.
func TestMemoryLostUpdateCounts(t *testing.T) {
	p := memParams
	p.Gap = 2 * time.Millisecond // every read lands before the first write
	res, _ := run(t, "memory", LostUpdate, Naive, p, 5)
	for _, b := range res.Bursts {
		if b.Required != 8 || b.Allowed != 8 || b.Effects >= 8 || !b.Lost() {
			t.Fatalf("burst %d: effects %d, allowed %d, required %d: want 8 writes and fewer increments", b.Index, b.Effects, b.Allowed, b.Required)
		}
	}
}

// TestMemoryJobQueueCountsBoth: naive hands the first job to every worker
// (a RACE: more runs than jobs taken) and leaves the others queued. Every
// burst runs 8 and takes fewer jobs than it runs; a worker the scheduler
// holds past the gap (a loaded machine: 8 runs of 2 jobs, under -race at
// load 8) finds the first job taken and takes the next, so "one job" is
// asked of one burst, not of all.
func TestMemoryJobQueueCountsBoth(t *testing.T) {
	p := memParams
	p.Gap = 20 * time.Millisecond
	res, _ := run(t, "memory", JobQueue, Naive, p, 5)
	oneJob := 0
	for _, b := range res.Bursts {
		if b.Effects != 8 || b.Required != 8 || b.Allowed < 1 || b.Allowed >= b.Effects {
			t.Fatalf("burst %d: %d runs of %d jobs taken (required %d): want 8 runs of fewer jobs", b.Index, b.Effects, b.Allowed, b.Required)
		}
		if b.Allowed == 1 {
			oneJob++
		}
	}
	if oneJob == 0 {
		t.Fatalf("no burst of %d handed one job to every worker", len(res.Bursts))
	}
}

// TestMemoryRefusesIsolation: the embedded store has no isolation levels;
// asking for one is a usage error, not a run that seems to have measured it.
func TestMemoryRefusesIsolation(t *testing.T) {
	p := memParams
	p.RunID, p.Isolation = scenarios.NewRunID(), "serializable"
	_, err := registry("memory").Build(context.Background(), LostUpdate, "memory", p)
	var bad *scenarios.ParamError
	if !errors.As(err, &bad) || !strings.Contains(err.Error(), "no isolation levels") || !strings.Contains(err.Error(), "--backend mysql") {
		t.Fatalf("err = %v, want a usage error saying the store has no isolation levels and where to measure them", err)
	}
}

// TestMemoryNotesIsolation: where the outcome on a server depends on the
// isolation level, the embedded run says so; where it does not, it is quiet.
func TestMemoryNotesIsolation(t *testing.T) {
	for _, c := range []struct {
		scenario, variant string
		want              bool
	}{{LostUpdate, Naive, true}, {LostUpdate, Atomic, false}, {WriteSkew, "", true}, {JobQueue, Conditional, true}, {WriteSkew, ForUpdate, false}} {
		p := memParams
		p.RunID, p.Variant = scenarios.NewRunID(), c.variant
		target, err := registry("memory").Build(context.Background(), c.scenario, "memory", p)
		if err != nil {
			t.Fatal(err)
		}
		notes := strings.Join(target.(runner.Noter).Notes(), "\n")
		if got := strings.Contains(notes, "depends on the isolation level"); got != c.want {
			t.Errorf("%s (%s): isolation note shown = %v, want %v; notes:\n%s", c.scenario, c.variant, got, c.want, notes)
		}
	}
}

func TestUnknownVariant(t *testing.T) {
	p := memParams
	p.RunID, p.Variant = scenarios.NewRunID(), "skip-lock"
	_, err := registry("memory").Build(context.Background(), JobQueue, "memory", p)
	var bad *scenarios.ParamError
	if !errors.As(err, &bad) || !strings.Contains(err.Error(), "skip-locked, conditional") {
		t.Fatalf("err = %v, want a usage error listing the variants", err)
	}
}

// TestNaiveIsTheDefault: a run without --variant and one with --variant
// naive expect the same everywhere, and every variant has an expectation
// on every backend and level from the table itself.
func TestNaiveIsTheDefault(t *testing.T) {
	r := registry("memory", "mysql", "postgres")
	for scenario := range Variants {
		for _, b := range []string{"memory", "mysql", "postgres"} {
			for _, level := range []string{"", "read-uncommitted", "read-committed", "repeatable-read", "serializable"} {
				for _, server := range []string{"", "MariaDB 10.11.19 (" + SnapshotIsolationOn + ")"} {
					def, _ := r.Expect(scenario, b, scenarios.Params{Isolation: level}, server)
					naive, _ := r.Expect(scenario, b, scenarios.Params{Isolation: level, Variant: Naive}, server)
					if def != naive {
						t.Errorf("%s on %s at %q (%s): default expects %s, naive %s", scenario, b, level, server, def, naive)
					}
				}
				for _, v := range Variants[scenario] {
					if _, why := r.Expect(scenario, b, scenarios.Params{Isolation: level, Variant: v}, ""); why == "" {
						t.Errorf("%s (%s) on %s at %q has no row in the expectation table", scenario, v, b, level)
					}
				}
			}
		}
	}
}
