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

// A backend's declared variants are the rows, each once, the default
// first: "" unless the list names it ("plain", or the first demo row's
// variant). Without a declaration the default and the catalog's own
// mentions (the expectation table) stand in.
func TestRowVariants(t *testing.T) {
	reg := coreRegistry("mysql", "postgres")
	reg.AddScenario(scenarios.Spec{Name: "naive-first", Demo: []scenarios.DemoCase{{Variant: "naive"}, {Variant: "atomic"}}})
	reg.Register("naive-first", "postgres", func(context.Context, scenarios.Params) (runner.Target, error) { return nil, nil })
	reg.SetVariants("naive-first", "postgres", []string{"naive", "atomic"})
	reg.SetVariants(scenarios.CheckThenWrite, "postgres", []string{"plain", "for-update", "advisory-lock", "for-update"})
	reg.SetVariants(scenarios.UniqueInsert, "postgres", []string{"one-active"})
	for _, c := range []struct {
		scenario, backend string
		want              []string
	}{
		{scenarios.CheckThenWrite, "postgres", []string{"plain", "for-update", "advisory-lock"}},
		{scenarios.UniqueInsert, "postgres", []string{"", "one-active"}},
		{"naive-first", "postgres", []string{"naive", "atomic"}},
		// mysql declared nothing: the table's rows name for-update.
		{scenarios.CheckThenWrite, "mysql", []string{"", "advisory-lock", "for-update", "for-share"}},
		{scenarios.ConditionalUpdate, "postgres", []string{""}},
	} {
		if got := reg.RowVariants(c.scenario, c.backend); !slices.Equal(got, c.want) {
			t.Errorf("RowVariants(%s, %s) = %q, want %q", c.scenario, c.backend, got, c.want)
		}
	}
}

// The matrix's default rows are the scenarios whose expected verdict
// changes with the isolation level: check-then-write does (serializable
// stops it), conditional-update is SAFE at every level.
func TestRegistryDependsOnIsolation(t *testing.T) {
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
