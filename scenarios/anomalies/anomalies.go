// Package anomalies is the isolation-anomaly catalog: the patterns whose
// outcome depends on the database, its isolation level and the locking the
// code asks for — where PostgreSQL and InnoDB differ.
//
//   - lost-update: read a balance, write read + 1 (Hermitage P4);
//   - write-skew: two on-call doctors each check that another is on call,
//     then take themselves off (G2-item);
//   - job-queue: N workers take the next pending job.
//
// Each runs on MySQL/MariaDB and PostgreSQL through the one SQL layer
// (internal/sqldb), and on the embedded store, which has no isolation
// levels and says so. Effects are counted in the store: increments that
// landed against writes that committed, doctors taken off call, jobs
// processed against jobs taken.
package anomalies

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/racetest/racetest/scenarios"
)

// The anomaly scenarios' names.
const (
	LostUpdate = scenarios.LostUpdate
	WriteSkew  = scenarios.WriteSkew
	JobQueue   = scenarios.JobQueue
)

// Variants (--variant). Naive is every scenario's default.
const (
	Naive = scenarios.VariantNaive
	// lost-update
	Atomic    = scenarios.VariantAtomic    // UPDATE … SET balance = balance + 1
	ForUpdate = scenarios.VariantForUpdate // SELECT … FOR UPDATE before the write (write-skew too)
	Version   = scenarios.VariantVersion   // optimistic: WHERE version = <read>, again on 0 rows
	// write-skew
	Materialized = scenarios.VariantMaterialized // every writer first updates one conflict row
	// job-queue
	SkipLocked  = scenarios.VariantSkipLocked  // SELECT … FOR UPDATE SKIP LOCKED
	Conditional = scenarios.VariantConditional // UPDATE … WHERE status = 'pending', rows affected
)

// Variants lists each scenario's variants, the default first.
var Variants = map[string][]string{
	LostUpdate: {Naive, Atomic, ForUpdate, Version},
	WriteSkew:  {Naive, ForUpdate, Materialized},
	JobQueue:   {Naive, SkipLocked, Conditional},
}

// pickVariant returns the variant p asks for, or a usage error naming the
// valid ones.
func pickVariant(backend, scenario, asked string) (string, error) {
	vs := Variants[scenario]
	if asked == "" {
		return vs[0], nil
	}
	if slices.Contains(vs, asked) {
		return asked, nil
	}
	return "", scenarios.BadParam(fmt.Errorf("%s: %s has no variant %q; use --variant with one of: %s (see 'racetest explain %s')",
		backend, scenario, asked, strings.Join(vs, ", "), scenario))
}

// Register adds the anomaly scenarios to r, on each backend r knows that
// implements them. Call it after the backends have been added.
func Register(r *scenarios.Registry) {
	for _, s := range Specs() {
		r.AddScenario(s)
	}
	for _, name := range slices.Sorted(maps.Keys(Variants)) {
		for _, b := range []struct {
			name string
			f    scenarios.Factory
		}{
			{"memory", memFactory(name)},
			{"redis", redisFactory(name)},
			{"mysql", sqlFactory(name, mysqlDialect)},
			{"postgres", sqlFactory(name, pgDialect)},
		} {
			// Only lost-update has its pattern on Redis (see redis.go).
			if b.name == "redis" && name != LostUpdate {
				continue
			}
			if _, err := r.Backend(b.name); err == nil {
				r.Register(name, b.name, b.f)
			}
		}
	}
}

