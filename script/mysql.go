package script

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/mysqlstore"
)

// mysqlDialect: scripts of SQL on MySQL or MariaDB.
var mysqlDialect = dialect{backend: "mysql", open: OpenMySQL, lang: sqlLanguage}

// myStore runs scripts on MySQL or MariaDB through mysqlstore's Store: its
// connections, isolation level and connection-limit messages. Statements
// without arguments go over the text protocol, one COM_QUERY each.
type myStore struct {
	st    *mysqlstore.Store
	admin *myConn
	db    string
	user  string
	plan  *sqldb.SnapshotPlan // --effects auto, made at the first snapshot
}

// Snapshot reads the watched tables on racetest's own connection.
func (s *myStore) Snapshot(ctx context.Context, watch []string) (runner.Snapshot, error) {
	q := sqldb.Std(s.admin.c)
	if s.plan == nil {
		p, err := sqldb.PlanSnapshot(ctx, sqldb.MySQL, q, watch)
		if err != nil {
			return nil, err
		}
		s.plan = p
	}
	return sqldb.ReadSnapshot(ctx, s.plan, q)
}

// OpenMySQL connects racetest's own connection to the server of
// p.Conn.Get(mysqlstore.Name) (through p.Dial).
func OpenMySQL(ctx context.Context, p scenarios.Params) (Store, error) {
	cfg, err := sqldb.MySQLConfig(p.Conn.Get(mysqlstore.Name))
	if err != nil {
		return nil, scenarios.BadParam(err)
	}
	st, err := mysqlstore.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	c, err := st.DB().Conn(ctx)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("mysql: taking racetest's own connection to %s: %w", st.Addr(), err)
	}
	return &myStore{st: st, admin: &myConn{c: c}, db: cfg.DBName, user: cfg.User}, nil
}

func (s *myStore) Server() string { return s.st.Server().String() }
func (s *myStore) Where() string {
	return fmt.Sprintf("%s at %s, database %s, user %s", s.Server(), s.st.Addr(), s.db, s.user)
}
func (s *myStore) Admin() Conn { return s.admin }

// Reader opens a read-only transaction on racetest's own connection; end
// rolls it back. The driver sends one statement per request (sqldb sets
// no multiStatements), so none can end it and write after.
func (s *myStore) Reader(ctx context.Context) (Conn, func(), error) {
	if _, err := s.admin.c.ExecContext(ctx, sqldb.MySQL.BeginReadOnly()); err != nil {
		return nil, nil, fmt.Errorf("mysql: opening the read-only transaction a check runs in: %w", err)
	}
	end := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = s.admin.Rollback(ctx)
	}
	return s.admin, end, nil
}
func (s *myStore) Notes() []string { return append(s.st.Notes(), s.plan.Notes()...) }
func (s *myStore) Close() error {
	s.admin.Close()
	return s.st.Close()
}

func (s *myStore) Open(_ context.Context, workers int) (Pool, error) {
	db, err := s.st.OpenPool(workers)
	if err != nil {
		return nil, err
	}
	return &myPool{s: s, db: db}, nil
}

type myPool struct {
	s  *myStore
	db *sql.DB
}

func (p *myPool) Session(ctx context.Context, _ int) (SessionConn, error) {
	c, err := p.s.st.Session(ctx, p.db)
	if err != nil {
		return nil, err
	}
	mc := &myConn{c: c, pool: p}
	id, err := sqldb.SessionID(ctx, sqldb.MySQL, sqldb.Std(c))
	if err != nil {
		c.Close()
		return nil, err
	}
	mc.id.Store(id)
	return mc, nil
}

// lockWait asks, on racetest's own connection, whether the worker's
// connection c waits on a lock (InnoDB's lock waits, the process list).
func (s *myStore) lockWait(ctx context.Context, c SessionConn) (bool, error) {
	mc, ok := c.(*myConn)
	if !ok {
		return false, fmt.Errorf("mysql: not a connection of this store")
	}
	return sqldb.LockWait(ctx, sqldb.MySQL, sqldb.Std(s.admin.c), mc.id.Load())
}

