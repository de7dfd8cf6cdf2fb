package incidents

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/mysqlstore"
	"github.com/racetest/racetest/scenarios/pgstore"
)

// ReplicaRead is check-then-write whose check reads a replica while the
// write goes to the primary.
const ReplicaRead = "replica-read"

// Variants of replica-read.
const (
	PrimaryRead = "primary-read" // the check reads the primary
	RemoteApply = "remote-apply" // PostgreSQL: commit waits until the replica applied it
	GTIDWait    = "gtid-wait"    // MariaDB: the writer waits until the replica applied its GTID
	Conditional = "conditional"  // the write itself is conditional on the primary (a unique key)
)

// replicaVariants are replica-read's variants on each backend; the first
// is the default.
var replicaVariants = map[string]variants{
	"postgres": {Naive, PrimaryRead, RemoteApply, Conditional},
	"mysql":    {Naive, PrimaryRead, GTIDWait, Conditional},
}

// replicaLockWait bounds how long an attempt waits for the subject's lock.
const replicaLockWait = 10 * time.Second

func replicaReadSpec() scenarios.Spec {
	return scenarios.Spec{
		Name:   ReplicaRead,
		Lesson: "a locked check-then-write that is exactly-once on one server runs twice when its check reads a lagging replica",
		Story: scenarios.Story{
			Naive: `lock(token)                                    // pg_advisory_xact_lock / GET_LOCK, on the primary
if replica.exists(token) { unlock; return }    // reads go to the read replica
primary.insert(token)                          // writes go to the primary
unlock(token)`,
			Breaks: `On one server this code is exactly-once: the lock lets one attempt in at a time, and each
sees the row the one before committed. With reads routed to a replica (an ORM's read/write
split, a "reader endpoint"), the second attempt gets the lock the moment the first commits —
but asynchronous replication has not applied that commit on the replica yet. The check reads
"absent" and the second insert runs. The lock did its job; the read looked at the past.`,
			Fix: `Read what you are about to write from the primary (primary-read). Or make the commit wait
until the replica has applied it before the lock is released: PostgreSQL
synchronous_commit = remote_apply (remote-apply; needs the replica in
synchronous_standby_names), MariaDB MASTER_GTID_WAIT on the replica for the writer's own
GTID (gtid-wait). Or stop trusting the check: make the write itself conditional on the
primary — a unique key refuses the second insert (conditional).`,
			Numbers: `naive: bursts end with 2 or more rows, counted on the primary, although the lock
serialized every attempt: at -n 4 on a 2-core machine, 8-90% of bursts on MariaDB, varying
with load, and 91-99% on scripts/cluster.sh's PostgreSQL replica, which applies each commit
1 ms late (0-15% without that delay); the notes count the checks that read the past.
primary-read, remote-apply, gtid-wait: 1 row, the others "declined: already there".
conditional: 1 row; the attempts that read the stale replica are declined by the unique
key. The report names the primary and the replica it measured.`,
		},
		Expect:   raceFor(Naive),
		Topology: scenarios.TopologyReplica,
		Demo: []scenarios.DemoCase{
			{Label: "reads the replica", Variant: Naive},
			{Label: "unique key", Variant: Conditional},
		},
	}
}

// replicaReadFactory builds replica-read on a SQL backend. It needs the
// replica's address besides the primary's.
func replicaReadFactory(d *dialect) scenarios.Factory {
	return func(ctx context.Context, p scenarios.Params) (runner.Target, error) {
		if err := p.Validate(); err != nil {
			return nil, err
		}
		v, err := replicaVariants[d.name()].pick(ReplicaRead, p.Variant)
		if err != nil {
			return nil, err
		}
		readURL, flag := p.Conn.Get(pgstore.ReadKey), "--postgres-read-url (or RACETEST_POSTGRES_READ_URL)"
		topology := "postgres-replica"
		if d.Dialect == sqldb.MySQL {
			readURL, flag, topology = p.Conn.Get(mysqlstore.ReadKey), "--mysql-read-dsn (or RACETEST_MYSQL_READ_DSN)", "mariadb-replica"
		}
		if readURL == "" {
			return nil, scenarios.BadParam(fmt.Errorf("replica-read reads a replica and writes the primary: set %s to a replica of the primary; 'scripts/cluster.sh start %s' starts a primary with a replica and prints both addresses",
				flag, topology))
		}
		s, err := connectSQL(ctx, d, p)
		if err != nil {
			return nil, err
		}
		// The replica takes no wire release and no isolation setting of the
		// run's: it is only read, one statement at a time.
		replica, err := sqldb.Open(ctx, d.Dialect, readURL, sqldb.Options{AppName: "racetest " + p.RunID + " reader"})
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("replica-read: the read endpoint: %w", err)
		}
		t := &replicaTarget{s: s, replica: replica, d: d, p: p, variant: v}
		if err := t.checkTopology(ctx); err != nil {
			t.Close()
			return nil, err
		}
		return t, nil
	}
}

