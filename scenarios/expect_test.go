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

// TestRetriedRows: a row marked Retried decides only runs that retry
// conflicts; the job-queue workers refused at serializable take nothing
// unless retried.
func TestRetriedRows(t *testing.T) {
	reg := scenarios.NewRegistry()
	for _, c := range []struct {
		backend, isolation, server string
		retries                    int
		want                       scenarios.Expectation
	}{
		{"postgres", "serializable", "", 0, scenarios.ExpectLost},
		{"postgres", "serializable", "", 3, scenarios.ExpectSafe},
		{"postgres", "repeatable-read", "", 3, scenarios.ExpectSafe},
		{"postgres", "read-committed", "", 3, scenarios.ExpectRace},
		{"mysql", "serializable", "", 0, scenarios.ExpectLost},
		{"mysql", "serializable", "", 1, scenarios.ExpectSafe},
		{"mysql", "", "MariaDB 10.11.19 (innodb_snapshot_isolation=ON)", 0, scenarios.ExpectLost},
		{"mysql", "", "MariaDB 10.11.19 (innodb_snapshot_isolation=ON)", 5, scenarios.ExpectSafe},
		{"mysql", "", "MariaDB 10.11.19", 5, scenarios.ExpectRace},
	} {
		p := scenarios.Params{Isolation: c.isolation, Retries: c.retries}
		if got, why := reg.Expect(scenarios.JobQueue, c.backend, p, c.server); got != c.want {
			t.Errorf("job-queue on %s at %q (%s), %d retries: %s, want %s (%s)", c.backend, c.isolation, c.server, c.retries, got, c.want, why)
		}
	}
}

// TestDependsOnIsolation reads the table: check-then-write's outcome on a
// server changes with the level, conditional-update's does not.
func TestDependsOnIsolation(t *testing.T) {
	for _, c := range []struct {
		scenario, variant string
		want              bool
	}{
		{scenarios.CheckThenWrite, "", true}, {scenarios.ConditionalUpdate, "", false},
		{scenarios.LostUpdate, "", true}, {scenarios.LostUpdate, scenarios.VariantAtomic, false},
		{scenarios.WriteSkew, scenarios.VariantForUpdate, false}, {scenarios.JobQueue, scenarios.VariantConditional, true},
	} {
		if got := scenarios.DependsOnIsolation(c.scenario, c.variant); got != c.want {
			t.Errorf("DependsOnIsolation(%s, %q) = %v, want %v", c.scenario, c.variant, got, c.want)
		}
	}
}

// The cases whose burst verdict no order of whole steps can show are
// exactly the rows that say so; a server-setting row is not one.
func TestBelowSteps(t *testing.T) {
	for _, tc := range []struct {
		scenario, backend, isolation, variant, server string
		want                                          scenarios.Expectation
	}{
		{scenarios.JobQueue, "postgres", "repeatable-read", scenarios.VariantConditional, "PostgreSQL 15.20", scenarios.ExpectLost},
		{scenarios.ConditionalUpdate, "mongo", "", "", "FerretDB 1.24 (MongoDB 7.0.77 compatible)", scenarios.ExpectRace},
		{scenarios.TTLLease, "mongo", "", "", "FerretDB 1.24", scenarios.ExpectRace},
		{scenarios.ConditionalUpdate, "mongo", "", "", "MongoDB 7.0", ""},
		{scenarios.JobQueue, "postgres", "serializable", scenarios.VariantSkipLocked, "PostgreSQL 15.20", ""},
		{scenarios.JobQueue, "mysql", "default", "", "MariaDB 10.11 innodb_snapshot_isolation=ON", ""},
		{scenarios.CheckThenWrite, "postgres", "serializable", "", "PostgreSQL 15.20", ""},
	} {
		p := scenarios.Params{Isolation: tc.isolation, Variant: tc.variant}
		got, why, ok := scenarios.BelowSteps(tc.scenario, tc.backend, p, tc.server)
		if got != tc.want || ok != (tc.want != "") || ok && why == "" {
			t.Errorf("%s %s %s %s on %q: %q %v %q, want %q", tc.scenario, tc.backend, tc.isolation, tc.variant, tc.server, got, ok, why, tc.want)
		}
	}
}
