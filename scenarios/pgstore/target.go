package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/runs"
)

// The engine contract, and the optional parts this target promises:
// checked here so a changed signature fails the build, not the report.
var (
	_ runner.Target    = (*target)(nil)
	_ runner.Describer = (*target)(nil)
	_ runner.Noter     = (*target)(nil)
)

const (
	// adminTimeout bounds each setup, reset and counting statement, so a
	// server that stops answering ends the run instead of hanging it.
	adminTimeout = sqldb.AdminTimeout
	// closeTimeout bounds goodbyes and rollbacks, which must not hold up a
	// run that is already failing.
	closeTimeout = sqldb.CloseTimeout
)

// target is one scenario on PostgreSQL for one run.
type target struct {
	sc    scenario
	p     scenarios.Params
	cfg   *pgx.ConnConfig
	addr  string // host:port, for messages
	n     names
	begin string // the statement that opens an attempt's transaction

	server string // "PostgreSQL 15.20"
	level  string // isolation in force, as the server reports it
	limits limits

	open atomic.Int64 // connections the run holds now

	mu         sync.Mutex
	admin      *pgx.Conn // setup, resets and counting; never used by attempts
	created    []string  // sanitized names of the tables Prepare made
	registered bool      // the run is in racetest_runs (see package runs)
}

// names are the run's tables, quoted for SQL.
type names struct {
	prefix                                            string
	effects, coupons, saves, sanctions, locks, grants string
}

func newNames(prefix string) names {
	q := func(s string) string { return pgx.Identifier{prefix + s}.Sanitize() }
	return names{
		prefix:    prefix,
		effects:   q("effects"),
		coupons:   q("coupons"),
		saves:     q("saves"),
		sanctions: q("sanctions"),
		locks:     q("locks"),
		grants:    q("grants"),
	}
}

// index names an index of the run (indexes share the schema's namespace).
func (n names) index(s string) string { return pgx.Identifier{n.prefix + s}.Sanitize() }

func factory(sc scenario) scenarios.Factory {
	return func(ctx context.Context, p scenarios.Params) (runner.Target, error) {
		if err := p.Validate(); err != nil {
			return nil, err
		}
		if !sc.accepts(p.Variant) {
			if len(sc.variants) == 0 {
				return nil, scenarios.BadParam(fmt.Errorf("postgres: %s has no variants (got %q) — leave the variant empty", sc.name, p.Variant))
			}
			return nil, scenarios.BadParam(fmt.Errorf("postgres: %s has no variant %q — use one of: %s", sc.name, p.Variant, strings.Join(sc.variants, ", ")))
		}
		if p.TTL == 0 {
			p.TTL = scenarios.DefaultTTL
		}
		cfg, err := Config(p.Conn.Get(Name), p)
		if err != nil {
			return nil, err
		}
		t := &target{sc: sc, p: p, cfg: cfg, addr: sqldb.PostgresAddr(cfg), n: newNames(p.Prefix()), begin: "BEGIN"}
		if lvl, _ := sqldb.ParseIsolation(p.Isolation); lvl != "" {
			t.begin = "BEGIN ISOLATION LEVEL " + lvl.SQL()
		}
		if err := t.probe(ctx); err != nil {
			return nil, err
		}
		return t, nil
	}
}

// probe connects once, so that a wrong URL or a missing server fails the
// factory within seconds, and reads what the report and the error messages
// name: the server's version, the isolation in force, the connection limits.
func (t *target) probe(ctx context.Context) error {
	c, err := t.connect(ctx)
	if err != nil {
		return err
	}
	defer t.release(c)
	qctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	var version, serverVersion string
	l := &t.limits
	err = c.QueryRow(qctx, `SELECT version(), current_setting('server_version'), current_setting('transaction_isolation'),
		current_setting('max_connections')::int, current_setting('superuser_reserved_connections')::int,
		coalesce(current_setting('reserved_connections', true), '0')::int,
		r.rolsuper, r.rolconnlimit, d.datconnlimit, current_user, current_database()
		FROM pg_roles r, pg_database d WHERE r.rolname = current_user AND d.datname = current_database()`).Scan(
		&version, &serverVersion, &t.level, &l.maxConnections, &l.superReserved, &l.reserved,
		&l.superuser, &l.roleLimit, &l.dbLimit, &l.user, &l.db)
	if err != nil {
		return fmt.Errorf("postgres: %s answered the connection but not a query on its settings: %w", t.addr, err)
	}
	t.server = sqldb.PostgresServerName(version, serverVersion)
	return nil
}

// Server names the server the run measured.
func (t *target) Server() string { return t.server }

// Notes say what decides the outcome on this server: the isolation level in
// force, and the variant's caveat.
func (t *target) Notes() []string {
	var notes []string
	if t.p.Isolation == "" {
		notes = append(notes, fmt.Sprintf("postgres: isolation %s (the server's default; --isolation changes it)", t.level))
	} else {
		notes = append(notes, fmt.Sprintf("postgres: isolation %s on every connection (--isolation %s)", t.level, t.p.Isolation))
	}
	if t.level == "read uncommitted" {
		notes = append(notes, "postgres: READ UNCOMMITTED behaves as READ COMMITTED in PostgreSQL (no dirty reads)")
	}
	if n := t.sc.note; n != nil {
		if s := n(t); s != "" {
			notes = append(notes, s)
		}
	}
	return notes
}

