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

// On MyISAM and Aria (no transactions, no row locks) each row of the
// non-transactional table, pinned for both engines: a row flipped (a lost
// update read as RACE, an atomic UPDATE as LOST) would hold a run to the
// wrong verdict (issue 27).
func TestNonTransactionalEnginesRows(t *testing.T) {
	reg := scenarios.NewRegistry()
	for _, s := range scenarios.Core() {
		reg.AddScenario(s)
	}
	for _, engine := range []string{"myisam", "aria", "MyISAM"} {
		for _, c := range []struct {
			scenario, variant, isolation string
			want                         scenarios.Expectation
		}{
			{scenarios.CheckThenWrite, scenarios.VariantAdvisoryLock, "", scenarios.ExpectSafe},
			{scenarios.CheckThenWrite, "", "serializable", scenarios.ExpectRace},
			{scenarios.CheckThenWrite, scenarios.VariantForUpdate, "repeatable-read", scenarios.ExpectRace},
			{scenarios.LostUpdate, scenarios.VariantAtomic, "", scenarios.ExpectSafe},
			{scenarios.LostUpdate, scenarios.VariantVersion, "", scenarios.ExpectSafe},
			{scenarios.LostUpdate, "", "", scenarios.ExpectLost},
			{scenarios.LostUpdate, scenarios.VariantForUpdate, "serializable", scenarios.ExpectLost},
			{scenarios.WriteSkew, "", "serializable", scenarios.ExpectRace},
			{scenarios.JobQueue, scenarios.VariantConditional, "", scenarios.ExpectSafe},
			{scenarios.JobQueue, "", "serializable", scenarios.ExpectRace},
		} {
			p := scenarios.Params{Isolation: c.isolation, Variant: c.variant, Engine: engine, Replicas: 1}
			got, why := reg.Expect(c.scenario, "mysql", p, "MariaDB 10.11.19")
			if got != c.want {
				t.Errorf("%s (variant %q, isolation %q) on %s: %s, want %s (%s)", c.scenario, c.variant, c.isolation, engine, got, c.want, why)
			}
			if why == "" {
				t.Errorf("%s (variant %q) on %s: no row of the table decided it", c.scenario, c.variant, engine)
			}
		}
	}
}

// Every row of the table decides some run: none is shadowed by the rows
// above it. A row that leaves the isolation open is tried at each level.
func TestEveryExpectationRowIsReachable(t *testing.T) {
	reg := scenarios.NewRegistry()
	for i, r := range scenarios.Expectations {
		levels := []string{r.Isolation}
		switch r.Isolation {
		case "default":
			levels = []string{""}
		case "":
			levels = []string{"", "read-uncommitted", "read-committed", "repeatable-read", "serializable"}
		}
		reached := false
		for _, level := range levels {
			p := scenarios.Params{Isolation: level, Variant: r.Variant, Engine: r.Engine, Replicas: 1}
			if r.Retried {
				p.Retries = 1
			}
			got, why := reg.Expect(r.Scenario, r.Backend, p, r.Server)
			reached = reached || (got == r.Expect && why == r.Why)
		}
		if !reached {
			t.Errorf("row %d (%+v) is shadowed: no run at any isolation level reaches it", i, r)
		}
	}
}

// A row for InnoDB matches a MySQL run that names no engine (InnoDB is
// the default) and no other backend's; a scenario without its own rule is
// expected SAFE (found by mutation testing, issue 27).
func TestExpectDefaults(t *testing.T) {
	innodb := scenarios.Rule{Engine: "innodb"}
	if !innodb.Match("x", "mysql", scenarios.Params{}, "") {
		t.Error("an InnoDB row does not match a MySQL run with the default engine")
	}
	if innodb.Match("x", "postgres", scenarios.Params{}, "") || innodb.Match("x", "mysql", scenarios.Params{Engine: "myisam"}, "") {
		t.Error("an InnoDB row matches a PostgreSQL run, or a MyISAM one")
	}
	reg := scenarios.NewRegistry()
	reg.AddScenario(scenarios.Spec{Name: "own-rule-less"})
	reg.AddScenario(scenarios.Spec{Name: "own-rule", Expect: func(scenarios.Params) scenarios.Expectation { return scenarios.ExpectRace }})
	if got, why := reg.Expect("own-rule-less", "memory", scenarios.Params{}, ""); got != scenarios.ExpectSafe || why != "" {
		t.Errorf("a scenario without a rule: %s (%q), want safe", got, why)
	}
	if got, _ := reg.Expect("own-rule", "memory", scenarios.Params{}, ""); got != scenarios.ExpectRace {
		t.Errorf("a scenario's own rule: %s, want race", got)
	}
}
