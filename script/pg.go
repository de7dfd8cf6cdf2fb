package script

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/pgstore"
)

// postgresDialect: scripts of SQL on PostgreSQL.
var postgresDialect = dialect{backend: "postgres", open: OpenPostgres, lang: sqlLanguage}

// pgStore runs scripts on PostgreSQL. Statements go over the simple query
// protocol, one Query message each: values come back as text, for \gset,
// and a last-byte release holds back exactly the statement.
type pgStore struct {
	mu        sync.Mutex
	deadlocks string // what shortenDeadlocks did, for the notes
	cfg       *pgx.ConnConfig
	addr      string
	server    string
	level     string
	admin     *pgConn
	plan      *sqldb.SnapshotPlan // --effects auto, made at the first snapshot
}

// Snapshot reads the watched tables on racetest's own connection.
func (s *pgStore) Snapshot(ctx context.Context, watch []string) (runner.Snapshot, error) {
	q := sqldb.Pgx(s.admin.c)
	if s.plan == nil {
		p, err := sqldb.PlanSnapshot(ctx, sqldb.Postgres, q, watch)
		if err != nil {
			return nil, err
		}
		s.plan = p
	}
	return sqldb.ReadSnapshot(ctx, s.plan, q)
}

// OpenPostgres connects racetest's own connection to the server of
// p.Conn.Get(pgstore.Name) (through p.Dial) and reads what the banner names.
func OpenPostgres(ctx context.Context, p scenarios.Params) (Store, error) {
	cfg, err := pgstore.Config(p.Conn.Get(pgstore.Name), p)
	if err != nil {
		return nil, err
	}
	s := &pgStore{cfg: cfg, addr: pgAddr(cfg)}
	c, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	s.admin = c
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r := c.c.PgConn().Exec(qctx, "SELECT version(), current_setting('server_version'), current_setting('transaction_isolation')")
	res, err := r.ReadAll()
	if err != nil || len(res) == 0 || len(res[0].Rows) == 0 {
		c.Close()
		return nil, fmt.Errorf("postgres: %s answered the connection but not a query on its version: %v", s.addr, err)
	}
	row := res[0].Rows[0]
	s.server = sqldb.PostgresServerName(string(row[0]), string(row[1]))
	s.level = string(row[2])
	return s, nil
}

func pgAddr(cfg *pgx.ConnConfig) string {
	if strings.HasPrefix(cfg.Host, "/") {
		return cfg.Host
	}
	return net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
}

func (s *pgStore) connect(ctx context.Context) (*pgConn, error) {
	c, err := pgx.ConnectConfig(ctx, s.cfg)
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("postgres: %s refused the connection: %s (SQLSTATE %s) — set --postgres-url or RACETEST_POSTGRES_URL: %w", s.addr, pe.Message, pe.Code, pe)
		}
		return nil, fmt.Errorf("postgres: cannot connect to %s as %q, database %q (%s) — is the server running? set --postgres-url or RACETEST_POSTGRES_URL",
			s.addr, s.cfg.User, s.cfg.Database, sqldb.RedactPostgres(innermost(err).Error()))
	}
	pc := &pgConn{c: c, s: s}
	pc.pid.Store(int64(c.PgConn().PID()))
	s.shortenDeadlocks(ctx, c)
	return pc, nil
}

// DeadlockTimeout is how long a session of racetest's waits on a lock
// before PostgreSQL looks for a deadlock (its deadlock_timeout, 1 s by
// default): explore's orders and bursts that deadlock waited that long
// each, 12 of a 15 s exploration. The victim is the server's choice as
// before: every session waits as long before it looks.
const DeadlockTimeout = "20ms"

// shortenDeadlocks sets the session's deadlock_timeout to DeadlockTimeout
// where the server's is longer and racetest's user may set it (a
// superuser's setting); s.deadlocks says what came of it, for the notes.
func (s *pgStore) shortenDeadlocks(ctx context.Context, c *pgx.Conn) {
	q := "SELECT set_config('deadlock_timeout', '" + DeadlockTimeout + "', false), current_setting('deadlock_timeout') " +
		"WHERE current_setting('deadlock_timeout')::interval > interval '" + DeadlockTimeout + "'"
	_, err := c.PgConn().Exec(ctx, q).ReadAll()
	s.mu.Lock()
	defer s.mu.Unlock()
	var pe *pgconn.PgError
	switch {
	case err == nil:
		if s.deadlocks == "" {
			s.deadlocks = "postgres: deadlock_timeout " + DeadlockTimeout + " on racetest's connections where the server's was longer: a deadlock between attempts ends sooner, and which one it ends is still the server's choice"
		}
	case errors.As(err, &pe) && pe.Code == "42501":
		s.deadlocks = "postgres: racetest's user may not shorten deadlock_timeout (a superuser's setting): each deadlock between attempts lasts the server's deadlock_timeout"
	}
}

