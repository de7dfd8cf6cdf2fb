package memstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/builtin"
	"github.com/racetest/racetest/scenarios/conformance"
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
