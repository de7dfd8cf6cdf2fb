package anomalies

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/mysqlstore"
	"github.com/racetest/racetest/scenarios/pgstore"
	"github.com/racetest/racetest/scenarios/sqlrun"
)

// The engine contract, and the optional parts the SQL target promises.
var (
	_ runner.Target     = (*sqlTarget)(nil)
	_ runner.Allowancer = (*sqlTarget)(nil)
	_ runner.Requirer   = (*sqlTarget)(nil)
	_ runner.Describer  = (*sqlTarget)(nil)
	_ runner.Noter      = (*sqlTarget)(nil)
	_ runner.Closer     = (*sqlTarget)(nil)
)

// dialect is what the anomaly tables need beyond sqldb: the backend's name,
// its connection string, and its DDL spellings.
type dialect struct {
	sqldb.Dialect
	backend    string
	connString func(p scenarios.Params) string
	// tableOptions ends every CREATE TABLE (the storage engine).
	tableOptions func(p scenarios.Params) (string, error)
}

var mysqlDialect = &dialect{
	Dialect:    sqldb.MySQL,
	backend:    "mysql",
	connString: func(p scenarios.Params) string { return p.Conn.Get(mysqlstore.Name) },
	tableOptions: func(p scenarios.Params) (string, error) {
		e, err := mysqlstore.EngineName(p.Engine)
		if err != nil {
			return "", err
		}
		return " ENGINE=" + e, nil
	},
}

var pgDialect = &dialect{
	Dialect:      sqldb.Postgres,
	backend:      "postgres",
	connString:   func(p scenarios.Params) string { return p.Conn.Get(pgstore.Name) },
	tableOptions: func(p scenarios.Params) (string, error) { return "", nil },
}

// table is one table a pattern creates: its columns, and indexes as
// column lists.
type table struct {
	part, columns string
	indexes       []string
}

// sqlAttempt is one variant's attempt on one worker's connection.
type sqlAttempt func(ctx context.Context, s *sqlSession, subj runner.Subject, w *runner.Worker) runner.Outcome

// sqlPattern is one scenario's statements on the SQL servers.
type sqlPattern struct {
	tables   []table
	reset    func(ctx context.Context, t *sqlTarget, subj runner.Subject) error
	attempts map[string]sqlAttempt
	tally    func(ctx context.Context, t *sqlTarget, subj runner.Subject) (tally, error)
	note     func(t *sqlTarget) string
}

func sqlPatternOf(scenario string) *sqlPattern {
	switch scenario {
	case LostUpdate:
		return lostUpdateSQL
	case WriteSkew:
		return writeSkewSQL
	case JobQueue:
		return jobQueueSQL
	}
	panic("anomalies: no SQL pattern for " + scenario)
}

func sqlFactory(scenario string, d *dialect) scenarios.Factory {
	return func(ctx context.Context, p scenarios.Params) (runner.Target, error) {
		if err := p.Validate(); err != nil {
			return nil, scenarios.BadParam(err)
		}
		variant, err := pickVariant(d.backend, scenario, p.Variant)
		if err != nil {
			return nil, err
		}
		level, err := sqldb.ParseIsolation(p.Isolation)
		if err != nil {
			return nil, scenarios.BadParam(err)
		}
		opts, err := d.tableOptions(p)
		if err != nil {
			return nil, err
		}
		pat := sqlPatternOf(scenario)
		db, err := sqldb.Open(ctx, d.Dialect, d.connString(p), sqldb.Options{
			Dial: p.Dial, AppName: "racetest " + p.RunID, Isolation: level})
		if err != nil {
			return nil, err
		}
		t := &sqlTarget{name: scenario, variant: variant, pat: pat, attempt: pat.attempts[variant],
			p: p, d: d, db: db, run: sqlrun.New(db, p, opts), tallies: map[int]tally{}}
		if err := t.probe(ctx); err != nil {
			db.Close()
			return nil, err
		}
		return t, nil
	}
}

// sqlTarget is one anomaly scenario on one SQL server for one run.
type sqlTarget struct {
	name, variant string
	pat           *sqlPattern
	attempt       sqlAttempt
	p             scenarios.Params
	d             *dialect
	db            *sqldb.DB
	run           *sqlrun.Server // the tables the run made, and its registration

	level    string // the isolation in force, as the server names it
	snapshot string // MariaDB's innodb_snapshot_isolation ("" elsewhere)

	mu      sync.Mutex
	tallies map[int]tally // by burst, from Effects until Required
}