func innermost(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

func (s *pgStore) Server() string { return s.server }
func (s *pgStore) Where() string {
	return fmt.Sprintf("%s at %s, database %s, user %s", s.server, s.addr, s.cfg.Database, s.cfg.User)
}
func (s *pgStore) Admin() Conn { return s.admin }

// Reader opens a read-only transaction on racetest's own connection; end
// rolls it back. Its statements go over the extended protocol, one
// statement per message, so that none can end the transaction and write
// after it (SELECT 1; COMMIT; DELETE …). The transaction's BEGIN goes in
// one batch with the first statement, which the server skips when the
// BEGIN fails: a check costs two round trips rather than three, and a
// burst, counted before and after, two fewer (docs/measurements.md,
// "Stop 52").
func (s *pgStore) Reader(ctx context.Context) (Conn, func(), error) {
	if s.admin.c.IsClosed() {
		if err := s.admin.redial(ctx); err != nil {
			return nil, nil, err
		}
	}
	end := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = s.admin.Rollback(ctx)
	}
	return &pgReader{pgConn: s.admin}, end, nil
}

// pgReader is racetest's own connection inside a check's read-only
// transaction, opened with its first statement.
type pgReader struct {
	*pgConn
	begun bool
}

func (c *pgReader) Exec(ctx context.Context, st Stmt) (Reply, error) {
	if c.c.IsClosed() {
		// A new connection would not be in the transaction.
		return Reply{}, errors.New("postgres: the connection closed during the check")
	}
	text := strings.TrimRight(st.Text, " \t\r\n;")
	if c.begun {
		return pgReply(c.c.PgConn().ExecParams(ctx, text, nil, nil, nil, nil).Read())
	}
	c.begun = true
	b := &pgconn.Batch{}
	b.ExecParams(sqldb.Postgres.BeginReadOnly(), nil, nil, nil, nil)
	b.ExecParams(text, nil, nil, nil, nil)
	res, err := c.c.PgConn().ExecBatch(ctx, b).ReadAll()
	switch {
	case len(res) == 0 || res[0].Err != nil:
		if len(res) > 0 {
			err = res[0].Err
		}
		return Reply{}, fmt.Errorf("postgres: opening the read-only transaction a check runs in: %w", cmp.Or(err, errors.New("no answer")))
	case len(res) == 1:
		return Reply{}, cmp.Or(err, errors.New("postgres: no answer to the check's statement"))
	}
	return pgReply(res[1])
}

// pgReply is a check's statement's result as a Reply: its first row.
func pgReply(res *pgconn.Result) (Reply, error) {
	if res.Err != nil {
		return Reply{}, res.Err
	}
	r := Reply{Rows: res.CommandTag.RowsAffected()}
	if len(res.FieldDescriptions) > 0 {
		r.Rows = int64(len(res.Rows))
		if len(res.Rows) > 0 {
			for i, f := range res.FieldDescriptions {
				r.Columns = append(r.Columns, f.Name)
				r.Values = append(r.Values, string(res.Rows[0][i]))
			}
		}
	}
	return r, nil
}

// Rollback leaves the transaction to the Reader's end.
func (*pgReader) Rollback(context.Context) error { return nil }
func (s *pgStore) Notes() []string {
	notes := append([]string{fmt.Sprintf("postgres: isolation level %s (set by --isolation, else the server's default)", s.level)}, s.plan.Notes()...)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deadlocks != "" {
		notes = append(notes, s.deadlocks)
	}
	return notes
}
func (s *pgStore) Close() error { return s.admin.Close() }

func (s *pgStore) Open(context.Context, int) (Pool, error) { return pgPool{s}, nil }

type pgPool struct{ s *pgStore }

