package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Querier runs statements on one connection, or in a transaction on it,
// whatever the driver: database/sql for MySQL, pgx for PostgreSQL (pgx's
// database/sql adapter would pull in a pool package the module does not
// carry). Statements use the dialect's placeholders (see Dialect.Rebind).
type Querier interface {
	// Exec runs a statement and returns the rows it changed and, where the
	// driver reports one, the id it inserted.
	Exec(ctx context.Context, query string, args ...any) (changed, lastID int64, err error)
	// QueryRow runs a query for one row; no row scans as sql.ErrNoRows on
	// either driver.
	QueryRow(ctx context.Context, query string, args ...any) Row
	// Query runs a query and reads all its rows: the column names and one
	// value per column and row, as the driver decodes them.
	Query(ctx context.Context, query string, args ...any) (Rows, error)
}

// Row is one row of QueryRow.
type Row interface{ Scan(dest ...any) error }

// Rows is a whole result, read.
type Rows struct {
	Columns []string
	Values  [][]any
}

// Conn is one dedicated connection.
type Conn interface {
	Querier
	// Begin opens a transaction at level ("" is the session's level).
	Begin(ctx context.Context, level Isolation) (Tx, error)
	Close() error
}

// Tx is a transaction on a Conn.
type Tx interface {
	Querier
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// Pool hands out dedicated connections; see DB.Pool.
type Pool interface {
	Conn(ctx context.Context) (Conn, error)
	Close() error
}

// ---- database/sql (MySQL) ----

type stdQuerier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Std runs statements on a database/sql pool, connection or transaction, so
// that code holding one can use this package's readers (MySQLIsolation,
// MySQLEngineOf, Setting).
func Std(q stdQuerier) Querier { return stdConn{q} }

type stdConn struct{ q stdQuerier }

func (c stdConn) Exec(ctx context.Context, query string, args ...any) (int64, int64, error) {
	res, err := c.q.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, 0, err
	}
	id, _ := res.LastInsertId()
	return n, id, nil
}

func (c stdConn) QueryRow(ctx context.Context, query string, args ...any) Row {
	return c.q.QueryRowContext(ctx, query, args...)
}

func (c stdConn) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	rows, err := c.q.QueryContext(ctx, query, args...)
	if err != nil {
		return Rows{}, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return Rows{}, err
	}
	out := Rows{Columns: cols}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return Rows{}, err
		}
		for i, v := range vals {
			if b, ok := v.([]byte); ok {
				vals[i] = string(b) // the text protocol's values, readable
			}
		}
		out.Values = append(out.Values, vals)
	}
	return out, rows.Err()
}

type stdPool struct {
	db    *sql.DB
	setup func(ctx context.Context, c Conn) error
}

func (p stdPool) Conn(ctx context.Context) (Conn, error) {
	c, err := p.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.PingContext(ctx); err != nil {
		c.Close()
		return nil, err
	}
	s := &stdSession{stdConn: stdConn{c}, c: c}
	if p.setup != nil {
		if err := p.setup(ctx, s); err != nil {
			c.Close()
			return nil, err
		}
	}
	return s, nil
}

func (p stdPool) Close() error { return p.db.Close() }

type stdSession struct {
	stdConn
	c *sql.Conn
}

func (s *stdSession) Close() error { return s.c.Close() }

var stdLevels = map[Isolation]sql.IsolationLevel{
	ReadUncommitted: sql.LevelReadUncommitted,
	ReadCommitted:   sql.LevelReadCommitted,
	RepeatableRead:  sql.LevelRepeatableRead,
	Serializable:    sql.LevelSerializable,
}

func (s *stdSession) Begin(ctx context.Context, level Isolation) (Tx, error) {
	var opts *sql.TxOptions
	if level != "" {
		opts = &sql.TxOptions{Isolation: stdLevels[level]}
	}
	tx, err := s.c.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return stdTx{stdConn{tx}, tx}, nil
}

type stdTx struct {
	stdConn
	tx *sql.Tx
}

func (t stdTx) Commit(context.Context) error   { return t.tx.Commit() }
func (t stdTx) Rollback(context.Context) error { return t.tx.Rollback() }

// ---- pgx (PostgreSQL) ----

type pgQuerier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Pgx runs statements on a pgx connection or transaction, so that code
// holding one can use this package's readers.
func Pgx(q pgQuerier) Querier { return pgConn{q} }

type pgConn struct{ q pgQuerier }

func (c pgConn) Exec(ctx context.Context, query string, args ...any) (int64, int64, error) {
	tag, err := c.q.Exec(ctx, query, args...)
	return tag.RowsAffected(), 0, err
}

func (c pgConn) QueryRow(ctx context.Context, query string, args ...any) Row {
	return pgRow{c.q.QueryRow(ctx, query, args...)}
}

func (c pgConn) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	rows, err := c.q.Query(ctx, query, args...)
	if err != nil {
		return Rows{}, err
	}
	defer rows.Close()
	var out Rows
	for _, f := range rows.FieldDescriptions() {
		out.Columns = append(out.Columns, f.Name)
	}
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return Rows{}, err
		}
		out.Values = append(out.Values, vals)
	}
	return out, rows.Err()
}

// pgRow makes pgx's "no rows" the database/sql one, so callers test one.
type pgRow struct{ r pgx.Row }

func (r pgRow) Scan(dest ...any) error {
	err := r.r.Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return sql.ErrNoRows
	}
	return err
}

// pgPool dials one connection per Conn; closing the pool closes nothing
// (each Conn is closed by its holder).
type pgPool struct{ cfg *pgx.ConnConfig }

func (p pgPool) Conn(ctx context.Context) (Conn, error) {
	c, err := pgx.ConnectConfig(ctx, p.cfg.Copy())
	if err != nil {
		return nil, err
	}
	return &pgSession{pgConn: pgConn{c}, c: c}, nil
}

func (pgPool) Close() error { return nil }

type pgSession struct {
	pgConn
	c *pgx.Conn
}

func (s *pgSession) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), CloseTimeout)
	defer cancel()
	return s.c.Close(ctx)
}

func (s *pgSession) Begin(ctx context.Context, level Isolation) (Tx, error) {
	opts := pgx.TxOptions{}
	if level != "" {
		opts.IsoLevel = pgx.TxIsoLevel(strings.ToLower(level.SQL()))
	}
	tx, err := s.c.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return pgTx{pgConn{tx}, tx}, nil
}

type pgTx struct {
	pgConn
	tx pgx.Tx
}

func (t pgTx) Commit(ctx context.Context) error   { return t.tx.Commit(ctx) }
func (t pgTx) Rollback(ctx context.Context) error { return t.tx.Rollback(ctx) }
