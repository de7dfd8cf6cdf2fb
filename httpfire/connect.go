package httpfire

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/racetest/racetest/internal/redisdb"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/pgstore"
	"github.com/racetest/racetest/scenarios/redisstore"
)

// The stores a check reads (--effects, --invariant, --effects auto) are
// reached here, the same way for each kind of check.

// redisOptions reads the run's Redis URL (or the default) for a check;
// what names the check in the refusal of a Redis Cluster, whose keys one
// client of one node cannot all read.
func redisOptions(conn scenarios.Connections, what string) (*redis.Options, error) {
	raw := redisdb.RunURL(conn.Get(redisstore.Name))
	if redisstore.IsClusterURL(raw) {
		return nil, &InputError{Field: "redis-url", Err: redisstore.ClusterRefusal(what)}
	}
	opt, err := redis.ParseURL(raw)
	if err != nil {
		return nil, inputErrorf("redis-url", "cannot parse the Redis URL (%s): %v", redactURL(raw), strings.ReplaceAll(err.Error(), raw, redactURL(raw)))
	}
	return opt, nil
}

// openRedis connects a check's client to opt's server and proves that it
// answers, and that it is one server: on a cluster node most keys would
// meet MOVED errors.
func openRedis(ctx context.Context, opt *redis.Options, what string) (*redis.Client, error) {
	cl := redis.NewClient(opt)
	if err := cl.Ping(ctx).Err(); err != nil {
		cl.Close()
		return nil, fmt.Errorf("cannot connect to Redis at %s: %w — is it running? set --redis-url or RACETEST_REDIS_URL", opt.Addr, err)
	}
	if err := redisstore.RefuseCluster(ctx, "", cl, what); err != nil {
		cl.Close()
		return nil, &InputError{Field: "redis-url", Err: err}
	}
	return cl, nil
}

// pgConfig reads the run's PostgreSQL URL (or the default) for a check.
func pgConfig(conn scenarios.Connections) (*pgx.ConnConfig, error) {
	raw := conn.Get(pgstore.Name)
	if raw == "" {
		raw = defaultPostgresURL
	}
	cfg, err := pgx.ParseConfig(raw)
	if err != nil {
		return nil, inputErrorf("postgres-url", "cannot parse the PostgreSQL URL (%s): %v", redactURL(raw), errors.Unwrap(err))
	}
	return cfg, nil
}

// openMySQL opens a check's pool of one connection to cfg's server and
// proves that it answers.
func openMySQL(ctx context.Context, cfg *mysql.Config) (*sql.DB, error) {
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(1)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("cannot connect to MySQL at %s: %w — is it running? set --mysql-dsn or RACETEST_MYSQL_DSN", cfg.Addr, err)
	}
	return db, nil
}
