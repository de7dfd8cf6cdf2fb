package incidents

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/mysqlstore"
	"github.com/racetest/racetest/scenarios/pgstore"
	"github.com/racetest/racetest/scenarios/sqlrun"
)

// dialect is what the incidents' few tables and statements need beyond the
// one SQL layer (sqldb): DDL spellings and the lease grant.
type dialect struct {
	sqldb.Dialect
	// connString picks the run's connection string for the dialect.
	connString func(p scenarios.Params) string
	// tableOptions ends every CREATE TABLE (the storage engine).
	tableOptions func(p scenarios.Params) (string, error)
	inlineIndex  bool // MySQL declares indexes in CREATE TABLE
	autoID       string
	timestamp    string
	// acquire grants a lease: it returns the token, or 0.
	acquire func(ctx context.Context, q sqldb.Querier, table, key, owner string, ttl time.Duration) (int64, error)
	// insertID inserts and returns the new row's id.
	insertID func(ctx context.Context, q sqldb.Querier, query string, args ...any) (int64, error)
	// engineOf reads the engine a table really uses, and whether it
	// honours transactions.
	engineOf func(ctx context.Context, q sqldb.Querier, table string) (string, bool, error)
}

var mysqlDialect = &dialect{
	Dialect:    sqldb.MySQL,
	connString: func(p scenarios.Params) string { return p.Conn.Get(mysqlstore.Name) },
	tableOptions: func(p scenarios.Params) (string, error) {
		e, err := mysqlstore.EngineName(p.Engine)
		if err != nil {
			return "", err
		}
		return " ENGINE=" + e, nil
	},
	inlineIndex: true,
	autoID:      "BIGINT AUTO_INCREMENT PRIMARY KEY",
	timestamp:   "DATETIME(6)",
	acquire: func(ctx context.Context, q sqldb.Querier, table, key, owner string, ttl time.Duration) (int64, error) {
		// LAST_INSERT_ID(expr) hands the new token back in the same round
		// trip as the grant.
		n, token, err := q.Exec(ctx, "UPDATE "+table+" SET owner = ?, lock_until = NOW(6) + INTERVAL ? MICROSECOND, fence = LAST_INSERT_ID(fence + 1) WHERE name = ? AND lock_until < NOW(6)",
			owner, ttl.Microseconds(), key)
		if err != nil || n != 1 {
			return 0, err
		}
		return token, nil
	},
	insertID: func(ctx context.Context, q sqldb.Querier, query string, args ...any) (int64, error) {
		_, id, err := q.Exec(ctx, query, args...)
		return id, err
	},
	engineOf: sqldb.MySQLEngineOf,
}

var pgDialect = &dialect{
	Dialect:      sqldb.Postgres,
	connString:   func(p scenarios.Params) string { return p.Conn.Get(pgstore.Name) },
	tableOptions: func(scenarios.Params) (string, error) { return "", nil },
	autoID:       "BIGSERIAL PRIMARY KEY",
	timestamp:    "TIMESTAMPTZ",
	acquire: func(ctx context.Context, q sqldb.Querier, table, key, owner string, ttl time.Duration) (int64, error) {
		// clock_timestamp(), not now(): now() is the transaction's start.
		var token int64
		err := q.QueryRow(ctx, "UPDATE "+table+" SET owner = $1, lock_until = clock_timestamp() + $2::bigint * interval '1 microsecond', fence = fence + 1 WHERE name = $3 AND lock_until < clock_timestamp() RETURNING fence",
			owner, ttl.Microseconds(), key).Scan(&token)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, nil
		}
		return token, err
	},
	insertID: func(ctx context.Context, q sqldb.Querier, query string, args ...any) (int64, error) {
		var id int64
		err := q.QueryRow(ctx, query+" RETURNING id", args...).Scan(&id)
		return id, err
	},
	engineOf: func(context.Context, sqldb.Querier, string) (string, bool, error) {
		return "PostgreSQL", true, nil
	},
}

// name is the backend's name in messages ("mysql", "postgres").
func (d *dialect) name() string { return string(d.Dialect) }

// q rewrites a statement written with ? placeholders for the dialect.
func (d *dialect) q(query string) string { return d.Rebind(query) }

