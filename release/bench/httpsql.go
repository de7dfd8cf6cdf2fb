package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/proxy"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/mysqlstore"
	"github.com/racetest/racetest/scenarios/pgstore"
	"github.com/racetest/racetest/scenarios/runs"
)

// The database-backed HTTP targets: a check-then-write endpoint written as
// a service writes it with database/sql, on the local PostgreSQL or
// MariaDB. On these the bench measures one mode more than the others,
// Proxy: the same endpoint, reached by its own path, on a second pool whose
// connections go to a racetest proxy the bench starts in its own process
// (the service's DATABASE_URL pointed at it), not to the server.
const (
	// HTTPPostgres is the endpoint on PostgreSQL (pgx's database/sql
	// driver, its defaults: statements prepared and cached).
	HTTPPostgres = "http-postgres"
	// HTTPMySQL is the endpoint on MySQL or MariaDB (go-sql-driver, with
	// racetest's settings: arguments interpolated, one round trip a
	// statement).
	HTTPMySQL = "http-mysql"
)

// Proxy is the mode of the database-backed HTTP targets whose requests
// reach the database through a racetest proxy: fired as 'racetest http
// --proxy ADDR' fires them (auto's release), with the proxy holding each
// request's INSERT until every request of the burst has reached its own.
const Proxy = "proxy"

// ProxyIdiom says what the proxy mode is, beside the table.
const ProxyIdiom = "the same endpoint on a second pool whose DATABASE_URL is a racetest proxy's (run in the bench's " +
	"own process); fired as 'racetest http --proxy ADDR' fires (auto's release), the proxy holding each " +
	"request's first write until every request of the burst has reached one"

// IsSQLHTTP reports whether backend is a database-backed HTTP target, one
// the proxy mode runs on.
func IsSQLHTTP(backend string) bool { return backend == HTTPPostgres || backend == HTTPMySQL }

// proxiedPath is where the target serves the endpoint on its proxied pool:
// POST /proxied/?key=K. Its counts are the store's, whichever pool asks.
const proxiedPath = "/proxied"

// sqlHTTPMaxAttempts bounds N on the database-backed targets: each of the
// target's two pools holds that many connections, and both stay within
// the server's max_connections (PostgreSQL's default is 100) beside
// whatever else uses the server. A larger N is not measured there (a note
// says so): a pool smaller than N would queue the requests in the service,
// and through the proxy leave every burst to its timeout.
const sqlHTTPMaxAttempts = 32

// sqlDialect is what differs between the two servers: the driver, the
// DDL and the placeholders.
type sqlDialect struct {
	server string // the server's name in messages
	runs   runs.Dialect
	create string // the writes table's columns
	check  string // with %s for the table
	write  string
	count  string
}

var (
	pgHTTP = sqlDialect{server: "PostgreSQL", runs: runs.Postgres,
		create: "(id bigserial PRIMARY KEY, k text NOT NULL)",
		check:  "SELECT count(*) FROM %s WHERE k = $1", write: "INSERT INTO %s (k) VALUES ($1)",
		count: "SELECT count(*) FROM %s WHERE k = $1"}
	mysqlHTTP = sqlDialect{server: "MySQL", runs: runs.MySQL,
		create: "(id bigint AUTO_INCREMENT PRIMARY KEY, k varchar(200) NOT NULL, KEY (k)) ENGINE=InnoDB",
		check:  "SELECT count(*) FROM %s WHERE k = ?", write: "INSERT INTO %s (k) VALUES (?)",
		count: "SELECT count(*) FROM %s WHERE k = ?"}
)

// sqlActor is the check-then-write endpoint on a SQL server: SELECT
// count(*) of the key's rows, then INSERT one when there were none, each
// in autocommit, as a handler writes it with database/sql. The writes are
// the key's rows, counted in the store. Its table is prefix+"writes",
// registered under the prefix's run and dropped by cleanup.
type sqlActor struct {
	d      sqlDialect
	db     *sql.DB // the service's pool, straight to the server
	via    *sql.DB // the same through the proxy; nil without one
	table  string
	id     string
	addr   string // the server's, for the description
	proxAt string // the proxy's, for the description
	// registered: the run's registration may have been written, and is
	// the actor's to remove.
	registered bool
}

