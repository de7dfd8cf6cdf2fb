package memstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/builtin"
	"github.com/racetest/racetest/scenarios/conformance"
	"github.com/racetest/racetest/scenarios/memstore"
)

func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Suite{
		Registry: builtin.Registry(),
		Backend:  "memory",
		Params:   scenarios.Params{Latency: scenarios.DefaultLatency, TTL: scenarios.DefaultTTL},
	})
}

// TestIsolationIsRefused: the embedded store has no isolation levels, so
// --isolation is a usage error on every scenario, never silently ignored.
func TestIsolationIsRefused(t *testing.T) {
	r := builtin.Registry()
	for _, s := range []string{scenarios.CheckThenWrite, scenarios.ConditionalUpdate, scenarios.LostUpdate} {
		_, err := r.Build(context.Background(), s, "memory", scenarios.Params{RunID: "iso", Isolation: "repeatable-read", Latency: scenarios.DefaultLatency})
		var bad *scenarios.ParamError
		if !errors.As(err, &bad) || !strings.Contains(err.Error(), "no isolation levels") {
			t.Errorf("%s with --isolation on memory: err = %v, want a usage error", s, err)
		}
	}
}

// TestIsolationNote: a scenario whose outcome on a server depends on the
// isolation level says so on the embedded store; one that does not, does not.
func TestIsolationNote(t *testing.T) {
	r := builtin.Registry()
	for s, want := range map[string]bool{scenarios.CheckThenWrite: true, scenarios.ConditionalUpdate: false, scenarios.UniqueInsert: false} {
		target, err := r.Build(context.Background(), s, "memory", scenarios.Params{RunID: "note", Latency: scenarios.DefaultLatency, TTL: scenarios.DefaultTTL})
		if err != nil {
			t.Fatal(err)
		}
		notes := strings.Join(target.(runner.Noter).Notes(), "\n")
		if got := strings.Contains(notes, "depends on the isolation level"); got != want {
			t.Errorf("%s: isolation note = %v, want %v:\n%s", s, got, want, notes)
		}
	}
}

// --effects auto on the embedded store: each burst is held to a solo twin,
// with no count of the scenario's own; the naive patterns differ from
// their twins ("`writes`: +1 row solo, +8 together") and the guarded ones
// do not. memory-set across three replicas is a RACE only because its solo
// twin runs on one replica, as a team tests alone (issue 30).
func TestAutoEffects(t *testing.T) {
	r := builtin.Registry()
	for _, c := range []struct {
		scenario string
		replicas int
		want     report.Verdict
		why      string
		variant  string
	}{
		{scenarios.CheckThenWrite, 1, report.Race, "`writes`: +1 row solo, +", ""},
		{scenarios.MemorySet, 3, report.Race, "`writes`: +1 row solo, +3 together", ""},
		{scenarios.MemorySet, 1, report.Safe, "", ""},
		{scenarios.ConditionalUpdate, 1, report.Safe, "", ""},
		{scenarios.UniqueInsert, 1, report.Safe, "", ""},
		// The anomalies' embedded database, measured as a server's tables.
		{scenarios.LostUpdate, 1, report.Lost, "`accounts.balance` (sum): +8 solo, +", "naive"},
		{scenarios.LostUpdate, 1, report.Safe, "", "atomic"},
		{scenarios.WriteSkew, 1, report.Race, "`doctors.on_call` (sum): -7 solo, -8 together", "naive"},
		{scenarios.WriteSkew, 1, report.Safe, "", "for-update"},
	} {
		p := scenarios.Params{RunID: "auto", Attempts: 8, Replicas: c.replicas, Latency: scenarios.DefaultLatency, TTL: scenarios.DefaultTTL, Seed: 1, Variant: c.variant}
		target, err := r.Build(context.Background(), c.scenario, "memory", p)
		if err != nil {
			t.Fatal(err)
		}
		res, err := runner.Run(context.Background(), target, runner.Attempts(8), runner.Replicas(c.replicas), runner.Bursts(20), runner.SoloTwins(1))
		if err != nil {
			t.Fatal(err)
		}
		a := report.Assess(report.Case{Name: c.scenario, Backend: "memory", Result: res})
		if a.Verdict != c.want {
			t.Errorf("%s with %d replicas under --effects auto: %s (%s), want %s", c.scenario, c.replicas, a.Verdict, a.Why, c.want)
		}
		var diffs []string
		for _, b := range res.Bursts {
			if b.Twin != nil && len(b.Twin.Diffs) > 0 {
				for _, d := range b.Twin.Diffs {
					diffs = append(diffs, d.String())
				}
				break
			}
		}
		if got := strings.Join(diffs, "; "); c.why == "" && got != "" || !strings.Contains(got, c.why) {
			t.Errorf("%s with %d replicas: the first burst that differs from its twin differs in %q, want …%s…", c.scenario, c.replicas, got, c.why)
		}
	}
}

// AutoRefusal names what the embedded store cannot judge by solo twins,
// and why (cmd refuses it with this line before anything runs).
func TestAutoRefusal(t *testing.T) {
	for s, want := range map[string]string{
		scenarios.CheckThenWrite: "", scenarios.MemorySet: "", scenarios.ConditionalUpdate: "", scenarios.UniqueInsert: "",
		scenarios.LostUpdate: "", scenarios.WriteSkew: "",
		scenarios.TTLLease: "two holders of one lease at once", scenarios.JobQueue: "not as the double run it is",
		"alert-dedupe": "keeps what it did in the scenario's own counters, which no snapshot reads",
	} {
		got := memstore.AutoRefusal(s)
		if want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("AutoRefusal(%s) = %q, want …%s…", s, got, want)
		}
	}
}