func (p pgPool) Session(ctx context.Context, _ int) (SessionConn, error) {
	cctx, cancel := context.WithTimeout(ctx, p.s.cfg.ConnectTimeout+2*time.Second)
	defer cancel()
	c, err := p.s.connect(cctx)
	if err != nil {
		return nil, err
	}
	// The first statement of a fresh connection is no slower than the others.
	if err := c.c.Ping(cctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("postgres: a new connection to %s did not answer a ping: %w", p.s.addr, err)
	}
	return c, nil
}

func (pgPool) Close() error { return nil }

// lockWait asks, on racetest's own connection, whether the worker's
// connection c waits on a lock (pg_blocking_pids of its backend).
func (s *pgStore) lockWait(ctx context.Context, c SessionConn) (bool, error) {
	pc, ok := c.(*pgConn)
	if !ok {
		return false, fmt.Errorf("postgres: not a connection of this store")
	}
	return sqldb.LockWait(ctx, sqldb.Postgres, sqldb.Pgx(s.admin.c), pc.pid.Load())
}

// pgConn is one connection.
type pgConn struct {
	c *pgx.Conn
	s *pgStore
	// pid is c's backend, read by lock-wait questions from another
	// goroutine while c is busy (or being replaced).
	pid atomic.Int64
}

func (c *pgConn) Exec(ctx context.Context, st Stmt) (Reply, error) {
	if c.c.IsClosed() {
		if err := c.redial(ctx); err != nil {
			return Reply{}, err
		}
	}
	r, err := c.exec(ctx, st)
	if err != nil && c.c.IsClosed() {
		// A timed-out attempt cancels its query and pgx closes the
		// connection: take a new one now, on the lost attempt's time
		// rather than the next one's.
		_ = c.redial(ctx)
	}
	return r, err
}

// redial replaces a closed connection, within the connect timeout of its
// own (the values of ctx, such as a wire release's worker, are kept).
func (c *pgConn) redial(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.s.cfg.ConnectTimeout)
	defer cancel()
	n, err := c.s.connect(cctx)
	if err != nil {
		return err
	}
	c.c = n.c
	c.pid.Store(n.pid.Load())
	return nil
}

func (c *pgConn) exec(ctx context.Context, st Stmt) (Reply, error) {
	res, err := c.c.PgConn().Exec(ctx, strings.TrimRight(st.Text, " \t\r\n;")).ReadAll()
	if err != nil {
		return Reply{}, err
	}
	if len(res) == 0 {
		return Reply{}, nil
	}
	last := res[len(res)-1]
	r := Reply{Rows: last.CommandTag.RowsAffected()}
	if len(last.FieldDescriptions) > 0 {
		r.Rows = int64(len(last.Rows))
		if len(last.Rows) > 0 {
			for i, f := range last.FieldDescriptions {
				r.Columns = append(r.Columns, f.Name)
				r.Values = append(r.Values, string(last.Rows[0][i]))
			}
		}
	}
	return r, nil
}

// Classify reads the SQLSTATE: 23505 is a refusal, 40001 and 40P01 ask for
// a retry. Classes 42 (syntax, undefined objects), 22 (bad data), 23
// (other constraints), 0A and 2B-3F are the statement's own doing.
func (c *pgConn) Classify(err error) (runner.Class, bool) {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return runner.Error, false
	}
	switch {
	case sqldb.IsDuplicate(err):
		return runner.Declined, false
	case sqldb.IsConflict(err):
		return runner.Conflict, false
	}
	switch pe.Code[:2] {
	case "42", "22", "23", "0A", "2B", "2D", "2F", "34", "3D", "3F", "25", "P0":
		return runner.Error, true
	}
	return runner.Error, false
}

func (c *pgConn) Rollback(ctx context.Context) error {
	if c.c.IsClosed() || c.c.PgConn().TxStatus() == 'I' {
		return nil
	}
	_, err := c.c.PgConn().Exec(ctx, "ROLLBACK").ReadAll()
	return err
}

func (c *pgConn) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return c.c.Close(ctx)
}

// hiddenReach reads the catalog on racetest's own connection.
func (s *pgStore) hiddenReach(ctx context.Context, tables []string) (map[string]string, error) {
	return sqldb.PostgresHiddenReach(ctx, sqldb.Pgx(s.admin.c), tables)
}