// probe reads what decides the outcome on this server: the isolation level
// in force and, on MariaDB, innodb_snapshot_isolation.
func (t *sqlTarget) probe(ctx context.Context) error {
	var err error
	if t.level, err = t.db.Isolation(ctx); err != nil {
		return err
	}
	if t.d.Dialect == sqldb.MySQL {
		v, ok, err := t.db.Setting(ctx, "innodb_snapshot_isolation")
		if err != nil {
			return err
		}
		if ok {
			t.snapshot = v
		}
	}
	return nil
}

// SnapshotIsolationOn is how Server marks a MariaDB whose repeatable read
// refuses to write over a row changed since the snapshot: the catalog's
// expectations match on it.
const SnapshotIsolationOn = "innodb_snapshot_isolation=ON"

// Server names the server, and the setting that changes what repeatable
// read does on MariaDB when it is on.
func (t *sqlTarget) Server() string {
	if on(t.snapshot) {
		return t.db.Server() + " (" + SnapshotIsolationOn + ")"
	}
	return t.db.Server()
}

func on(v string) bool { return v == "1" || strings.EqualFold(v, "ON") }

func (t *sqlTarget) Notes() []string {
	var notes []string
	if t.p.Isolation == "" {
		notes = append(notes, fmt.Sprintf("%s: isolation %s (the server's default; --isolation changes it)", t.d.backend, t.level))
	} else {
		notes = append(notes, fmt.Sprintf("%s: isolation %s on every connection (--isolation %s)", t.d.backend, t.level, t.p.Isolation))
	}
	if t.snapshot != "" {
		word := "OFF"
		if on(t.snapshot) {
			word = "ON"
		}
		notes = append(notes, "mysql: MariaDB innodb_snapshot_isolation="+word+
			" (ON: REPEATABLE READ refuses to write a row changed since its snapshot; OFF: it writes over it)")
	}
	if t.pat.note != nil {
		if n := t.pat.note(t); n != "" {
			notes = append(notes, n)
		}
	}
	return notes
}

// tableName is part's name in the run's namespace.
func (t *sqlTarget) tableName(part string) string { return t.run.Table(part) }

// q rewrites a statement written with ? for the dialect.
func (t *sqlTarget) q(query string) string { return t.d.Rebind(query) }

// Prepare registers the run and creates the pattern's tables; when it fails
// it drops what it made (the runner cleans up only after a Prepare that
// succeeded). It runs to its end after Ctrl-C: each statement has its own
// deadline, and a CREATE abandoned mid-way may still run on the server.
func (t *sqlTarget) Prepare(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	err := t.prepare(ctx)
	if err == nil {
		return nil
	}
	if cerr := t.Cleanup(ctx); cerr != nil {
		return errors.Join(err, cerr)
	}
	return err
}

func (t *sqlTarget) prepare(ctx context.Context) error {
	for _, tb := range t.pat.tables {
		name := t.tableName(tb.part)
		if err := t.run.Create(ctx, name, tb.columns); err != nil {
			return err
		}
		for i, cols := range tb.indexes {
			idx := name + "_i" + strconv.Itoa(i)
			if err := t.db.Exec(ctx, "CREATE INDEX "+idx+" ON "+name+" ("+cols+")"); err != nil {
				return fmt.Errorf("%s: could not index %s: %w", t.d.backend, name, err)
			}
		}
	}
	return nil
}

// Cleanup drops the tables the run made, then its registration (see
// sqlrun.Server.Cleanup).
func (t *sqlTarget) Cleanup(ctx context.Context) error { return t.run.Cleanup(ctx) }

// Close closes the run's own connection.
func (t *sqlTarget) Close() error { return t.run.Close() }

func (t *sqlTarget) Reset(ctx context.Context, burst int) (runner.Subject, error) {
	s := runner.Subject{Burst: burst, Key: t.p.Prefix() + strconv.Itoa(burst), Data: int64(burst) + 1}
	if err := t.pat.reset(ctx, t, s); err != nil {
		return s, fmt.Errorf("%s: prepare burst %d: %w", t.d.backend, burst, err)
	}
	return s, nil
}

// Effects counts the burst in the store, and keeps the counts that decide
// its allowance and its floor for Allowed and Required, which the runner
// asks next.
func (t *sqlTarget) Effects(ctx context.Context, s runner.Subject) (int, error) {
	tl, err := t.pat.tally(ctx, t, s)
	if err != nil {
		return 0, fmt.Errorf("%s: count effects: %w", t.d.backend, err)
	}
	t.mu.Lock()
	t.tallies[s.Burst] = tl
	t.mu.Unlock()
	return tl.effects, nil
}