func (p *myPool) Close() error { return p.db.Close() }

// myConn is one dedicated connection. A worker's connection broken by a
// timeout is replaced, from its pool, before its next statement.
type myConn struct {
	c    *sql.Conn
	pool *myPool // nil for racetest's own connection
	bad  bool
	// id is the server's connection id, read by lock-wait questions from
	// another goroutine while c is busy (or being replaced).
	id atomic.Int64
}

// renew replaces a worker's broken connection with a fresh session.
func (c *myConn) renew(ctx context.Context) error {
	c.c.Close()
	n, err := c.pool.s.st.Session(context.WithoutCancel(ctx), c.pool.db)
	if err != nil {
		return err
	}
	id, err := sqldb.SessionID(context.WithoutCancel(ctx), sqldb.MySQL, sqldb.Std(n))
	if err != nil {
		n.Close()
		return err
	}
	c.c, c.bad = n, false
	c.id.Store(id)
	return nil
}

func (c *myConn) Exec(ctx context.Context, st Stmt) (r Reply, err error) {
	if c.bad {
		if err := c.renew(ctx); err != nil {
			return Reply{}, err
		}
	}
	defer func() {
		if err != nil && c.pool != nil && (ctx.Err() != nil || errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, sql.ErrConnDone)) {
			// Renewed now, on the lost attempt's time rather than the next one's.
			c.bad = true
			_ = c.renew(ctx)
		}
	}()
	text := strings.TrimRight(st.Text, " \t\r\n;")
	if !st.Query {
		res, err := c.c.ExecContext(ctx, text)
		if err != nil {
			return Reply{}, err
		}
		n, _ := res.RowsAffected()
		return Reply{Rows: n}, nil
	}
	rows, err := c.c.QueryContext(ctx, text)
	if err != nil {
		return Reply{}, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return Reply{}, err
	}
	r = Reply{}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		r.Rows++
		if r.Rows > 1 {
			continue
		}
		if err := rows.Scan(ptrs...); err != nil {
			return Reply{}, err
		}
		r.Columns = cols
		for _, v := range vals {
			r.Values = append(r.Values, v.String)
		}
	}
	return r, rows.Err()
}

// Classify reads the server's error number: 1062 is a refusal; 1213, 1020
// and SQLSTATE 40001 ask for a retry (sqldb's rules). Any other error
// the server raised about the statement is the statement's own, save those
// of a server under strain (lock wait timeout, connection limits, a server
// shutting down).
func (c *myConn) Classify(err error) (runner.Class, bool) {
	switch {
	case sqldb.IsDuplicate(err):
		return runner.Declined, false
	case sqldb.IsConflict(err):
		return runner.Conflict, false
	}
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return runner.Error, false
	}
	switch me.Number {
	case sqldb.ErrLockWaitTimeout, sqldb.ErrConCount, sqldb.ErrTooManyUserConns, sqldb.ErrUserLimitReached,
		sqldb.ErrServerShutdown, sqldb.ErrNormalShutdown, sqldb.ErrAbortingConnection, sqldb.ErrQueryInterrupted, sqldb.ErrQueryTimeout:
		return runner.Error, false
	}
	return runner.Error, me.Number < sqldb.ErrClientMin
}

// QuoteLiteral quotes for MySQL's default sql_mode, where a backslash
// escapes.
func (c *myConn) QuoteLiteral(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", "''").Replace(s) + "'"
}

func (c *myConn) Rollback(ctx context.Context) error {
	_, err := c.c.ExecContext(ctx, "ROLLBACK")
	return err
}

func (c *myConn) Close() error { return c.c.Close() }

// hiddenReach reads the catalog on racetest's own connection.
func (s *myStore) hiddenReach(ctx context.Context, tables []string) (map[string]string, error) {
	return sqldb.MySQLHiddenReach(ctx, sqldb.Std(s.admin.c), tables)
}
