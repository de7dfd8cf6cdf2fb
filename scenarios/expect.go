package scenarios

import (
	"fmt"
	"slices"
	"strings"
)

// Rule is one row of the catalog's expectation table: where a backend, an
// isolation level, a variant, an engine or the server itself changes what
// a scenario does. An empty field matches anything; Server matches a part
// of the server's reported name, case-insensitively ("FerretDB").
type Rule struct {
	Scenario, Backend, Isolation, Variant, Engine, Server string
	// Retried: the row applies only to runs that retry conflicts
	// (Params.Retries > 0); otherwise it applies either way.
	Retried bool
	// InsideStatement: the outcome needs two statements in flight inside
	// the server at once (an UPDATE that waits on another's row lock and
	// then finds the row changed). Bursts show it; running one statement
	// at a time, as explore does, cannot.
	InsideStatement bool
	// InsideOperation: the race is inside one operation of the server
	// (FerretDB's findAndModify): no order of whole steps can split it.
	InsideOperation bool
	Expect          Expectation
	// Why is the one line a report prints beside the expectation.
	Why string
}

// Expectations is the catalog's table, most specific first: the first row
// that matches a run decides its expectation. A run no row matches expects
// what its scenario's Spec.Expect says. Measured against the Hermitage
// tables on PostgreSQL 15 and MariaDB 10.11 (docs/verdicts.md); the
// anomaly rows were measured with racetest itself (docs/anomalies.md).
var Expectations = slices.Concat(nonTransactional(), coreRules, anomalyRules)

// onNonTransactional is what MyISAM and Aria do (no transactions, no row
// locks): only a single atomic statement, or a named lock, holds.
var onNonTransactional = []Rule{
	{Scenario: CheckThenWrite, Variant: VariantAdvisoryLock, Expect: ExpectSafe,
		Why: "GET_LOCK serializes the check and the write even on a table that ignores transactions"},
	{Scenario: CheckThenWrite, Expect: ExpectRace, Why: "%s ignores transactions and locks: nothing serializes the check"},
	{Scenario: LostUpdate, Variant: VariantAtomic, Expect: ExpectSafe, Why: "one UPDATE … SET balance = balance + 1 is atomic under %s's table lock"},
	{Scenario: LostUpdate, Variant: VariantVersion, Expect: ExpectSafe, Why: "the version check and the write are one UPDATE, atomic under %s's table lock"},
	{Scenario: LostUpdate, Expect: ExpectLost, Why: "%s ignores transactions and FOR UPDATE: every writer writes over the last"},
	{Scenario: WriteSkew, Expect: ExpectRace, Why: "%s ignores transactions and locking reads: nothing stops the last doctor going off call"},
	{Scenario: JobQueue, Variant: VariantConditional, Expect: ExpectSafe, Why: "the conditional UPDATE is atomic under %s's table lock"},
	{Scenario: JobQueue, Expect: ExpectRace, Why: "%s ignores transactions and SKIP LOCKED: several workers take the first job"},
}

// nonTransactional is onNonTransactional for each such engine.
func nonTransactional() []Rule {
	var rows []Rule
	for _, e := range []struct{ engine, name string }{{"myisam", "MyISAM"}, {"aria", "Aria (not transactional here)"}} {
		for _, r := range onNonTransactional {
			r.Backend, r.Engine = "mysql", e.engine
			if strings.Contains(r.Why, "%s") {
				r.Why = fmt.Sprintf(r.Why, e.name)
			}
			rows = append(rows, r)
		}
	}
	return rows
}