// replicaTarget is replica-read on one primary and one replica.
type replicaTarget struct {
	s       *sqlServer
	replica *sqldb.DB
	d       *dialect
	p       scenarios.Params
	variant string
	claims  string
	notes   []string

	mu    sync.Mutex
	stale int // checks on the replica that missed a committed row
}

func (t *replicaTarget) Server() string { return t.s.name() }

func (t *replicaTarget) Close() error {
	return errors.Join(t.s.Close(), t.replica.Close())
}

// checkTopology makes sure the read endpoint is a replica of some primary
// (a second ordinary server would measure nothing), and notes the
// topology for the report.
func (t *replicaTarget) checkTopology(ctx context.Context) error {
	primary := fmt.Sprintf("primary %s (%s)", t.s.DB().Addr(), t.s.name())
	replica := fmt.Sprintf("replica %s (%s)", t.replica.Addr(), t.replica.Server())
	switch t.d.Dialect {
	case sqldb.Postgres:
		var recovering bool
		var delay sql.NullString
		err := t.replica.Admin(ctx, func(ctx context.Context, q sqldb.Querier) error {
			return q.QueryRow(ctx, "SELECT pg_is_in_recovery(), current_setting('recovery_min_apply_delay', true)").Scan(&recovering, &delay)
		})
		if err != nil {
			return fmt.Errorf("replica-read: cannot ask %s whether it is a replica: %w", t.replica.Addr(), err)
		}
		if !recovering {
			return scenarios.BadParam(fmt.Errorf("replica-read: the read endpoint %s is not a replica (pg_is_in_recovery() is false): set --postgres-read-url to a streaming replica of the primary", t.replica.Addr()))
		}
		var sync, lag, commit sql.NullString
		_ = t.s.DB().Admin(ctx, func(ctx context.Context, q sqldb.Querier) error {
			return q.QueryRow(ctx, "SELECT string_agg(sync_state, ','), max(replay_lag)::text, current_setting('synchronous_commit') FROM pg_stat_replication").Scan(&sync, &lag, &commit)
		})
		replica += ", " + pgReplication(sync.String, commit.String) + ", replay lag at start " + orUnknown(lag.String) + applyDelay(delay.String)
		states := "," + sync.String + ","
		if t.variant == RemoteApply && !strings.Contains(states, ",sync,") && !strings.Contains(states, ",quorum,") {
			return scenarios.BadParam(fmt.Errorf("replica-read --variant remote-apply: the primary %s has no synchronous replica (pg_stat_replication: %s), so remote_apply would not wait for anything; name the replica in synchronous_standby_names (scripts/cluster.sh does)",
				t.s.DB().Addr(), orUnknown(sync.String)))
		}
	case sqldb.MySQL:
		var behind sql.NullString
		err := t.replica.Admin(ctx, func(ctx context.Context, q sqldb.Querier) error {
			rows, err := q.Query(ctx, "SHOW SLAVE STATUS")
			if err != nil {
				return err
			}
			if len(rows.Values) == 0 {
				return errNotReplica
			}
			for i, c := range rows.Columns {
				if c == "Seconds_Behind_Master" {
					behind.String, behind.Valid = fmt.Sprint(asString(rows.Values[0][i])), true
				}
			}
			return nil
		})
		if errors.Is(err, errNotReplica) {
			return scenarios.BadParam(fmt.Errorf("replica-read: the read endpoint %s replicates from nothing (SHOW SLAVE STATUS is empty): set --mysql-read-dsn to a replica of the primary", t.replica.Addr()))
		}
		if err != nil {
			return fmt.Errorf("replica-read: cannot ask %s whether it is a replica: %w", t.replica.Addr(), err)
		}
		replica += ", " + orUnknown(behind.String) + " s behind the primary at start"
	}
	t.notes = append(t.notes, "topology: "+primary+"; "+replica)
	return nil
}

var errNotReplica = errors.New("not a replica")

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func asString(v any) string {
	if b, ok := v.([]byte); ok {
		return string(b)
	}
	return fmt.Sprint(v)
}

func (t *replicaTarget) Prepare(ctx context.Context) error {
	return prepareOrUndo(ctx, t.prepare, t.Cleanup)
}