// Specs returns the anomaly scenarios' specs. What each does on each server
// and isolation level is in scenarios.Expectations.
func Specs() []scenarios.Spec {
	specs := []scenarios.Spec{
		{
			Name:   LostUpdate,
			Lesson: "read a value, write read + 1: concurrent writers overwrite each other unless the store refuses or serializes them",
			Story: scenarios.Story{
				Naive: `BEGIN
SELECT balance FROM accounts WHERE id = ?            -- 100
UPDATE accounts SET balance = ? WHERE id = ?         -- 100 + 1, computed in the app
COMMIT`,
				Breaks: `Every writer that read before the first commit computes from the same old balance, and
each UPDATE writes over the last: N commits, one increment. This is Hermitage's P4. What
the server does about it differs: PostgreSQL at repeatable read and above aborts the later
writers (40001 "could not serialize access due to concurrent update"); InnoDB at
repeatable read lets them write over it silently (MariaDB refuses with 1020 only when
innodb_snapshot_isolation=ON); at read committed both servers lose the update.`,
				Fix: `Let the store do the arithmetic: UPDATE … SET balance = balance + 1 (variant atomic). Or
lock the row you read: SELECT … FOR UPDATE (variant for-update). Or optimistic
concurrency: UPDATE … SET balance = ?, version = version + 1 WHERE id = ? AND version = ?,
and read again when it changed 0 rows (variant version). Where the server aborts instead
(40001, 1213, 1020), retry the transaction (--retry).`,
				Numbers: `Effects are the increments that landed (the balance); every committed write also counts
itself in the row (writes = writes + 1, which the store computes). A burst with fewer
increments than writes lost an update: the verdict is LOST. Conflicts are writers the
server refused; with --retry they run again and every increment lands.`,
			},
			Demo: []scenarios.DemoCase{
				{Label: "read-modify-write", Variant: Naive},
				{Label: "SET balance = balance + 1", Variant: Atomic},
			},
		},
		{
			Name:   WriteSkew,
			Lesson: "each writer checks a rule over several rows and changes only its own: together they break the rule no one of them broke",
			Story: scenarios.Story{
				Naive: `BEGIN
SELECT count(*) FROM doctors WHERE shift = ? AND on_call    -- 2: someone else stays
UPDATE doctors SET on_call = false WHERE shift = ? AND doctor = ?   -- only my own row
COMMIT`,
				Breaks: `Each doctor's transaction reads the whole shift and writes only its own row. No two
transactions write the same row, so no row lock and no "concurrent update" check stops
them: each sees enough doctors on call in its snapshot, and all of them go off call. This
is G2-item (write skew). Snapshot isolation — PostgreSQL's repeatable read, InnoDB's
repeatable read — allows it; only serializable forbids it.`,
				Fix: `Lock what you read: SELECT … FROM doctors WHERE shift = ? FOR UPDATE (variant for-update).
Or materialize the conflict: every writer first updates one row that stands for the rule
(UPDATE shifts SET version = version + 1 WHERE id = ?, variant materialized), so two
writers of the same shift conflict on it. Or run --isolation serializable, and retry the
transactions the server aborts (--retry).`,
				Numbers: `Each burst puts one doctor per attempt on call; each attempt takes its own doctor off if
at least two are on call. Effects are the doctors taken off call; all but one may go.
More than that is nobody left on call: the verdict is RACE.`,
			},
			Demo: []scenarios.DemoCase{
				{Label: "check the shift, go off call", Variant: Naive},
				{Label: "lock the shift (FOR UPDATE)", Variant: ForUpdate},
			},
		},
		{
			Name:   JobQueue,
			Lesson: "N workers take the next pending job: select-then-update hands one job to several workers",
			Story: scenarios.Story{
				Naive: `BEGIN
SELECT id FROM jobs WHERE status = 'pending' ORDER BY id LIMIT 1
UPDATE jobs SET status = 'taken', worker = ? WHERE id = ?
COMMIT
process(job)`,
				Breaks: `Every worker that selects before the first commit sees the same first job, and each
UPDATE succeeds: one job is processed by several workers, while the jobs behind it wait
although workers were free. At PostgreSQL's repeatable read the later workers get 40001
instead and do nothing at all.`,
				Fix: `SELECT … FOR UPDATE SKIP LOCKED: each worker locks a different pending job and never waits
for another's (variant skip-locked). Or claim with UPDATE … WHERE id = ? AND status =
'pending' and check rows affected, trying the next job when it changed 0 rows (variant
conditional): never twice, at the price of collisions.`,
				Numbers: `Each burst queues one job per attempt. Effects are the job runs (each UPDATE counts
itself in the job's row); one run per job taken is allowed. More runs than jobs taken is
a job processed twice: RACE. Fewer jobs taken than queued, with every worker done, is a
job never taken while workers idled: LOST.`,
			},
			Demo: []scenarios.DemoCase{
				{Label: "SELECT LIMIT 1, then UPDATE", Variant: Naive},
				{Label: "FOR UPDATE SKIP LOCKED", Variant: SkipLocked},
			},
		},
	}
	for i := range specs {
		specs[i].Variants = Variants[specs[i].Name]
	}
	return specs
}

// tally is one burst's count in the store: its effects, and the range of
// them that was correct given what committed.
type tally struct{ effects, allowed, required int }