var coreRules = []Rule{
	{Scenario: CheckThenWrite, Backend: "postgres", Isolation: "serializable", Expect: ExpectSafe,
		Why: "PostgreSQL's serializable snapshot isolation aborts all but one of the transactions that read the free subject and write it (40001)"},
	{Scenario: CheckThenWrite, Backend: "postgres", Isolation: "repeatable-read", Variant: VariantAdvisoryLock, Expect: ExpectRace,
		Why: "under repeatable read the snapshot is taken as the lock statement starts, before it waits: the check then reads a snapshot from before the holder's commit"},
	{Scenario: CheckThenWrite, Backend: "postgres", Variant: VariantAdvisoryLock, Expect: ExpectSafe,
		Why: "pg_advisory_xact_lock serializes the transactions, and at read committed the check after it sees the holder's row"},
	{Scenario: CheckThenWrite, Backend: "mysql", Variant: VariantAdvisoryLock, Expect: ExpectSafe,
		Why: "GET_LOCK serializes the transactions, and InnoDB takes the snapshot at the first read, after the lock"},
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
	{Scenario: CheckThenWrite, Backend: "mysql", Isolation: "repeatable-read", Variant: VariantForShare, Expect: ExpectSafe,
		Why: "InnoDB repeatable-read takes a shared gap lock for LOCK IN SHARE MODE: the inserts behind it deadlock (1213), all but one"},
	{Scenario: CheckThenWrite, Backend: "mysql", Isolation: "default", Variant: VariantForShare, Expect: ExpectSafe,
		Why: "InnoDB's default level, repeatable-read on a stock server, takes a shared gap lock: the inserts behind it deadlock (1213), all but one"},
	{Scenario: CheckThenWrite, Backend: "mysql", Variant: VariantForShare, Expect: ExpectRace,
		Why: "below repeatable-read InnoDB takes no gap lock: a shared lock on a row that does not exist yet locks nothing"},
	{Scenario: CheckThenWrite, Backend: "postgres", Variant: VariantForUpdate, Expect: ExpectRace,
		Why: "PostgreSQL locks rows, not gaps: FOR UPDATE on a row that does not exist yet locks nothing"},
	{Scenario: CheckThenWrite, Backend: "postgres", Variant: VariantForShare, Expect: ExpectRace,
		Why: "PostgreSQL locks rows, not gaps: FOR SHARE on a row that does not exist yet locks nothing"},
	{Scenario: ConditionalUpdate, Backend: "mongo", Server: "FerretDB", InsideOperation: true, Expect: ExpectRace,
		Why: "FerretDB 1.x runs findAndModify as read-modify-replace; the status filter is not re-checked at write time"},
	{Scenario: TTLLease, Backend: "mongo", Server: "FerretDB", InsideOperation: true, Expect: ExpectRace,
		Why: "FerretDB 1.x takes the lease with a non-atomic findAndModify, so several attempts can take a free lease at once"},
}

