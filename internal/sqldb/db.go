package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/racetest/racetest/internal/sqldialect"
)

// Dialect is the SQL family a server speaks: package sqldialect's one type,
// whose Pick makes every place that differs name each family.
type Dialect = sqldialect.Dialect

const (
	MySQL    = sqldialect.MySQL // MySQL and MariaDB
	Postgres = sqldialect.Postgres
)

// unknown is the error of a Dialect that names no family (made from a
// string nothing checked): never answered as MySQL or PostgreSQL.
func unknown(d Dialect) error {
	return fmt.Errorf("sqldb: unknown dialect %q (known: mysql, postgres)", d)
}

// Timeouts for racetest's own statements (setup, reset, counting) and for
// goodbyes: a server that dies mid-run makes them fail, never hang.
const (
	AdminTimeout = 15 * time.Second
	CloseTimeout = 2 * time.Second
)

// Options are what a run adds to the user's connection string.
type Options struct {
	// Dial, when set, dials every connection (a wire release wraps them).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// AppName is PostgreSQL's application_name, unless the URL sets one.
	AppName string
	// Isolation is set on every connection ("" keeps the server's default).
	Isolation Isolation
}

// DB is a run's hold on one SQL server: one connection of its own for setup
// and counting (used one statement at a time, each bounded by AdminTimeout),
// the server's name, and a way to open the attempts' connections.
type DB struct {
	dialect Dialect
	addr    string
	server  string
	open    func(workers int) Pool

	mu        sync.Mutex
	adminPool Pool
	admin     Conn
}

// Open connects to the server named by conn (a MySQL DSN or mysql:// URL, or
// a PostgreSQL URL or keyword=value list; "" is the dialect's local default),
// checks that it answers within seconds, and reads its name. The error is
// one line naming the server (never the password) and what to change.
func Open(ctx context.Context, d Dialect, conn string, o Options) (*DB, error) {
	db := &DB{dialect: d}
	switch d {
	case MySQL:
		cfg, err := MySQLConfig(conn)
		if err != nil {
			return nil, err
		}
		if o.Dial != nil {
			cfg.DialFunc = o.Dial
		}
		connector, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, fmt.Errorf("mysql: bad connection settings for %s: %w", MySQLAddr(cfg), err)
		}
		var setup func(context.Context, Conn) error
		if o.Isolation != "" {
			if _, err := ParseIsolation(string(o.Isolation)); err != nil {
				return nil, err
			}
			// The statement form works on MariaDB and MySQL 8 alike; the
			// variable names do not (tx_isolation vs transaction_isolation).
			stmt := "SET SESSION TRANSACTION ISOLATION LEVEL " + o.Isolation.SQL()
			setup = func(ctx context.Context, c Conn) error {
				_, _, err := c.Exec(ctx, stmt)
				return err
			}
		}
		db.addr = MySQLAddr(cfg)
		db.open = func(workers int) Pool {
			sdb := sql.OpenDB(connector)
			sdb.SetMaxOpenConns(max(workers, 1))
			// The default of 2 idle connections would close and reopen
			// connections between uses.
			sdb.SetMaxIdleConns(max(workers, 1))
			return stdPool{db: sdb, setup: setup}
		}
	case Postgres:
		cfg, err := PostgresConfig(conn, o)
		if err != nil {
			return nil, err
		}
		db.addr = PostgresAddr(cfg)
		db.open = func(int) Pool { return pgPool{cfg} }
	default:
		return nil, unknown(d)
	}
	db.adminPool = db.open(1)
	cctx, cancel := context.WithTimeout(ctx, AdminTimeout)
	defer cancel()
	var err error
	if db.admin, err = db.adminPool.Conn(cctx); err != nil {
		db.adminPool.Close()
		return nil, fmt.Errorf("%s: cannot connect to %s: %w — is the server running? %s", d, db.addr, err, d.Hint())
	}
	db.server = ServerName(cctx, d, db.admin)
	return db, nil
}

// ServerName names the server behind q ("MariaDB 10.11.19", "PostgreSQL
// 15.19"), or "" when it does not say.
func ServerName(ctx context.Context, d Dialect, q Querier) string {
	return sqldialect.Pick(d, mysqlServerName, postgresServerName)(ctx, q)
}

func mysqlServerName(ctx context.Context, q Querier) string {
	var version string
	if err := q.QueryRow(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return ""
	}
	return ParseMySQLVersion(version).String()
}

func postgresServerName(ctx context.Context, q Querier) string {
	var version, serverVersion string
	if err := q.QueryRow(ctx, PostgresVersionQuery).Scan(&version, &serverVersion); err != nil {
		return ""
	}
	return PostgresServerName(version, serverVersion)
}

// Dialect is the server's SQL family.
func (db *DB) Dialect() Dialect { return db.dialect }

// Addr names the server for messages: host:port or a unix socket.
func (db *DB) Addr() string { return db.addr }

// Server names the server: "MariaDB 10.11.19", "PostgreSQL 15.19".
func (db *DB) Server() string { return db.server }

