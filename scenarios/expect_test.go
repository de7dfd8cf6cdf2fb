package scenarios_test

import (
	"testing"

	"github.com/racetest/racetest/scenarios"
)

// The catalog's table holds the Hermitage measurements (issue 10 §4): the
// database decides, not one expectation per scenario.
func TestExpectationTable(t *testing.T) {
	reg := scenarios.NewRegistry()
	for _, s := range scenarios.Core() {
		reg.AddScenario(s)
	}
	for _, c := range []struct {
		scenario, backend, isolation, variant, engine, server string
		want                                                  scenarios.Expectation
	}{
		{scenarios.CheckThenWrite, "postgres", "serializable", "", "", "", scenarios.ExpectSafe},
		{scenarios.CheckThenWrite, "postgres", "repeatable-read", "", "", "", scenarios.ExpectRace},
		{scenarios.CheckThenWrite, "postgres", "read-uncommitted", "", "", "", scenarios.ExpectRace},
		{scenarios.CheckThenWrite, "postgres", "", "", "", "", scenarios.ExpectRace},
		{scenarios.CheckThenWrite, "postgres", "repeatable-read", "for-update", "", "", scenarios.ExpectRace},
		{scenarios.CheckThenWrite, "postgres", "serializable", "for-update", "", "", scenarios.ExpectSafe},
		{scenarios.CheckThenWrite, "mysql", "serializable", "", "", "", scenarios.ExpectSafe},
		{scenarios.CheckThenWrite, "mysql", "repeatable-read", "", "", "", scenarios.ExpectRace},
		{scenarios.CheckThenWrite, "mysql", "repeatable-read", "for-update", "", "", scenarios.ExpectSafe},
		{scenarios.CheckThenWrite, "mysql", "", "for-update", "", "", scenarios.ExpectSafe},
		{scenarios.CheckThenWrite, "mysql", "serializable", "for-update", "", "", scenarios.ExpectSafe},
		{scenarios.CheckThenWrite, "mysql", "read-committed", "for-update", "", "", scenarios.ExpectRace},
		{scenarios.CheckThenWrite, "mysql", "serializable", "", "myisam", "", scenarios.ExpectRace},
		{scenarios.CheckThenWrite, "redis", "", "", "", "", scenarios.ExpectRace},
		{scenarios.ConditionalUpdate, "mongo", "", "", "", "FerretDB 1.24.2 (MongoDB 7.0.42 wire)", scenarios.ExpectRace},
		{scenarios.ConditionalUpdate, "mongo", "", "", "", "MongoDB 7.0.14", scenarios.ExpectSafe},
		{scenarios.ConditionalUpdate, "mongo", "", "", "", "", scenarios.ExpectSafe},
		{scenarios.TTLLease, "mongo", "", "", "", "FerretDB 1.24.2", scenarios.ExpectRace},
		{scenarios.UniqueInsert, "mongo", "", "", "", "FerretDB 1.24.2", scenarios.ExpectSafe},
		{scenarios.MemorySet, "memory", "", "", "", "", scenarios.ExpectSafe},
	} {
		p := scenarios.Params{Isolation: c.isolation, Variant: c.variant, Engine: c.engine, Replicas: 1}
		got, why := reg.Expect(c.scenario, c.backend, p, c.server)
		if got != c.want {
			t.Errorf("%s on %s (isolation %q, variant %q, engine %q, server %q): %s, want %s (%s)",
				c.scenario, c.backend, c.isolation, c.variant, c.engine, c.server, got, c.want, why)
		}
	}
	for _, r := range scenarios.Expectations {
		if r.Why == "" || r.Scenario == "" {
			t.Errorf("a row of the table needs its scenario and its reason: %+v", r)
		}
	}
}

// auto keeps the gate for memory-set (its check is in memory) and for a
// scenario on a cluster; the others are left to auto.
func TestAutoGate(t *testing.T) {
	for _, c := range []struct {
		spec scenarios.Spec
		keep bool
	}{
		{scenarios.Spec{Name: "a", InProcess: "in memory"}, true},
		{scenarios.Spec{Name: "b", Topology: scenarios.TopologyReplica}, true},
		{scenarios.Spec{Name: "c"}, false},
	} {
		if got := c.spec.AutoGate(); (got != "") != c.keep {
			t.Errorf("%s: AutoGate %q, want kept: %v", c.spec.Name, got, c.keep)
		}
	}
	for _, s := range scenarios.Core() {
		if (s.Name == scenarios.MemorySet) != (s.AutoGate() != "") {
			t.Errorf("%s: AutoGate %q", s.Name, s.AutoGate())
		}
	}
}