// anomalyRules: within each scenario the variants' rows come first and the
// naive pattern's last, with no Variant, so that a run without --variant
// (the naive one) matches them; the embedded store's naive row follows the
// variants' rows, which hold on every backend. Measured on PostgreSQL 15 and MariaDB
// 10.11 at -n 8, 30 bursts per cell.
var anomalyRules = []Rule{
	// lost-update
	{Scenario: LostUpdate, Variant: VariantAtomic, Isolation: "repeatable-read", Backend: "postgres", Expect: ExpectSafe,
		Why: "every increment lands; the writers whose snapshot predates a concurrent commit get 40001 instead"},
	{Scenario: LostUpdate, Variant: VariantAtomic, Isolation: "serializable", Backend: "postgres", Expect: ExpectSafe,
		Why: "every increment lands; the writers whose snapshot predates a concurrent commit get 40001 instead"},
	{Scenario: LostUpdate, Variant: VariantAtomic, Expect: ExpectSafe,
		Why: "SET balance = balance + 1 reads the row under its write lock: every increment lands"},
	{Scenario: LostUpdate, Variant: VariantForUpdate, Expect: ExpectSafe,
		Why: "FOR UPDATE locks the row read: the next writer reads after the commit (or, at PostgreSQL's repeatable read and above, gets 40001)"},
	{Scenario: LostUpdate, Variant: VariantVersion, Expect: ExpectSafe,
		Why: "a write whose version moved changes 0 rows and reads again (at PostgreSQL's repeatable read and above it gets 40001)"},
	{Scenario: LostUpdate, Backend: "memory", Expect: ExpectLost,
		Why: "every writer that reads before the first write computes from the same balance"},
	{Scenario: LostUpdate, Backend: "redis", Expect: ExpectLost,
		Why: "every client that GETs before the first SET computes from the same balance, and SET writes over it"},
	{Scenario: LostUpdate, Backend: "postgres", Isolation: "repeatable-read", Expect: ExpectSafe,
		Why: "PostgreSQL's repeatable read refuses to write a row changed since the snapshot: 40001, no lost update"},
	{Scenario: LostUpdate, Backend: "postgres", Isolation: "serializable", Expect: ExpectSafe,
		Why: "PostgreSQL's serializable refuses to write a row changed since the snapshot: 40001, no lost update"},
	{Scenario: LostUpdate, Backend: "postgres", Expect: ExpectLost,
		Why: "at read committed (and read uncommitted, which PostgreSQL runs as it) each UPDATE writes the value computed from a stale read"},
	{Scenario: LostUpdate, Backend: "mysql", Isolation: "serializable", Expect: ExpectSafe,
		Why: "InnoDB serializable reads with a shared lock: the writers deadlock (1213), all but one"},
	{Scenario: LostUpdate, Backend: "mysql", Isolation: "repeatable-read", Server: "innodb_snapshot_isolation=ON", Expect: ExpectSafe,
		Why: "with innodb_snapshot_isolation=ON, MariaDB's repeatable read refuses to write a row changed since the snapshot (1020)"},
	{Scenario: LostUpdate, Backend: "mysql", Isolation: "default", Server: "innodb_snapshot_isolation=ON", Expect: ExpectSafe,
		Why: "with innodb_snapshot_isolation=ON, MariaDB's default repeatable read refuses to write a row changed since the snapshot (1020)"},
	{Scenario: LostUpdate, Backend: "mysql", Expect: ExpectLost,
		Why: "InnoDB below serializable writes over the row whatever was read (MariaDB's repeatable read refuses only with innodb_snapshot_isolation=ON)"},
	// write-skew
	{Scenario: WriteSkew, Variant: VariantForUpdate, Expect: ExpectSafe,
		Why: "FOR UPDATE locks every doctor of the shift: the next count waits for the commit (or gets 40001 at PostgreSQL's repeatable read and above)"},
	{Scenario: WriteSkew, Variant: VariantMaterialized, Expect: ExpectSafe,
		Why: "every writer first updates the shift's row: the writers of one shift conflict there (or get 40001 at PostgreSQL's repeatable read and above)"},
	{Scenario: WriteSkew, Backend: "memory", Expect: ExpectRace,
		Why: "every doctor who counts before the first one goes off call sees enough on call"},
	{Scenario: WriteSkew, Backend: "postgres", Isolation: "serializable", Expect: ExpectSafe,
		Why: "PostgreSQL's serializable snapshot isolation sees the read-write cycle and aborts all but one (40001)"},
	{Scenario: WriteSkew, Backend: "mysql", Isolation: "serializable", Expect: ExpectSafe,
		Why: "InnoDB serializable reads the shift with shared locks: the writes deadlock (1213), all but one"},
	{Scenario: WriteSkew, Backend: "postgres", Expect: ExpectRace,
		Why: "snapshot isolation (PostgreSQL's repeatable read) and read committed both allow write skew: the writers change different rows"},
	{Scenario: WriteSkew, Backend: "mysql", Expect: ExpectRace,
		Why: "InnoDB below serializable reads the shift without locks and the writers change different rows, whatever innodb_snapshot_isolation says"},
	// job-queue: the workers refused with a conflict take nothing, unless
	// the run retries them.
	{Scenario: JobQueue, Backend: "postgres", Isolation: "repeatable-read", Retried: true, Expect: ExpectSafe,
		Why: "the workers refused with 40001 retry with a fresh snapshot and take the next job: every job runs once"},
	{Scenario: JobQueue, Backend: "postgres", Isolation: "serializable", Retried: true, Expect: ExpectSafe,
		Why: "the workers refused with 40001 retry with a fresh snapshot and take the next job: every job runs once"},
	{Scenario: JobQueue, Backend: "mysql", Isolation: "serializable", Retried: true, Expect: ExpectSafe,
		Why: "the deadlock victims (1213) retry and take the next job: every job runs once"},
	{Scenario: JobQueue, Backend: "mysql", Isolation: "default", Server: "innodb_snapshot_isolation=ON", Retried: true, Expect: ExpectSafe,
		Why: "the workers refused with 1020 retry with a fresh snapshot and take the next job: every job runs once"},
	{Scenario: JobQueue, Backend: "postgres", Isolation: "repeatable-read", Variant: VariantSkipLocked, Expect: ExpectLost, InsideStatement: true,
		Why: "a job taken and committed after the snapshot is not locked, so SKIP LOCKED does not skip it, and locking it gives 40001: that worker takes nothing (in about a quarter of bursts at -n 8)"},
	{Scenario: JobQueue, Backend: "postgres", Isolation: "serializable", Variant: VariantSkipLocked, Expect: ExpectLost,
		Why: "a job taken and committed after the snapshot gives 40001 when locked: that worker takes nothing while jobs wait"},
	{Scenario: JobQueue, Variant: VariantSkipLocked, Expect: ExpectSafe,
		Why: "each worker locks a different pending job and never waits for another's"},
	{Scenario: JobQueue, Backend: "memory", Variant: VariantConditional, Expect: ExpectSafe,
		Why: "the conditional update lets one worker claim each job, and the others try the next"},
	{Scenario: JobQueue, Backend: "memory", Expect: ExpectRace,
		Why: "every worker that selects before the first take gets the same first job"},
	{Scenario: JobQueue, Backend: "postgres", Isolation: "repeatable-read", Variant: VariantConditional, Expect: ExpectLost, InsideStatement: true,
		Why: "a worker whose job was taken after its snapshot gets 40001, not a second run: it takes nothing while jobs wait"},
	{Scenario: JobQueue, Backend: "postgres", Isolation: "serializable", Variant: VariantConditional, Expect: ExpectLost, InsideStatement: true,
		Why: "a worker whose job was taken after its snapshot gets 40001, not a second run: it takes nothing while jobs wait"},
	{Scenario: JobQueue, Backend: "postgres", Isolation: "repeatable-read", Expect: ExpectLost,
		Why: "a worker whose job was taken after its snapshot gets 40001, not a second run: it takes nothing while jobs wait"},
	{Scenario: JobQueue, Backend: "postgres", Isolation: "serializable", Expect: ExpectLost,
		Why: "a worker whose job was taken after its snapshot gets 40001, not a second run: it takes nothing while jobs wait"},
	{Scenario: JobQueue, Variant: VariantConditional, Expect: ExpectSafe,
		Why: "UPDATE … WHERE status = 'pending' lets one worker claim each job, and the others try the next"},
	{Scenario: JobQueue, Backend: "mysql", Isolation: "serializable", Expect: ExpectLost,
		Why: "InnoDB serializable reads with shared locks: the takers of one job deadlock (1213) and take nothing while jobs wait"},
	{Scenario: JobQueue, Backend: "mysql", Isolation: "repeatable-read", Server: "innodb_snapshot_isolation=ON", Expect: ExpectLost,
		Why: "with innodb_snapshot_isolation=ON the later takers of a job get 1020 and take nothing while jobs wait"},
	{Scenario: JobQueue, Backend: "mysql", Isolation: "default", Server: "innodb_snapshot_isolation=ON", Expect: ExpectLost,
		Why: "with innodb_snapshot_isolation=ON the later takers of a job get 1020 and take nothing while jobs wait"},
	{Scenario: JobQueue, Expect: ExpectRace,
		Why: "every worker that selects before the first commit gets the same first job, and its UPDATE succeeds: one job runs several times"},
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
		(!r.Retried || p.Retries > 0) &&
		is(r.Engine, engine) && (r.Server == "" || strings.Contains(strings.ToLower(server), strings.ToLower(r.Server)))
}