// openSQLPool opens the service's pool for backend on conn (a URL or DSN;
// "" is the local server), sized for sqlHTTPMaxAttempts requests at once.
func openSQLPool(backend, conn string) (*sql.DB, string, error) {
	var db *sql.DB
	var addr string
	if backend == HTTPPostgres {
		if conn == "" {
			conn = sqldb.DefaultPostgresURL
		}
		cfg, err := pgx.ParseConfig(conn)
		if err != nil {
			return nil, "", scenarios.BadParam(fmt.Errorf("postgres: bad URL %s: %w", sqldb.RedactPostgres(conn), err))
		}
		if cfg.RuntimeParams == nil {
			cfg.RuntimeParams = map[string]string{}
		}
		cfg.RuntimeParams["application_name"] = "racetest bench " + HTTPPostgres
		db, addr = stdlib.OpenDB(*cfg), fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
	} else {
		cfg, err := sqldb.MySQLConfig(conn)
		if err != nil {
			return nil, "", err
		}
		c, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, "", scenarios.BadParam(err)
		}
		db, addr = sql.OpenDB(c), cfg.Addr
	}
	// Every request of the largest burst finds a connection, and keeps it
	// for the next burst, as a service sized for its load does.
	db.SetMaxOpenConns(sqlHTTPMaxAttempts)
	db.SetMaxIdleConns(sqlHTTPMaxAttempts)
	db.SetConnMaxIdleTime(time.Minute)
	return db, addr, nil
}

// newSQLActor opens backend's endpoint on the server conn names, with its
// table under prefix; proxied, when set, is the proxy's service URL, which
// the proxied pool connects to instead of the server.
func newSQLActor(ctx context.Context, backend, conn, proxied, prefix string) (*sqlActor, error) {
	d := pgHTTP
	if backend == HTTPMySQL {
		d = mysqlHTTP
	}
	id, ok := runs.RunOf(prefix)
	if !ok {
		return nil, fmt.Errorf("%s: the bench's table needs a run's prefix (racetest_<run id>_…), not %q", d.runs, prefix)
	}
	db, addr, err := openSQLPool(backend, conn)
	if err != nil {
		return nil, err
	}
	a := &sqlActor{d: d, db: db, table: prefix + "writes", id: id, addr: addr}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: cannot connect to %s: %w", d.runs, addr, err)
	}
	if proxied != "" {
		if a.via, a.proxAt, err = openSQLPool(backend, proxied); err != nil {
			db.Close()
			return nil, err
		}
		if err := a.via.PingContext(ctx); err != nil {
			a.close()
			return nil, fmt.Errorf("%s: cannot connect through the proxy at %s: %w", d.runs, a.proxAt, err)
		}
	}
	if err := a.prepare(ctx); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		a.cleanup(cctx) //nolint:errcheck // the preparation's error is the one to tell
		a.close()
		return nil, err
	}
	return a, nil
}

func (a *sqlActor) prepare(ctx context.Context) error {
	err := runs.RegisterSQL(ctx, a.d.runs, runs.Std(a.db), runs.New(a.id))
	var inUse *runs.InUseError
	a.registered = !errors.As(err, &inUse)
	if err != nil {
		return err
	}
	if _, err := a.db.ExecContext(ctx, "CREATE TABLE "+a.table+" "+a.d.create); err != nil {
		return fmt.Errorf("%s: create table %s: %w", a.d.runs, a.table, err)
	}
	if a.d.runs == runs.Postgres {
		if _, err := a.db.ExecContext(ctx, "CREATE INDEX ON "+a.table+" (k)"); err != nil {
			return fmt.Errorf("%s: create index on %s: %w", a.d.runs, a.table, err)
		}
	}
	return nil
}

func (a *sqlActor) desc() string {
	s := fmt.Sprintf("SELECT count(*) then INSERT on %s at %s (database/sql)", a.d.server, a.addr)
	if a.via != nil {
		s += ", the proxy mode's through racetest proxy at " + a.proxAt
	}
	return s
}

