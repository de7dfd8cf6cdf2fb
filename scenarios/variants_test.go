package scenarios_test

import (
	"context"
	"slices"
	"testing"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

func coreRegistry(backends ...string) *scenarios.Registry {
	reg := scenarios.NewRegistry()
	for _, s := range scenarios.Core() {
		reg.AddScenario(s)
	}
	for _, b := range backends {
		reg.AddBackend(scenarios.Backend{Name: b, Server: true})
		for _, s := range scenarios.Core() {
			reg.Register(s.Name, b, func(context.Context, scenarios.Params) (runner.Target, error) { return nil, nil })
		}
	}
	return reg
}

// A backend's declared variants are the list, its default first, each
// once. Without a declaration the default ("") and the catalog's own
// mentions (the expectation table) stand in.
func TestVariants(t *testing.T) {
	reg := coreRegistry("mysql", "postgres")
	reg.SetVariants(scenarios.CheckThenWrite, "postgres", "plain", "for-update", "advisory-lock", "for-update")
	reg.SetVariants(scenarios.UniqueInsert, "postgres", "", "one-active")
	for _, c := range []struct {
		scenario, backend string
		want              []string
	}{
		{scenarios.CheckThenWrite, "postgres", []string{"plain", "for-update", "advisory-lock"}},
		{scenarios.UniqueInsert, "postgres", []string{"", "one-active"}},
		// mysql declared nothing: the table's rows name for-update.
		{scenarios.CheckThenWrite, "mysql", []string{"", "for-update"}},
		{scenarios.ConditionalUpdate, "postgres", []string{""}},
	} {
		if got := reg.Variants(c.scenario, c.backend); !slices.Equal(got, c.want) {
			t.Errorf("Variants(%s, %s) = %q, want %q", c.scenario, c.backend, got, c.want)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("SetVariants on a scenario the backend does not run did not panic")
		}
	}()
	reg.SetVariants("no-such-scenario", "postgres", "")
}

// The matrix's default rows are the scenarios whose expected verdict
// changes with the isolation level: check-then-write does (serializable
// stops it), conditional-update is SAFE at every level.
func TestDependsOnIsolation(t *testing.T) {
	reg := coreRegistry("mysql", "postgres", "redis")
	levels := []string{"read-uncommitted", "read-committed", "repeatable-read", "serializable"}
	for _, c := range []struct {
		scenario, backend string
		want              bool
	}{
		{scenarios.CheckThenWrite, "postgres", true},
		{scenarios.CheckThenWrite, "mysql", true},
		{scenarios.CheckThenWrite, "redis", false},
		{scenarios.ConditionalUpdate, "postgres", false},
		{scenarios.MemorySet, "mysql", false},
	} {
		if got := reg.DependsOnIsolation(c.scenario, c.backend, levels); got != c.want {
			t.Errorf("DependsOnIsolation(%s, %s) = %v, want %v", c.scenario, c.backend, got, c.want)
		}
	}
	if reg.DependsOnIsolation(scenarios.CheckThenWrite, "postgres", levels[:2]) {
		t.Error("check-then-write on postgres: read-uncommitted and read-committed both RACE, yet reported as differing")
	}
}
