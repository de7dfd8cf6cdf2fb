package runs

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/internal/sqldialect"
)

// Dialect is the SQL server's family (internal/sqldb's one type).
type Dialect = sqldb.Dialect

const (
	MySQL    = sqldb.MySQL
	Postgres = sqldb.Postgres
)

// SQL is a connection as registration uses it.
type SQL interface {
	Exec(ctx context.Context, query string, args ...any) error
	// Rows returns every row, each column as text.
	Rows(ctx context.Context, query string, args ...any) ([][]string, error)
}

// StdQuerier is a database/sql handle: *sql.DB, *sql.Conn or *sql.Tx.
type StdQuerier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Std adapts a database/sql handle.
func Std(q StdQuerier) SQL { return stdSQL{q} }

type stdSQL struct{ q StdQuerier }

func (s stdSQL) Exec(ctx context.Context, query string, args ...any) error {
	_, err := s.q.ExecContext(ctx, query, args...)
	return err
}

func (s stdSQL) Rows(ctx context.Context, query string, args ...any) ([][]string, error) {
	rows, err := s.q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out [][]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			row[i] = v.String
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// Pgx adapts a pgx connection.
func Pgx(c *pgx.Conn) SQL { return pgxSQL{c} }

type pgxSQL struct{ c *pgx.Conn }

func (p pgxSQL) Exec(ctx context.Context, query string, args ...any) error {
	_, err := p.c.Exec(ctx, query, args...)
	return err
}

func (p pgxSQL) Rows(ctx context.Context, query string, args ...any) ([][]string, error) {
	rows, err := p.c.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return nil, err
		}
		row := make([]string, len(vals))
		for i, v := range vals {
			if v != nil {
				row[i] = fmt.Sprint(v)
			}
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

func ph(d Dialect, n int) string { return sqldialect.Pick(d, "?", "$"+strconv.Itoa(n)) }

func quote(d Dialect, name string) string {
	return sqldialect.Pick(d, "`"+name+"`", pgx.Identifier{name}.Sanitize())
}

// likePrefix is a LIKE pattern for the names under prefix ('_' escaped).
func likePrefix(prefix string) string {
	out := make([]byte, 0, len(prefix)+4)
	for i := 0; i < len(prefix); i++ {
		if prefix[i] == '_' || prefix[i] == '%' || prefix[i] == '\\' {
			out = append(out, '\\')
		}
		out = append(out, prefix[i])
	}
	return string(out) + "%"
}

func tablesLike(d Dialect) string {
	return sqldialect.Pick(d,
		"SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE ? ORDER BY 1",
		"SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename LIKE $1 ORDER BY 1")
}

func createTable(d Dialect) string {
	return sqldialect.Pick(d,
		"CREATE TABLE IF NOT EXISTS "+Table+" (run_id VARCHAR(16) PRIMARY KEY, started_ms BIGINT NOT NULL, host VARCHAR(255) NOT NULL, pid INT NOT NULL) ENGINE=InnoDB",
		"CREATE TABLE IF NOT EXISTS "+Table+" (run_id TEXT PRIMARY KEY, started_ms BIGINT NOT NULL, host TEXT NOT NULL, pid INT NOT NULL)")
}

// duplicate is a row or a table that exists already (the unique key's
// refusal, or a table created at once by another run), read by the one
// classifier in internal/sqldb.
func duplicate(err error) bool {
	return sqldb.IsDuplicate(err) || sqldb.MySQLNumber(err) == sqldb.ErrTableExists || sqldb.PgCode(err) == sqldb.CodeDuplicateTable
}

func missingTable(err error) bool {
	return sqldb.MySQLNumber(err) == sqldb.ErrNoSuchTable || sqldb.PgCode(err) == sqldb.CodeUndefinedTable
}

// RegisterSQL registers r on the server of q, before the run creates
// anything: it refuses (InUseError) when the id is registered already or a
// table under its prefix exists.
func RegisterSQL(ctx context.Context, d Dialect, q SQL, r Record) error {
	// Two runs creating the table at once can collide in PostgreSQL's
	// catalogue (a unique violation on pg_type) even with IF NOT EXISTS.
	err := q.Exec(ctx, createTable(d))
	if err != nil && duplicate(err) {
		err = q.Exec(ctx, createTable(d))
	}
	if err != nil {
		return fmt.Errorf("%s: cannot create the table %s that registers runs: %w", d, Table, err)
	}
	ins := fmt.Sprintf("INSERT INTO %s (run_id, started_ms, host, pid) VALUES (%s, %s, %s, %s)", Table, ph(d, 1), ph(d, 2), ph(d, 3), ph(d, 4))
	if err := q.Exec(ctx, ins, r.RunID, r.Started.UnixMilli(), r.Host, r.PID); err != nil {
		if duplicate(err) {
			return &InUseError{Backend: string(d), RunID: r.RunID}
		}
		return fmt.Errorf("%s: cannot register run %s in %s: %w", d, r.RunID, Table, err)
	}
	rows, err := q.Rows(ctx, tablesLike(d)+" LIMIT 1", likePrefix(Prefix(r.RunID)))
	if err == nil && len(rows) > 0 {
		err = &InUseError{Backend: string(d), RunID: r.RunID, Example: "table " + rows[0][0]}
	}
	if err != nil {
		_ = UnregisterSQL(ctx, d, q, r.RunID)
		return err
	}
	return nil
}

// UnregisterSQL removes run id's registration: its objects are gone.
func UnregisterSQL(ctx context.Context, d Dialect, q SQL, runID string) error {
	err := q.Exec(ctx, "DELETE FROM "+Table+" WHERE run_id = "+ph(d, 1), runID)
	if err != nil && !missingTable(err) {
		return fmt.Errorf("%s: cannot remove run %s from %s: %w", d, runID, Table, err)
	}
	return nil
}

// LeftoversSQL lists the registered runs and every table that follows
// racetest's naming scheme.
func LeftoversSQL(ctx context.Context, d Dialect, q SQL) ([]Leftover, error) {
	var records []Record
	sel := sqldialect.Pick(d, "SELECT run_id, CAST(started_ms AS CHAR), host, CAST(pid AS CHAR) FROM ", "SELECT run_id, started_ms::text, host, pid::text FROM ") + Table
	rows, err := q.Rows(ctx, sel)
	if err != nil && !missingTable(err) {
		return nil, fmt.Errorf("%s: cannot read %s: %w", d, Table, err)
	}
	for _, row := range rows {
		ms, _ := strconv.ParseInt(row[1], 10, 64)
		pid, _ := strconv.Atoi(row[3])
		records = append(records, Record{RunID: row[0], Started: time.UnixMilli(ms).UTC(), Host: row[2], PID: pid})
	}
	tables, err := q.Rows(ctx, tablesLike(d), likePrefix("racetest_"))
	if err != nil {
		return nil, fmt.Errorf("%s: cannot list tables: %w", d, err)
	}
	var names []string
	for _, t := range tables {
		names = append(names, t[0])
	}
	return Group(records, names), nil
}

// TablesSQL lists the tables under run id's prefix.
func TablesSQL(ctx context.Context, d Dialect, q SQL, runID string) ([]string, error) {
	rows, err := q.Rows(ctx, tablesLike(d), likePrefix(Prefix(runID)))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, r := range rows {
		names = append(names, r[0])
	}
	return names, nil
}

// DropSQL drops a registered run's tables (those under its prefix, found
// now) and then its registration.
func DropSQL(ctx context.Context, d Dialect, q SQL, runID string) ([]string, error) {
	tables, err := TablesSQL(ctx, d, q, runID)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot list the tables of run %s: %w", d, runID, err)
	}
	var dropped []string
	for _, t := range tables {
		if err := q.Exec(ctx, "DROP TABLE IF EXISTS "+quote(d, t)); err != nil {
			return dropped, fmt.Errorf("%s: cannot drop %s: %w", d, t, err)
		}
		dropped = append(dropped, t)
	}
	return dropped, UnregisterSQL(ctx, d, q, runID)
}

// Querier adapts a connection of the one SQL layer (internal/sqldb).
func Querier(q sqldb.Querier) SQL { return querierSQL{q} }

type querierSQL struct{ q sqldb.Querier }

func (r querierSQL) Exec(ctx context.Context, query string, args ...any) error {
	_, _, err := r.q.Exec(ctx, query, args...)
	return err
}

func (r querierSQL) Rows(ctx context.Context, query string, args ...any) ([][]string, error) {
	res, err := r.q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	out := make([][]string, len(res.Values))
	for i, row := range res.Values {
		out[i] = make([]string, len(row))
		for j, v := range row {
			if b, ok := v.([]byte); ok {
				out[i][j] = string(b)
			} else if v != nil {
				out[i][j] = fmt.Sprint(v)
			}
		}
	}
	return out, nil
}

// SQLJanitor connects to the server of conn for 'racetest clean'.
func SQLJanitor(ctx context.Context, d Dialect, conn string) (Janitor, error) {
	db, err := sqldb.Open(ctx, d, conn, sqldb.Options{AppName: "racetest clean"})
	if err != nil {
		return nil, err
	}
	return &sqlJanitor{d: d, db: db}, nil
}

type sqlJanitor struct {
	d  Dialect
	db *sqldb.DB
}

func (j *sqlJanitor) Where() string { return string(j.d) + " " + j.db.Addr() }

func (j *sqlJanitor) Leftovers(ctx context.Context) (left []Leftover, err error) {
	err = j.db.Admin(ctx, func(ctx context.Context, q sqldb.Querier) error {
		left, err = LeftoversSQL(ctx, j.d, Querier(q))
		return err
	})
	return left, err
}

func (j *sqlJanitor) Drop(ctx context.Context, runID string) (string, error) {
	var dropped []string
	err := j.db.Admin(ctx, func(ctx context.Context, q sqldb.Querier) error {
		var err error
		dropped, err = DropSQL(ctx, j.d, Querier(q), runID)
		return err
	})
	return strings.Join(dropped, ", "), err
}

func (j *sqlJanitor) Close() error { return j.db.Close() }
