package scenarios

import "strings"

// Rule is one row of the catalog's expectation table: where a backend, an
// isolation level, a variant, an engine or the server itself changes what
// a scenario does. An empty field matches anything; Server matches a part
// of the server's reported name, case-insensitively ("FerretDB").
type Rule struct {
	Scenario, Backend, Isolation, Variant, Engine, Server string
	Expect                                                Expectation
	// Why is the one line a report prints beside the expectation.
	Why string
}

// Expectations is the catalog's table, most specific first: the first row
// that matches a run decides its expectation. A run no row matches expects
// what its scenario's Spec.Expect says. Measured against the Hermitage
// tables on PostgreSQL 15 and MariaDB 10.11 (docs/verdicts.md).
var Expectations = []Rule{
	{Scenario: CheckThenWrite, Backend: "mysql", Engine: "myisam", Expect: ExpectRace,
		Why: "MyISAM ignores transactions and locks: nothing serializes the check"},
	{Scenario: CheckThenWrite, Backend: "mysql", Engine: "aria", Expect: ExpectRace,
		Why: "Aria tables here are not transactional: nothing serializes the check"},
	{Scenario: CheckThenWrite, Backend: "postgres", Isolation: "serializable", Expect: ExpectSafe,
		Why: "PostgreSQL's serializable snapshot isolation aborts all but one of the transactions that read the free subject and write it (40001)"},
	{Scenario: CheckThenWrite, Backend: "postgres", Isolation: "read-uncommitted", Expect: ExpectRace,
		Why: "PostgreSQL runs read-uncommitted as read committed: each check sees only committed rows, and nothing locks the absent row"},
	{Scenario: CheckThenWrite, Backend: "mysql", Isolation: "serializable", Expect: ExpectSafe,
		Why: "InnoDB serializable turns the check into a shared locking read: the gap lock makes all but one writer wait or deadlock (1213)"},
	{Scenario: CheckThenWrite, Backend: "mysql", Isolation: "repeatable-read", Variant: VariantForUpdate, Expect: ExpectSafe,
		Why: "InnoDB repeatable-read takes a gap lock for SELECT … FOR UPDATE on the absent row: one checker at a time"},
	{Scenario: CheckThenWrite, Backend: "mysql", Isolation: "default", Variant: VariantForUpdate, Expect: ExpectSafe,
		Why: "InnoDB's default level, repeatable-read on a stock server, takes a gap lock for SELECT … FOR UPDATE on the absent row: one checker at a time"},
	{Scenario: CheckThenWrite, Backend: "mysql", Variant: VariantForUpdate, Expect: ExpectRace,
		Why: "below repeatable-read InnoDB takes no gap lock: FOR UPDATE on a row that does not exist yet locks nothing"},
	{Scenario: CheckThenWrite, Backend: "postgres", Variant: VariantForUpdate, Expect: ExpectRace,
		Why: "PostgreSQL locks rows, not gaps: FOR UPDATE on a row that does not exist yet locks nothing"},
	{Scenario: ConditionalUpdate, Backend: "mongo", Server: "FerretDB", Expect: ExpectRace,
		Why: "FerretDB 1.x runs findAndModify as read-modify-replace; the status filter is not re-checked at write time"},
	{Scenario: TTLLease, Backend: "mongo", Server: "FerretDB", Expect: ExpectRace,
		Why: "FerretDB 1.x takes the lease with a non-atomic findAndModify, so several attempts can take a free lease at once"},
}

// Match reports whether the row applies to scenario on backend with p, on
// a server that names itself server ("" before the run: a Server row
// cannot match yet).
func (r Rule) Match(scenario, backend string, p Params, server string) bool {
	is := func(want, got string) bool { return want == "" || strings.EqualFold(want, got) }
	engine := strings.ToLower(p.Engine)
	if backend == "mysql" && engine == "" {
		engine = "innodb"
	}
	isolation := is(r.Isolation, p.Isolation) || (r.Isolation == "default" && p.Isolation == "")
	return is(r.Scenario, scenario) && is(r.Backend, backend) && isolation && is(r.Variant, p.Variant) &&
		is(r.Engine, engine) && (r.Server == "" || strings.Contains(strings.ToLower(server), strings.ToLower(r.Server)))
}

// Expect is what the catalog predicts for scenario on backend with p, on
// the server named server ("" when not yet known), and why when a row of
// the table decided it ("" when the scenario's own rule did).
func (r *Registry) Expect(scenario, backend string, p Params, server string) (Expectation, string) {
	for _, row := range Expectations {
		if row.Match(scenario, backend, p, server) {
			return row.Expect, row.Why
		}
	}
	if s, ok := r.lookupSpec(scenario); ok && s.Expect != nil {
		return s.Expect(p), ""
	}
	return ExpectSafe, ""
}