// wrap marks the errors the patterns read: a duplicate key and a conflict.
func (d *dialect) wrap(err error) error {
	switch {
	case err == nil:
		return nil
	case sqldb.IsDuplicate(err):
		return fmt.Errorf("%w: %w", errDuplicate, err)
	case sqldb.IsConflict(err):
		return fmt.Errorf("%w: %w", errConflict, err)
	}
	return err
}

// sqlServer is one run's hold on a SQL server (sqlrun.Server: its own
// connection for setup and counting, and the tables it created and will
// drop), with the dialect the incidents' statements need.
type sqlServer struct {
	*sqlrun.Server
	d *dialect
}

func connectSQL(ctx context.Context, d *dialect, p scenarios.Params) (*sqlServer, error) {
	opts, err := d.tableOptions(p)
	if err != nil {
		return nil, err
	}
	db, err := sqldb.Open(ctx, d.Dialect, d.connString(p), sqldb.Options{
		Dial: p.Dial, AppName: "racetest " + p.RunID, Isolation: sqldb.Isolation(p.Isolation)})
	if err != nil {
		return nil, err
	}
	return &sqlServer{Server: sqlrun.New(db, p, opts), d: d}, nil
}

// name names the server ("MariaDB 10.11.19").
func (s *sqlServer) name() string { return s.DB().Server() }

// conn takes one connection from pool, pinged now so that connection setup
// never serialises the attempts.
func (s *sqlServer) conn(ctx context.Context, pool sqldb.Pool) (sqldb.Conn, error) {
	cctx, cancel := context.WithTimeout(ctx, sqldb.AdminTimeout)
	defer cancel()
	c, err := pool.Conn(cctx)
	if err != nil {
		return nil, fmt.Errorf("%s: a replica could not connect to %s: %w", s.d.name(), s.DB().Addr(), err)
	}
	return c, nil
}

// exec runs one of racetest's own statements (written with ?).
func (s *sqlServer) exec(ctx context.Context, query string, args ...any) error {
	return s.DB().Exec(ctx, query, args...)
}

// count reads one number (written with ?); no row is 0.
func (s *sqlServer) count(ctx context.Context, query string, args ...any) (int, error) {
	return s.DB().Count(ctx, query, args...)
}

// ---- ledger (reward-payout) ----

type sqlLedger struct {
	s                 *sqlServer
	unique            bool
	records, payments string
	engine            string
	transactional     bool
}

func sqlLedgerBackend(d *dialect) ledgerFactory {
	return func(ctx context.Context, p scenarios.Params, unique bool) (ledgerBackend, error) {
		s, err := connectSQL(ctx, d, p)
		if err != nil {
			return nil, err
		}
		return &sqlLedger{s: s, unique: unique, records: s.Table("reward_records"), payments: s.Table("reward_payments")}, nil
	}
}

func (l *sqlLedger) Prepare(ctx context.Context) error {
	s := l.s
	index := ""
	if s.d.inlineIndex {
		index = ", KEY (user_id)"
	}
	cols := "id " + s.d.autoID + ", user_id VARCHAR(64) NOT NULL, reward_id VARCHAR(32) NOT NULL, amount INT NOT NULL"
	recordCols := cols + index
	if l.unique {
		recordCols = cols + ", UNIQUE (user_id, reward_id)"
	}
	if err := s.Create(ctx, l.records, recordCols); err != nil {
		return err
	}
	if err := s.Create(ctx, l.payments, cols+index); err != nil {
		return err
	}
	if !s.d.inlineIndex {
		tables := []string{l.payments}
		if !l.unique {
			tables = append(tables, l.records)
		}
		for _, t := range tables {
			if err := s.exec(ctx, "CREATE INDEX ON "+t+" (user_id)"); err != nil {
				return fmt.Errorf("%s: could not index %s: %w", s.d.name(), t, err)
			}
		}
	}
	return s.DB().Admin(ctx, func(ctx context.Context, q sqldb.Querier) error {
		var err error
		l.engine, l.transactional, err = s.d.engineOf(ctx, q, l.records)
		return err
	})
}

func (l *sqlLedger) Engine() (string, bool)            { return l.engine, l.transactional }
func (l *sqlLedger) Server() string                    { return l.s.name() }
func (l *sqlLedger) Close() error                      { return l.s.Close() }
func (l *sqlLedger) Cleanup(ctx context.Context) error { return l.s.Cleanup(ctx) }