// Expect is what the catalog predicts for scenario on backend with p, on
// the server named server ("" when not yet known), and why when a row of
// the table decided it ("" when the scenario's own rule did).
func (r *Registry) Expect(scenario, backend string, p Params, server string) (Expectation, string) {
	return expectation(scenario, backend, p, server, r.ownRule(scenario))
}

// ownRule is the rule scenario's Spec gives for a run no row of the table
// matches, or nil when it gives none.
func (r *Registry) ownRule(scenario string) func(Params) Expectation {
	s, _ := r.lookupSpec(scenario)
	return s.Expect
}

// expectation reads the table: the first matching row decides, else the
// scenario's own rule (own), else SAFE. It is the one reading of
// Expectations behind Registry.Expect and DependsOnIsolation.
func expectation(scenario, backend string, p Params, server string, own func(Params) Expectation) (Expectation, string) {
	for _, row := range Expectations {
		if row.Match(scenario, backend, p, server) {
			return row.Expect, row.Why
		}
	}
	if own != nil {
		return own(p), ""
	}
	return ExpectSafe, ""
}

// BelowSteps reports whether bursts of this case are known to show what no
// order of whole steps can: the row that decides its expectation needs two
// statements in flight inside the server at once (InsideStatement), or
// its race is inside one operation of the server (InsideOperation:
// FerretDB's findAndModify). It returns the row's expectation and why; explore says
// so beside a SAFE instead of leaving the disagreement silent.
func BelowSteps(scenario, backend string, p Params, server string) (Expectation, string, bool) {
	for _, row := range Expectations {
		if row.Match(scenario, backend, p, server) {
			if row.Expect != ExpectSafe && (row.InsideStatement || row.InsideOperation) {
				return row.Expect, row.Why, true
			}
			return "", "", false
		}
	}
	return "", "", false
}