// Allowed is the most effects the burst's commits make correct.
func (t *sqlTarget) Allowed(s runner.Subject, _ [runner.NumClasses]int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tallies[s.Burst].allowed
}

// Required is the fewest effects the burst's commits make correct.
func (t *sqlTarget) Required(s runner.Subject, _ [runner.NumClasses]int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.tallies[s.Burst].required
	delete(t.tallies, s.Burst)
	return r
}

// count reads one number (written with ?).
func (t *sqlTarget) count(ctx context.Context, query string, args ...any) (int, error) {
	return t.db.Count(ctx, query, args...)
}

func (t *sqlTarget) Open(_ context.Context, _, workers int) (runner.App, error) {
	return &sqlApp{t: t, pool: t.db.Pool(workers)}, nil
}

type sqlApp struct {
	t    *sqlTarget
	pool sqldb.Pool
}

// Session takes the worker's own connection, dialled and checked now.
func (a *sqlApp) Session(ctx context.Context, worker int) (runner.Session, error) {
	cctx, cancel := context.WithTimeout(ctx, sqldb.AdminTimeout)
	defer cancel()
	c, err := a.pool.Conn(cctx)
	if err != nil {
		return nil, fmt.Errorf("%s: worker %d could not connect to %s: %w", a.t.d.backend, worker, a.t.db.Addr(), err)
	}
	id, err := sqldb.SessionID(cctx, a.t.db.Dialect(), c)
	if err != nil {
		c.Close()
		return nil, err
	}
	s := &sqlSession{a: a, t: a.t, c: c}
	s.id.Store(id)
	return s, nil
}

func (a *sqlApp) Close() error { return a.pool.Close() }

type sqlSession struct {
	a *sqlApp
	t *sqlTarget
	c sqldb.Conn
	// stale: the last attempt ended with its context, which may have cost
	// the connection (pgx closes one whose statement was cancelled).
	stale bool
	id    atomic.Int64 // the server's id of the connection, for lock-wait questions
}

// LockWait asks the server, on the run's own connection, whether the
// session's statement waits on a lock: an explorer's blocked step.
func (s *sqlSession) LockWait(ctx context.Context) (waiting bool, err error) {
	err = s.t.db.Admin(ctx, func(ctx context.Context, q sqldb.Querier) error {
		waiting, err = sqldb.LockWait(ctx, s.t.db.Dialect(), q, s.id.Load())
		return err
	})
	return waiting, err
}

func (s *sqlSession) Attempt(ctx context.Context, subj runner.Subject, w *runner.Worker) runner.Outcome {
	if s.stale {
		s.c.Close()
		c, err := s.a.pool.Conn(ctx)
		if err != nil {
			if scenarios.Expired(ctx) {
				return runner.Failed(scenarios.ErrReconnectTimeout)
			}
			return runner.Failed(fmt.Errorf("reconnect after a timed-out attempt: %w", err))
		}
		id, err := sqldb.SessionID(ctx, s.t.db.Dialect(), c)
		if err != nil {
			c.Close()
			return runner.Failed(fmt.Errorf("reconnect after a timed-out attempt: %w", err))
		}
		s.c, s.stale = c, false
		s.id.Store(id)
	}
	o := s.t.attempt(ctx, s, subj, w)
	s.stale = ctx.Err() != nil
	return o
}

func (s *sqlSession) Close() error { return s.c.Close() }

// begin opens a transaction at the session's level.
func (s *sqlSession) begin(ctx context.Context) (sqldb.Tx, error) { return s.c.Begin(ctx, "") }

// end commits tx when err is nil and rolls it back otherwise; the commit and
// the rollback run even when the attempt's context has ended, so a
// transaction is never left open on the worker's connection. Only a commit
// the server confirmed is executed (PostgreSQL can refuse at COMMIT).
func end(ctx context.Context, tx sqldb.Tx, err error) error {
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sqldb.AdminTimeout)
	defer cancel()
	if err != nil {
		_ = tx.Rollback(ectx)
		return err
	}
	if err := tx.Commit(ectx); err != nil {
		_ = tx.Rollback(ectx)
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// errDeclined marks an attempt the pattern itself turned away.
type errDeclined struct{ why string }

func (e errDeclined) Error() string { return e.why }

// outcome turns an attempt's error into its class: nil is executed, the
// pattern's own refusal is declined, a deadlock or serialization failure is
// a conflict, anything else an error.
func outcome(err error) runner.Outcome {
	var d errDeclined
	switch {
	case err == nil:
		return runner.Done()
	case errors.As(err, &d):
		return runner.Refused(err)
	}
	return sqldb.Classify(err)
}