func (a *sqlActor) checkThenWrite(ctx context.Context, key string) (bool, error) {
	return checkThenInsert(ctx, a.db, a.d, a.table, key)
}

// checkThenInsert is the handler's code: a count, then an insert when it
// was 0.
func checkThenInsert(ctx context.Context, db *sql.DB, d sqlDialect, table, key string) (bool, error) {
	var n int
	if err := db.QueryRowContext(ctx, fmt.Sprintf(d.check, table), key).Scan(&n); err != nil || n > 0 {
		return false, err
	}
	if _, err := db.ExecContext(ctx, fmt.Sprintf(d.write, table), key); err != nil {
		return false, err
	}
	return true, nil
}

// writes counts the key's rows in the store, straight from the server.
func (a *sqlActor) writes(ctx context.Context, key string) (n int, err error) {
	err = a.db.QueryRowContext(ctx, fmt.Sprintf(a.d.count, a.table), key).Scan(&n)
	return n, err
}

// proxied is the endpoint on the proxied pool; nil without a proxy.
func (a *sqlActor) proxied() actor {
	if a.via == nil {
		return nil
	}
	return proxiedActor{a}
}

// cleanup drops the run's table (its prefix holds the target's alone),
// then its registration.
func (a *sqlActor) cleanup(ctx context.Context) error {
	if !a.registered {
		return nil
	}
	if _, err := runs.DropSQL(ctx, a.d.runs, runs.Std(a.db), a.id); err != nil {
		return fmt.Errorf("%s: dropping the bench's table %s: %w — drop it with 'racetest clean --backend %s --run-id %s'", a.d.runs, a.table, err, a.d.runs, a.id)
	}
	a.registered = false
	return nil
}

func (a *sqlActor) close() {
	if a.via != nil {
		a.via.Close()
	}
	a.db.Close()
}

// proxiedActor is the endpoint on the pool that goes through the proxy;
// it counts from the store as the other does, and owns nothing.
type proxiedActor struct{ a *sqlActor }

func (p proxiedActor) checkThenWrite(ctx context.Context, key string) (bool, error) {
	return checkThenInsert(ctx, p.a.via, p.a.d, p.a.table, key)
}
func (p proxiedActor) writes(ctx context.Context, key string) (int, error) {
	return p.a.writes(ctx, key)
}
func (proxiedActor) cleanup(context.Context) error { return nil }
func (proxiedActor) close()                        {}

// sqlConn is the connection string backend's server is given by (""
// is the local one, as for every other backend).
func sqlConn(conn scenarios.Connections, backend string) string {
	if !IsSQLHTTP(backend) {
		return ""
	}
	return conn.Get(sqlStoreName(backend))
}

// sqlStoreName is the registry's name of backend's server, whose
// connection flag (--postgres-url, --mysql-dsn) it is given by.
func sqlStoreName(backend string) string {
	if backend == HTTPMySQL {
		return mysqlstore.Name
	}
	return pgstore.Name
}

// startProxy starts the racetest proxy the proxy mode's pool connects to,
// in the bench's process, in front of backend's server. It returns the
// service URL the target's proxied pool uses, and the proxy.
func startProxy(ctx context.Context, conn scenarios.Connections, backend string) (*proxy.Proxy, error) {
	upstream := sqlConn(conn, backend)
	if upstream == "" {
		upstream = sqldb.DefaultPostgresURL
		if backend == HTTPMySQL {
			upstream = sqldb.DefaultMySQLDSN
		}
	}
	p, err := proxy.Start(ctx, proxy.Config{Upstream: upstream})
	if err != nil {
		var scheme *proxy.SchemeError
		if errors.As(err, &scheme) {
			return nil, scenarios.BadParam(err)
		}
		return nil, err
	}
	return p, nil
}

// sqlHTTPAttempts are the Ns of ns a database-backed target can be
// measured at (see sqlHTTPMaxAttempts), and those it cannot.
func sqlHTTPAttempts(ns []int) (fit, over []int) {
	for _, n := range ns {
		if n > sqlHTTPMaxAttempts {
			over = append(over, n)
		} else if !slices.Contains(fit, n) {
			fit = append(fit, n)
		}
	}
	return fit, over
}
