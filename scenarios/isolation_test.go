package scenarios_test

import (
	"slices"
	"testing"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/builtin"
)

// readTable is the table as its doc reads, written out again here and
// independent of the code under test: the first row that matches decides,
// else the scenario's own rule, else SAFE.
func readTable(reg *scenarios.Registry, scenario, backend string, p scenarios.Params) scenarios.Expectation {
	for _, row := range scenarios.Expectations {
		if row.Match(scenario, backend, p, "") {
			return row.Expect
		}
	}
	if s, err := reg.Scenario(scenario); err == nil && s.Expect != nil {
		return s.Expect(p)
	}
	return scenarios.ExpectSafe
}

// variesInTable reports whether two of levels read different expectations
// for scenario with variant on backend (one replica, no server known).
func variesInTable(reg *scenarios.Registry, scenario, backend, variant string, levels []string) bool {
	seen := map[scenarios.Expectation]bool{}
	for _, l := range levels {
		seen[readTable(reg, scenario, backend, scenarios.Params{Isolation: l, Variant: variant, Replicas: 1})] = true
	}
	return len(seen) > 1
}

// The two ways of asking whether the isolation level matters — the
// memory notes' (per variant, over both SQL servers, without a registry)
// and the matrix's (per backend, over its variants) — give, for every
// scenario racetest ships, what the table says when read by hand. Were they
// to read the table differently from each other or from its doc, some
// scenario here would disagree.
func TestDependsOnIsolationAgreesWithTable(t *testing.T) {
	reg := builtin.Registry()
	levels := sqldb.IsolationNames()
	withDefault := append([]string{""}, levels...)
	sql := []string{"mysql", "postgres"}
	depends := 0
	for _, s := range reg.Scenarios() {
		var variants []string
		for _, b := range sql {
			if !slices.Contains(reg.BackendsOf(s.Name), b) {
				continue
			}
			want := false
			for _, v := range reg.RowVariants(s.Name, b) {
				want = want || variesInTable(reg, s.Name, b, v, levels)
				if !slices.Contains(variants, v) {
					variants = append(variants, v)
				}
			}
			if got := reg.DependsOnIsolation(s.Name, b, levels); got != want {
				t.Errorf("Registry.DependsOnIsolation(%s, %s) = %v, the table says %v", s.Name, b, got, want)
			}
		}
		for _, v := range variants {
			want := variesInTable(reg, s.Name, "mysql", v, withDefault) || variesInTable(reg, s.Name, "postgres", v, withDefault)
			if got := scenarios.DependsOnIsolation(s.Name, v); got != want {
				t.Errorf("DependsOnIsolation(%s, %q) = %v, the table says %v", s.Name, v, got, want)
			}
			if want {
				depends++
			}
		}
	}
	// A test that only ever compared false with false would prove nothing.
	if depends < 5 {
		t.Errorf("only %d scenario variants depend on the isolation level: the table is not being read", depends)
	}
}