func (t *replicaTarget) prepare(ctx context.Context) error {
	t.claims = t.s.Table("replica_claims")
	cols := "id " + t.d.autoID + ", k VARCHAR(64) NOT NULL"
	if t.variant == Conditional {
		cols += ", UNIQUE (k)"
	}
	if err := t.s.Create(ctx, t.claims, cols); err != nil {
		return err
	}
	// The table reaches the replica by replication too: wait for it, or the
	// first checks fail on a missing table instead of reading the past.
	deadline := time.Now().Add(sqldb.AdminTimeout)
	for {
		err := t.replica.Admin(ctx, func(ctx context.Context, q sqldb.Querier) error {
			var n int
			return q.QueryRow(ctx, "SELECT COUNT(*) FROM "+t.claims).Scan(&n)
		})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replica-read: table %s did not reach the replica %s within %s — is it replicating from %s? %w",
				t.claims, t.replica.Addr(), sqldb.AdminTimeout, t.s.DB().Addr(), err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (t *replicaTarget) Cleanup(ctx context.Context) error { return t.s.Cleanup(ctx) }

func (t *replicaTarget) Reset(_ context.Context, burst int) (runner.Subject, error) {
	return runner.Subject{Burst: burst, Key: "token" + strconv.Itoa(burst)}, nil
}

// Effects counts the claims on the primary: the ground truth.
func (t *replicaTarget) Effects(ctx context.Context, s runner.Subject) (int, error) {
	return t.s.count(ctx, "SELECT COUNT(*) FROM "+t.claims+" WHERE k = ?", s.Key)
}

func (t *replicaTarget) Notes() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	notes := append([]string(nil), t.notes...)
	if t.variant != PrimaryRead {
		notes = append(notes, fmt.Sprintf("%d checks on the replica missed a row the primary had already committed (counted by reading the primary right after)", t.stale))
	}
	return notes
}

func (t *replicaTarget) Open(ctx context.Context, _ int, workers int) (runner.App, error) {
	return &replicaApp{t: t, primary: t.s.DB().Pool(workers), reader: t.replica.Pool(workers)}, nil
}

type replicaApp struct {
	t               *replicaTarget
	primary, reader sqldb.Pool
}

func (a *replicaApp) Close() error { return errors.Join(a.primary.Close(), a.reader.Close()) }

func (a *replicaApp) Session(ctx context.Context, _ int) (runner.Session, error) {
	pc, err := a.t.s.conn(ctx, a.primary)
	if err != nil {
		return nil, err
	}
	rc, err := a.t.s.conn(ctx, a.reader)
	if err != nil {
		pc.Close()
		return nil, fmt.Errorf("replica-read: the replica: %w", err)
	}
	return &replicaSession{t: a.t, primary: pc, reader: rc}, nil
}

type replicaSession struct {
	t       *replicaTarget
	primary sqldb.Conn
	reader  sqldb.Conn
}

func (s *replicaSession) Close() error { return errors.Join(s.primary.Close(), s.reader.Close()) }

func (s *replicaSession) Attempt(ctx context.Context, sub runner.Subject, w *runner.Worker) runner.Outcome {
	if s.t.d.Dialect == sqldb.Postgres {
		return s.attemptPostgres(ctx, sub, w)
	}
	return s.attemptMySQL(ctx, sub, w)
}

// lockName is the subject's lock, unique to the run.
func (s *replicaSession) lockName(sub runner.Subject) string { return s.t.p.Prefix() + sub.Key }

// check reads whether the subject is claimed: on the replica, or on q (the
// primary) for primary-read. It counts the stale reads.
func (s *replicaSession) check(ctx context.Context, q sqldb.Querier, sub runner.Subject) (bool, error) {
	query := s.t.d.q("SELECT COUNT(*) FROM " + s.t.claims + " WHERE k = ?")
	if s.t.variant != PrimaryRead {
		q = s.reader
	}
	var n int
	if err := q.QueryRow(ctx, query, sub.Key).Scan(&n); err != nil {
		return false, s.t.d.wrap(err)
	}
	return n > 0, nil
}

// noteStale counts a check that found nothing on the replica while the
// primary, read now, already had the row: the past, read.
func (s *replicaSession) noteStale(ctx context.Context, q sqldb.Querier, sub runner.Subject, found bool) {
	if found || s.t.variant == PrimaryRead {
		return
	}
	var n int
	if err := q.QueryRow(ctx, s.t.d.q("SELECT COUNT(*) FROM "+s.t.claims+" WHERE k = ?"), sub.Key).Scan(&n); err == nil && n > 0 {
		s.t.mu.Lock()
		s.t.stale++
		s.t.mu.Unlock()
	}
}

func (s *replicaSession) insert(ctx context.Context, q sqldb.Querier, sub runner.Subject) runner.Outcome {
	if _, _, err := q.Exec(ctx, s.t.d.q("INSERT INTO "+s.t.claims+" (k) VALUES (?)"), sub.Key); err != nil {
		err = s.t.d.wrap(err)
		if errors.Is(err, errDuplicate) {
			return runner.Refused(errors.New("already there (unique key)"))
		}
		return outcomeOf(err)
	}
	return runner.Done()
}

func outcomeOf(err error) runner.Outcome {
	if errors.Is(err, errConflict) {
		return runner.Retry(err)
	}
	return runner.Failed(err)
}

// attemptPostgres: the lock is a transaction-scoped advisory lock, released
// by the commit — after the commit is durable, and with remote-apply after
// the replica applied it.
func (s *replicaSession) attemptPostgres(ctx context.Context, sub runner.Subject, w *runner.Worker) runner.Outcome {
	tx, err := s.primary.Begin(ctx, "")
	if err != nil {
		return runner.Failed(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", s.lockName(sub)); err != nil {
		return outcomeOf(s.t.d.wrap(err))
	}
	w.Step(ctx, "check")
	found, err := s.check(ctx, tx, sub)
	if err != nil {
		return outcomeOf(err)
	}
	if found {
		return runner.Refused(errors.New("already there"))
	}
	s.noteStale(ctx, tx, sub, found)
	w.Step(ctx, "act")
	if o := s.insert(ctx, tx, sub); o.Class != runner.Executed {
		return o
	}
	if s.t.variant == RemoteApply {
		if _, _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = remote_apply"); err != nil {
			return runner.Failed(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return outcomeOf(s.t.d.wrap(err))
	}
	return runner.Done()
}

// attemptMySQL: GET_LOCK is the session's, held across the autocommitted
// check and insert and released after them (and, for gtid-wait, after the
// replica applied the insert).
func (s *replicaSession) attemptMySQL(ctx context.Context, sub runner.Subject, w *runner.Worker) runner.Outcome {
	var got sql.NullInt64
	if err := s.primary.QueryRow(ctx, "SELECT GET_LOCK(?, ?)", s.lockName(sub), int(replicaLockWait/time.Second)).Scan(&got); err != nil {
		return runner.Failed(err)
	}
	if got.Int64 != 1 {
		return runner.Failed(fmt.Errorf("GET_LOCK did not grant the lock within %s", replicaLockWait))
	}
	defer s.primary.Exec(context.WithoutCancel(ctx), "DO RELEASE_LOCK(?)", s.lockName(sub))
	w.Step(ctx, "check")
	found, err := s.check(ctx, s.primary, sub)
	if err != nil {
		return outcomeOf(err)
	}
	if found {
		return runner.Refused(errors.New("already there"))
	}
	s.noteStale(ctx, s.primary, sub, found)
	w.Step(ctx, "act")
	if o := s.insert(ctx, s.primary, sub); o.Class != runner.Executed {
		return o
	}
	if s.t.variant == GTIDWait {
		var gtid string
		if err := s.primary.QueryRow(ctx, "SELECT @@last_gtid").Scan(&gtid); err != nil {
			return runner.Failed(err)
		}
		var applied sql.NullInt64
		if err := s.reader.QueryRow(ctx, "SELECT MASTER_GTID_WAIT(?, ?)", gtid, int(replicaLockWait/time.Second)).Scan(&applied); err != nil {
			return runner.Failed(err)
		}
		if applied.Int64 != 0 {
			return runner.Failed(fmt.Errorf("the replica did not apply GTID %s within %s", gtid, replicaLockWait))
		}
	}
	return runner.Done()
}

// applyDelay words a PostgreSQL replica's recovery_min_apply_delay, which
// scripts/cluster.sh sets so that its replica lags as a loaded one does: a
// reader must know that the lag was set, not found.
func applyDelay(setting string) string {
	if setting == "" || setting == "0" {
		return ""
	}
	return ", applying each commit " + setting + " after the primary made it (recovery_min_apply_delay, a lag set on purpose)"
}

// pgReplication words how a PostgreSQL primary's commits reach its
// replicas, from pg_stat_replication's sync_state list and the server's
// synchronous_commit. A standby listed in synchronous_standby_names reads
// "sync" there, yet with synchronous_commit = local or off no commit waits
// for it: "replication sync" alone would tell the reader the opposite of
// what the run measured.
func pgReplication(states, commit string) string {
	list := "," + states + ","
	named := strings.Contains(list, ",sync,") || strings.Contains(list, ",quorum,")
	switch {
	case states == "":
		return "replication unknown (pg_stat_replication lists no replica)"
	case !named:
		return "replication asynchronous"
	case commit == "local" || commit == "off":
		return "replication asynchronous for commits (synchronous_commit = " + commit + "; the replica is a synchronous standby only for a session that asks, as remote-apply does)"
	case commit == "remote_apply":
		return "replication synchronous (synchronous_commit = remote_apply: a commit waits until the replica applied it)"
	case commit == "":
		return "replication " + states + " (synchronous_commit unknown)"
	default:
		return "replication synchronous (synchronous_commit = " + commit + ": a commit waits for the replica's copy, not for it to be applied and readable)"
	}
}