// adminConn returns the run's own connection, dialling it again when a
// cancelled statement cost the previous one. t.mu must be held.
func (t *target) adminConn(ctx context.Context) (*pgx.Conn, error) {
	if t.admin != nil && !t.admin.IsClosed() {
		return t.admin, nil
	}
	if t.admin != nil {
		t.release(t.admin)
		t.admin = nil
	}
	c, err := t.connect(ctx)
	if err != nil {
		return nil, err
	}
	t.admin = c
	return c, nil
}

// withAdmin runs f on the run's own connection with a bounded context.
func (t *target) withAdmin(ctx context.Context, f func(ctx context.Context, c *pgx.Conn) error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, err := t.adminConn(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	err = f(ctx, c)
	if err != nil && c.IsClosed() && ctx.Err() == nil {
		return fmt.Errorf("lost the connection to %s (%w) — did the server stop or restart?", t.addr, err)
	}
	return err
}

func (t *target) closeAdmin() {
	if t.admin != nil {
		t.release(t.admin)
		t.admin = nil
	}
}

// Prepare creates the scenario's tables in one implicit transaction (a
// multi-statement simple query), so a failure leaves nothing behind.
func (t *target) Prepare(ctx context.Context) error {
	// racetest's own DDL is never cut short: a statement abandoned mid-way
	// may still commit on the server after the cleanup looked. Each
	// statement has its deadline (adminTimeout); the run stops after.
	ctx = context.WithoutCancel(ctx)
	tables := t.sc.tables(t.n, t.p)
	var ddl, made []string
	for _, tb := range tables {
		ddl = append(ddl, tb.ddl...)
		made = append(made, tb.name)
	}
	err := t.withAdmin(ctx, func(ctx context.Context, c *pgx.Conn) error {
		return runs.RegisterSQL(ctx, runs.Postgres, runs.Pgx(c), runs.New(t.p.RunID))
	})
	var inUse *runs.InUseError
	t.mu.Lock()
	// Unless the server said the id is taken, the registration may have
	// been written even if no answer came: Cleanup removes it.
	t.registered = !errors.As(err, &inUse)
	t.mu.Unlock()
	if err != nil {
		if cerr := t.Cleanup(ctx); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return err
	}
	err = t.withAdmin(ctx, func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, strings.Join(ddl, ";\n"))
		return err
	})
	if err != nil {
		var pe *pgconn.PgError
		t.mu.Lock()
		t.closeAdmin()
		if !errors.As(err, &pe) {
			// No answer from the server (Ctrl-C, a lost connection): the
			// statement may have committed. Drop whatever of it exists;
			// a refusal by the server rolled all of it back.
			t.created = made
		}
		t.mu.Unlock()
		if cerr := t.Cleanup(ctx); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return fmt.Errorf("postgres: cannot create the run's tables (%s) in database %q: %w — the user needs CREATE on the default schema",
			strings.Join(made, ", "), t.cfg.Database, err)
	}
	t.mu.Lock()
	t.created = made
	t.mu.Unlock()
	return nil
}

// Cleanup drops exactly the tables Prepare made (their indexes and
// sequences go with them). It may run again: the second time has nothing
// to drop.
//
// It dials a connection of its own, under a deadline of its own: the admin
// connection may be the one a Ctrl-C broke mid-statement (pgx closes a
// connection whose statement was cancelled), and ctx may be cancelled.
func (t *target) Cleanup(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closeAdmin()
	if len(t.created) == 0 && !t.registered {
		return nil
	}
	list := strings.Join(t.created, ", ")
	dctx, cancel := scenarios.CleanupContext(ctx)
	defer cancel()
	// A paused server that answers before the deadline still gets its
	// tables dropped (see scenarios.NoAnswer).
	c, err := scenarios.RetryNoAnswer(dctx, t.connect)
	if err != nil {
		return fmt.Errorf("postgres: cannot drop this run's tables %s: %w — drop them by hand (DROP TABLE %s) or run 'racetest clean --run-id %s'", list, err, list, t.p.RunID)
	}
	defer t.release(c)
	if len(t.created) > 0 {
		if _, err := c.Exec(dctx, "DROP TABLE IF EXISTS "+list); err != nil {
			return fmt.Errorf("postgres: cannot drop this run's tables %s: %w — drop them by hand (DROP TABLE %s) or run 'racetest clean --run-id %s'", list, err, list, t.p.RunID)
		}
		t.created = nil
	}
	if t.registered {
		if err := runs.UnregisterSQL(dctx, runs.Postgres, runs.Pgx(c), t.p.RunID); err != nil {
			return fmt.Errorf("postgres: %w — the tables are gone; 'racetest clean --run-id %s' removes the record", err, t.p.RunID)
		}
		t.registered = false
	}
	return nil
}