// Pool opens a pool for workers connections, each dialled when taken with
// Conn and held by its taker until closed.
func (db *DB) Pool(workers int) Pool { return db.open(workers) }

// Warm opens a pool and takes n connections from it now, each checked with a
// round trip, so that no connection setup falls inside a burst. Closing the
// pool after the connections releases everything.
func (db *DB) Warm(ctx context.Context, n int) (Pool, []Conn, error) {
	p := db.open(n)
	conns := make([]Conn, 0, n)
	cctx, cancel := context.WithTimeout(ctx, AdminTimeout)
	defer cancel()
	for range n {
		c, err := p.Conn(cctx)
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			p.Close()
			return nil, nil, fmt.Errorf("%s: connection %d of %d to %s failed: %w", db.dialect, len(conns)+1, n, db.addr, err)
		}
		conns = append(conns, c)
	}
	return p, conns, nil
}

// Admin runs f on the run's own connection, one caller at a time, bounded by
// AdminTimeout.
func (db *DB) Admin(ctx context.Context, f func(ctx context.Context, q Querier) error) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, AdminTimeout)
	defer cancel()
	return f(cctx, db.admin)
}

// Exec runs one of racetest's own statements, written with ? placeholders.
func (db *DB) Exec(ctx context.Context, query string, args ...any) error {
	return db.Admin(ctx, func(ctx context.Context, q Querier) error {
		_, _, err := q.Exec(ctx, db.dialect.Rebind(query), args...)
		return err
	})
}

// Count reads one number (written with ? placeholders); no row, or NULL, is 0.
func (db *DB) Count(ctx context.Context, query string, args ...any) (int, error) {
	var n sql.NullInt64
	err := db.Admin(ctx, func(ctx context.Context, q Querier) error {
		return q.QueryRow(ctx, db.dialect.Rebind(query), args...).Scan(&n)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return int(n.Int64), err
}

// Setting reads a server setting that can change outcomes (MariaDB's
// innodb_snapshot_isolation, PostgreSQL's default_transaction_isolation).
// ok is false when the server has no such setting.
func (db *DB) Setting(ctx context.Context, name string) (value string, ok bool, err error) {
	err = db.Admin(ctx, func(ctx context.Context, q Querier) error {
		value, ok, err = Setting(ctx, db.dialect, q, name)
		return err
	})
	return value, ok, err
}

// Setting reads the server setting name over q; ok is false when the server
// has no such setting. name must be a plain identifier (it is checked).
func Setting(ctx context.Context, d Dialect, q Querier, name string) (value string, ok bool, err error) {
	for _, r := range name {
		if !(r == '_' || r == '.' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return "", false, fmt.Errorf("sqldb: %q is not a setting name", name)
		}
	}
	var v sql.NullString
	switch d {
	case Postgres:
		err = q.QueryRow(ctx, "SELECT current_setting($1, true)", name).Scan(&v)
	case MySQL:
		err = q.QueryRow(ctx, "SELECT @@"+name).Scan(&v)
		if MySQLNumber(err) == ErrUnknownSystemVar {
			return "", false, nil
		}
	default:
		return "", false, unknown(d)
	}
	if err != nil {
		return "", false, fmt.Errorf("%s: reading setting %s: %w", d, name, err)
	}
	return v.String, v.Valid, nil
}

// Isolation reads the isolation level in force on the run's own connection,
// as the server spells it ("REPEATABLE-READ", "read committed"). MySQL 8
// calls the variable transaction_isolation, MariaDB 10.11 tx_isolation.
func (db *DB) Isolation(ctx context.Context) (string, error) {
	var level string
	err := db.Admin(ctx, func(ctx context.Context, q Querier) error {
		var err error
		switch db.dialect {
		case Postgres:
			err = q.QueryRow(ctx, "SHOW transaction_isolation").Scan(&level)
		case MySQL:
			level, err = MySQLIsolation(ctx, q)
		default:
			err = unknown(db.dialect)
		}
		return err
	})
	return level, err
}

// Close closes the run's own connection.
func (db *DB) Close() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	return errors.Join(db.admin.Close(), db.adminPool.Close())
}

// InTx runs f in a transaction on c at level ("" is the session's level) and
// commits it; an error from f, or a failed commit, rolls back and returns
// the error unchanged for Classify. Commit and rollback run even when ctx has
// ended, so a transaction is never left open on a kept connection.
func InTx(ctx context.Context, c Conn, level Isolation, f func(tx Tx) error) error {
	tx, err := c.Begin(ctx, level)
	if err != nil {
		return err
	}
	end, cancel := context.WithTimeout(context.WithoutCancel(ctx), AdminTimeout)
	defer cancel()
	if err := f(tx); err != nil {
		return errors.Join(err, ignoreDone(tx.Rollback(end)))
	}
	if err := tx.Commit(end); err != nil {
		_ = tx.Rollback(end)
		return err
	}
	return nil
}

// ignoreDone drops the error of rolling back a transaction the server has
// already ended (a deadlock victim's, say).
func ignoreDone(err error) error {
	if err == nil || errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}