func (l *sqlLedger) Counts(ctx context.Context, user, reward string) (records, payments int, err error) {
	if records, err = l.s.count(ctx, "SELECT COUNT(*) FROM "+l.records+" WHERE user_id = ? AND reward_id = ?", user, reward); err != nil {
		return 0, 0, err
	}
	payments, err = l.s.count(ctx, "SELECT COUNT(*) FROM "+l.payments+" WHERE user_id = ? AND reward_id = ?", user, reward)
	return records, payments, err
}

func (l *sqlLedger) Open(_ context.Context, workers int) (ledgerPool, error) {
	return &sqlLedgerPool{l: l, pool: l.s.DB().Pool(workers)}, nil
}

type sqlLedgerPool struct {
	l    *sqlLedger
	pool sqldb.Pool
}

func (p *sqlLedgerPool) Conn(ctx context.Context) (ledgerConn, error) {
	c, err := p.l.s.conn(ctx, p.pool)
	if err != nil {
		return nil, err
	}
	return &sqlLedgerConn{sqlLedgerOps: sqlLedgerOps{l: p.l, q: c}, c: c}, nil
}

func (p *sqlLedgerPool) Close() error { return p.pool.Close() }

type sqlLedgerOps struct {
	l *sqlLedger
	q sqldb.Querier
}

func (o sqlLedgerOps) HasRecord(ctx context.Context, user, reward string) (bool, error) {
	var one int
	err := o.q.QueryRow(ctx, o.l.s.d.q("SELECT 1 FROM "+o.l.records+" WHERE user_id = ? AND reward_id = ? LIMIT 1"), user, reward).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, o.l.s.d.wrap(err)
}

func (o sqlLedgerOps) Record(ctx context.Context, user, reward string, amount *int) (int64, error) {
	d := o.l.s.d
	id, err := d.insertID(ctx, o.q, d.q("INSERT INTO "+o.l.records+" (user_id, reward_id, amount) VALUES (?, ?, ?)"), user, reward, amount)
	return id, d.wrap(err)
}

func (o sqlLedgerOps) Pay(ctx context.Context, user, reward string, amount *int) error {
	d := o.l.s.d
	_, _, err := o.q.Exec(ctx, d.q("INSERT INTO "+o.l.payments+" (user_id, reward_id, amount) VALUES (?, ?, ?)"), user, reward, amount)
	return d.wrap(err)
}

type sqlLedgerConn struct {
	sqlLedgerOps
	c sqldb.Conn
}

func (c *sqlLedgerConn) Close() error { return c.c.Close() }

func (c *sqlLedgerConn) Begin(ctx context.Context) (ledgerTx, error) {
	tx, err := c.c.Begin(ctx, "")
	if err != nil {
		return nil, c.l.s.d.wrap(err)
	}
	return &sqlLedgerTx{sqlLedgerOps: sqlLedgerOps{l: c.l, q: tx}, tx: tx}, nil
}

type sqlLedgerTx struct {
	sqlLedgerOps
	tx sqldb.Tx
}

// Commit and Rollback run even when the attempt's context has ended, so a
// transaction is never left open on a pooled connection.
func (t *sqlLedgerTx) Commit() error {
	ctx, cancel := context.WithTimeout(context.Background(), sqldb.AdminTimeout)
	defer cancel()
	return t.l.s.d.wrap(t.tx.Commit(ctx))
}

func (t *sqlLedgerTx) Rollback() error {
	ctx, cancel := context.WithTimeout(context.Background(), sqldb.AdminTimeout)
	defer cancel()
	return t.tx.Rollback(ctx)
}

// ---- leases (lease-pause) ----

type sqlLeases struct {
	s                *sqlServer
	leases, resource string
}

func sqlLeaseBackend(d *dialect) leaseFactory {
	return func(ctx context.Context, p scenarios.Params) (leaseBackend, error) {
		s, err := connectSQL(ctx, d, p)
		if err != nil {
			return nil, err
		}
		return &sqlLeases{s: s, leases: s.Table("leases"), resource: s.Table("lease_resource")}, nil
	}
}

// longAgo is a free lease's lock_until.
var longAgo = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func (l *sqlLeases) Prepare(ctx context.Context) error {
	s := l.s
	if err := s.Create(ctx, l.leases, "name VARCHAR(64) PRIMARY KEY, owner VARCHAR(64) NULL, lock_until "+s.d.timestamp+" NOT NULL, fence BIGINT NOT NULL"); err != nil {
		return err
	}
	return s.Create(ctx, l.resource, "name VARCHAR(64) PRIMARY KEY, writes INT NOT NULL, last_token BIGINT NOT NULL")
}

