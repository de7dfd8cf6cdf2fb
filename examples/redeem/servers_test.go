package redeem_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"
)

// The servers the tests use, from the same environment variables as the
// racetest command, with the same defaults.
const (
	mysqlEnv     = "RACETEST_MYSQL_DSN"
	postgresEnv  = "RACETEST_POSTGRES_URL"
	redisEnv     = "RACETEST_REDIS_URL"
	requireEnv   = "RACETEST_REQUIRE_SERVERS"
	defaultMySQL = "root@tcp(127.0.0.1:3306)/test"
	defaultPG    = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	defaultRedis = "redis://127.0.0.1:6379/0"
	// connectTimeout bounds a dial and a handshake: a refused connection
	// fails at once, a server slow under load gets its time.
	connectTimeout = 10 * time.Second
)

type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// unavailable skips the test, or fails it when the servers are required
// (RACETEST_REQUIRE_SERVERS=1, as CI sets it).
func unavailable(t *testing.T, what, env string, err error) {
	t.Helper()
	if os.Getenv(requireEnv) != "" {
		t.Fatalf("%s unavailable and %s is set: %v", what, requireEnv, err)
	}
	t.Skipf("%s unavailable, skipping (set %s to point at one; %s=1 makes this a failure): %v", what, env, requireEnv, err)
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// prefix is a name for what one test creates: racetest_<random>, which CI
// checks is gone when the tests end.
func prefix(t *testing.T) string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "racetest_" + hex.EncodeToString(b[:])
}

// openMySQL opens a pool of up to conns connections, dialled through dial
// when it is not nil: registered with mysql.RegisterDialContext under a
// network name of the test's own, which the DSN then names.
func openMySQL(t *testing.T, conns int, dial func(ctx context.Context, addr string) (net.Conn, error)) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(env(mysqlEnv, defaultMySQL))
	if err != nil {
		t.Fatalf("%s: %v (want a go-sql-driver DSN such as %s)", mysqlEnv, err, defaultMySQL)
	}
	cfg.Timeout = connectTimeout
	if dial != nil {
		cfg.Net = prefix(t)
		mysql.RegisterDialContext(cfg.Net, dial)
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatalf("%s: %v", mysqlEnv, err)
	}
	return ping(t, sql.OpenDB(conn), conns, "MySQL/MariaDB at "+cfg.Addr, mysqlEnv)
}

func openPostgres(t *testing.T, conns int, dial dialFunc) *sql.DB {
	t.Helper()
	cfg, err := pgx.ParseConfig(env(postgresEnv, defaultPG))
	if err != nil {
		t.Fatalf("%s: %v (want a URL such as %s)", postgresEnv, err, defaultPG)
	}
	cfg.ConnectTimeout = connectTimeout
	if dial != nil {
		cfg.DialFunc = dial
	}
	return ping(t, stdlib.OpenDB(*cfg), conns, fmt.Sprintf("PostgreSQL at %s:%d", cfg.Host, cfg.Port), postgresEnv)
}

func ping(t *testing.T, db *sql.DB, conns int, what, envName string) *sql.DB {
	t.Helper()
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	ctx, cancel := context.WithTimeout(context.Background(), 2*connectTimeout)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		unavailable(t, what, envName, err)
	}
	return db
}

// redisOptions are the options of RACETEST_REDIS_URL, or skip the test.
func redisOptions(t *testing.T) *redis.Options {
	t.Helper()
	opt, err := redis.ParseURL(env(redisEnv, defaultRedis))
	if err != nil {
		t.Fatalf("%s: %v (want a URL such as %s)", redisEnv, err, defaultRedis)
	}
	opt.DialTimeout = connectTimeout
	c := redis.NewClient(opt)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*connectTimeout)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		unavailable(t, "Redis at "+opt.Addr, redisEnv, err)
	}
	return opt
}
