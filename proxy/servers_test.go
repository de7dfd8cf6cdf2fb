package proxy

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/internal/testenv"
)

// server is one of the two servers a test runs against.
type server struct {
	name     string
	upstream string
	driver   string // database/sql driver name
	pg       bool
}

var servers = []server{
	{name: "postgres", upstream: testenv.URL("postgres"), driver: "pgx", pg: true},
	{name: "mysql", upstream: testenv.URL("mysql"), driver: "mysql"},
}

// bind writes a statement with $n placeholders in the server's form.
func (s server) bind(q string) string {
	if s.pg {
		return q
	}
	for i := 9; i >= 1; i-- {
		q = strings.ReplaceAll(q, "$"+string(rune('0'+i)), "?")
	}
	return q
}

// fixture is a test's proxy, its direct connection to the server and
// the tables it made (dropped at its end).
type fixture struct {
	t      *testing.T
	srv    server
	p      *Proxy
	direct *sql.DB
	prefix string
	tables []string
}

// start starts a proxy in front of srv (skipping when srv is down) and
// opens a direct connection for setup and counting.
func start(t *testing.T, srv server, cfg Config) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg.Upstream = srv.upstream
	p, err := Start(context.Background(), cfg)
	var ue *UpstreamError
	if errors.As(err, &ue) {
		testenv.Unavailable(t, srv.name, err)
	}
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	direct, err := sql.Open(srv.driver, directDSN(srv))
	if err != nil {
		t.Fatal(err)
	}
	if err := direct.PingContext(ctx); err != nil {
		testenv.Unavailable(t, srv.name, err)
	}
	f := &fixture{t: t, srv: srv, p: p, direct: direct, prefix: "racetest_proxy_" + randomHex()}
	t.Cleanup(func() {
		for _, tb := range f.tables {
			if _, err := direct.Exec("DROP TABLE IF EXISTS " + tb); err != nil {
				t.Errorf("dropping %s: %v", tb, err)
			}
		}
		direct.Close()
	})
	return f
}

func directDSN(srv server) string {
	if srv.pg {
		return srv.upstream
	}
	cfg, err := sqldb.MySQLConfig(srv.upstream)
	if err != nil {
		panic(err)
	}
	cfg.InterpolateParams = false
	return cfg.FormatDSN()
}

func randomHex() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// table creates a table of the test's own from "CREATE TABLE %s (…)".
func (f *fixture) table(name, columns string, extra ...string) string {
	f.t.Helper()
	tb := f.prefix + "_" + name
	f.tables = append(f.tables, tb)
	if _, err := f.direct.Exec("CREATE TABLE " + tb + " " + columns); err != nil {
		f.t.Fatalf("creating %s: %v", tb, err)
	}
	for _, e := range extra {
		if _, err := f.direct.Exec(strings.ReplaceAll(e, "%t", tb)); err != nil {
			f.t.Fatalf("%s: %v", e, err)
		}
	}
	return tb
}

// open opens a database/sql pool through the proxy, as a service would.
func (f *fixture) open(pool int) *sql.DB {
	f.t.Helper()
	dsn := f.p.ServiceURL()
	if !f.srv.pg {
		cfg, err := sqldb.MySQLConfig(dsn)
		if err != nil {
			f.t.Fatal(err)
		}
		cfg.InterpolateParams = false // real prepared statements
		dsn = cfg.FormatDSN()
	}
	db, err := sql.Open(f.srv.driver, dsn)
	if err != nil {
		f.t.Fatal(err)
	}
	db.SetMaxOpenConns(pool)
	db.SetMaxIdleConns(pool)
	f.t.Cleanup(func() { db.Close() })
	return db
}

// count counts rows directly at the server.
func (f *fixture) count(query string, args ...any) int {
	f.t.Helper()
	var n int
	if err := f.direct.QueryRow(f.srv.bind(query), args...).Scan(&n); err != nil {
		f.t.Fatalf("%s: %v", query, err)
	}
	return n
}

// mustOpenMySQL opens a pool on dsn with the driver's tls setting.
func mustOpenMySQL(t *testing.T, dsn, tls string) *sql.DB {
	t.Helper()
	cfg, err := sqldb.MySQLConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.TLSConfig = tls
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