// Reset makes the burst's subject, and whatever row it competes for.
func (t *target) Reset(ctx context.Context, burst int) (runner.Subject, error) {
	s := runner.Subject{Burst: burst, Key: t.p.Prefix() + strconv.Itoa(burst)}
	if t.sc.reset == nil {
		return s, nil
	}
	err := t.withAdmin(ctx, func(ctx context.Context, c *pgx.Conn) error { return t.sc.reset(ctx, t, c, s) })
	if err != nil {
		return s, fmt.Errorf("postgres: prepare the subject: %w", err)
	}
	return s, nil
}

// Effects counts the burst's effects in the store.
func (t *target) Effects(ctx context.Context, s runner.Subject) (int, error) {
	var n int64
	err := t.withAdmin(ctx, func(ctx context.Context, c *pgx.Conn) error {
		var err error
		n, err = t.sc.effects(ctx, t, c, s)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("postgres: count effects: %w", err)
	}
	return int(n), nil
}

// Open starts one replica: its own memory (memory-set's processing set) and
// its own connections, one per worker, dialled by Session.
func (t *target) Open(_ context.Context, replica, _ int) (runner.App, error) {
	return &app{t: t, replica: replica}, nil
}

type app struct {
	t       *target
	replica int

	// memory is memory-set's processing set: this replica's own.
	memory scenarios.ReplicaMemory
}

// Session dials worker's own connection and checks it with a round trip
// that also proves the isolation level it will run at.
func (a *app) Session(ctx context.Context, worker int) (runner.Session, error) {
	c, err := a.t.connect(ctx)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	var lvl string
	if err := c.QueryRow(pctx, "SHOW transaction_isolation").Scan(&lvl); err != nil {
		a.t.release(c)
		return nil, fmt.Errorf("postgres: worker %d connected but did not answer: %w", worker, err)
	}
	if lvl != a.t.level {
		a.t.release(c)
		return nil, fmt.Errorf("postgres: worker %d runs at isolation %s, the run expected %s — is a pooler between racetest and the server?", worker, lvl, a.t.level)
	}
	s := &session{a: a, t: a.t, c: c}
	s.pid.Store(int64(c.PgConn().PID()))
	return s, nil
}

// LockWait asks the server, on the run's own connection, whether the
// session's statement waits on a lock (pg_blocking_pids): an explorer's
// blocked step.
func (s *session) LockWait(ctx context.Context) (waiting bool, err error) {
	err = s.t.withAdmin(ctx, func(ctx context.Context, c *pgx.Conn) error {
		waiting, err = sqldb.LockWait(ctx, sqldb.Postgres, sqldb.Pgx(c), s.pid.Load())
		return err
	})
	return waiting, err
}

func (a *app) Close() error { return nil }

type session struct {
	a   *app
	t   *target
	c   *pgx.Conn
	pid atomic.Int64 // c's backend, for lock-wait questions from another connection
}

func (s *session) Attempt(ctx context.Context, subj runner.Subject, w *runner.Worker) runner.Outcome {
	if s.c.IsClosed() {
		// A timed-out attempt costs its connection: pgx ends a cancelled
		// statement by putting a deadline on the socket. Dial again rather
		// than fail every later attempt of this worker.
		s.t.release(s.c)
		c, err := s.t.connect(ctx)
		if err != nil && (scenarios.Expired(ctx) || errors.Is(err, context.DeadlineExceeded)) {
			// The attempt's own deadline ran out while dialling: the
			// server is up, the --timeout is shorter than a connection.
			return runner.Failed(scenarios.ErrReconnectTimeout)
		}
		if err != nil {
			return runner.Failed(fmt.Errorf("reconnect after a lost connection: %w", err))
		}
		s.c = c
		s.pid.Store(int64(c.PgConn().PID()))
	}
	if s.c.PgConn().TxStatus() != 'I' {
		s.rollback(ctx)
	}
	return s.t.sc.attempt(ctx, s, subj, w)
}

func (s *session) Close() error {
	s.t.release(s.c)
	s.c = nil
	return nil
}

// rollback ends the attempt's transaction, if one is open, even when the
// attempt's context is spent. A connection that cannot roll back is closed,
// so the next attempt never runs inside a stale transaction.
func (s *session) rollback(ctx context.Context) {
	c := s.c
	if c.IsClosed() || c.PgConn().TxStatus() == 'I' {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	if _, err := c.Exec(rctx, "ROLLBACK"); err != nil {
		_ = c.Close(rctx)
	}
}

// commit ends the attempt's transaction; only a COMMIT the server confirms
// counts as executed (under SERIALIZABLE it can fail here, with 40001).
func (s *session) commit(ctx context.Context) runner.Outcome {
	tag, err := s.c.Exec(ctx, "COMMIT")
	if err != nil {
		s.rollback(ctx)
		return sqldb.Classify(fmt.Errorf("commit: %w", err))
	}
	if tag.String() != "COMMIT" {
		return runner.Failed(fmt.Errorf("commit: the server rolled the transaction back (%s)", tag))
	}
	return runner.Done()
}