func (l *sqlLeases) Reset(ctx context.Context, key string) error {
	if err := l.s.exec(ctx, "INSERT INTO "+l.leases+" (name, owner, lock_until, fence) VALUES (?, NULL, ?, 0)", key, longAgo); err != nil {
		return fmt.Errorf("%s: could not create lease %s: %w", l.s.d.name(), key, err)
	}
	if err := l.s.exec(ctx, "INSERT INTO "+l.resource+" (name, writes, last_token) VALUES (?, 0, 0)", key); err != nil {
		return fmt.Errorf("%s: could not create resource %s: %w", l.s.d.name(), key, err)
	}
	return nil
}

func (l *sqlLeases) Writes(ctx context.Context, key string) (int, error) {
	return l.s.count(ctx, "SELECT writes FROM "+l.resource+" WHERE name = ?", key)
}

func (l *sqlLeases) Cleanup(ctx context.Context) error { return l.s.Cleanup(ctx) }
func (l *sqlLeases) Close() error                      { return l.s.Close() }
func (l *sqlLeases) Server() string                    { return l.s.name() }

func (l *sqlLeases) Open(_ context.Context, workers int) (leasePool, error) {
	return &sqlLeasePool{l: l, pool: l.s.DB().Pool(workers)}, nil
}

type sqlLeasePool struct {
	l    *sqlLeases
	pool sqldb.Pool
}

func (p *sqlLeasePool) Conn(ctx context.Context) (leaseConn, error) {
	c, err := p.l.s.conn(ctx, p.pool)
	if err != nil {
		return nil, err
	}
	return &sqlLeaseConn{l: p.l, c: c}, nil
}

func (p *sqlLeasePool) Close() error { return p.pool.Close() }

type sqlLeaseConn struct {
	l *sqlLeases
	c sqldb.Conn
}

func (c *sqlLeaseConn) Close() error { return c.c.Close() }

func (c *sqlLeaseConn) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (bool, int64, error) {
	token, err := c.l.s.d.acquire(ctx, c.c, c.l.leases, key, owner, ttl)
	if err != nil {
		return false, 0, err
	}
	return token > 0, token, nil
}

func (c *sqlLeaseConn) Done(ctx context.Context, key string, token int64, fenced bool) (bool, error) {
	if fenced {
		// Raise the highest token seen before reading: from here on no
		// lower token can write.
		q := "UPDATE " + c.l.resource + " SET last_token = GREATEST(last_token, ?) WHERE name = ?"
		if _, _, err := c.c.Exec(ctx, c.l.s.d.q(q), token, key); err != nil {
			return false, err
		}
	}
	var writes int
	err := c.c.QueryRow(ctx, c.l.s.d.q("SELECT writes FROM "+c.l.resource+" WHERE name = ?"), key).Scan(&writes)
	return writes > 0, err
}

// Write is one UPDATE; fenced, its WHERE lets the store refuse a token
// lower than the highest it has seen.
func (c *sqlLeaseConn) Write(ctx context.Context, key, _ string, token int64, fenced bool) (bool, error) {
	query := "UPDATE " + c.l.resource + " SET writes = writes + 1, last_token = GREATEST(last_token, ?) WHERE name = ?"
	args := []any{token, key}
	if fenced {
		query += " AND last_token <= ?"
		args = append(args, token)
	}
	return c.changedOne(ctx, query, args...)
}

// Release frees the lease; compare, only while owner holds it. (A plain
// release is the SQL form of a plain DEL: it frees whoever's lease it is.)
func (c *sqlLeaseConn) Release(ctx context.Context, key, owner string, compare bool) (bool, error) {
	query := "UPDATE " + c.l.leases + " SET owner = NULL, lock_until = ? WHERE name = ? AND owner IS NOT NULL"
	args := []any{longAgo, key}
	if compare {
		query += " AND owner = ?"
		args = append(args, owner)
	}
	return c.changedOne(ctx, query, args...)
}

func (c *sqlLeaseConn) changedOne(ctx context.Context, query string, args ...any) (bool, error) {
	n, _, err := c.c.Exec(ctx, c.l.s.d.q(query), args...)
	return n == 1, err
}
