package pgstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/scenarios"
)

// Name is the backend's name on the command line.
const Name = "postgres"

// ReadKey is the key of the backend's replica in scenarios.Connections and
// in a suite's connections:.
const ReadKey = Name + scenarios.ReadSuffix

// DefaultURL is the server racetest talks to when --postgres-url and
// RACETEST_POSTGRES_URL are both empty.
const DefaultURL = sqldb.DefaultPostgresURL

// hint is the "what to change" half of every connection error.
const hint = sqldb.PostgresHint

// Backend is the PostgreSQL backend as the registry knows it: its
// connection and the knobs it accepts.
var Backend = scenarios.Backend{
	Name:    Name,
	Summary: "PostgreSQL through pgx v5 (--postgres-url, default " + DefaultURL + ")",
	Server:  true,
	Conn: &scenarios.Connection{
		Flag: "postgres-url", Env: "RACETEST_POSTGRES_URL", Default: DefaultURL,
		What: "PostgreSQL URL", Redact: sqldb.RedactPostgres,
		Key:   Name,
		Probe: probe,
	},
	ReadConn: &scenarios.Connection{
		Flag: "postgres-read-url", Env: "RACETEST_POSTGRES_READ_URL",
		What: "a streaming replica of --postgres-url, for replica-read (scripts/cluster.sh start postgres-replica prints one)", Redact: sqldb.RedactPostgres,
		Key:     ReadKey,
		Cluster: "postgres-replica", Probe: probe,
	},
	Isolations: sqldb.IsolationNames(),
	Releases:   []string{"last-byte"},
	Kept:       "tables",
	Janitor:    Janitor,
}

// probe connects to the server conn names, without a handshake.
func probe(ctx context.Context, conn string) error {
	cfg, err := sqldb.PostgresConfig(conn, sqldb.Options{})
	if err != nil {
		return err
	}
	if strings.HasPrefix(cfg.Host, "/") {
		return scenarios.ProbeAddr(ctx, "unix", fmt.Sprintf("%s/.s.PGSQL.%d", cfg.Host, cfg.Port))
	}
	return scenarios.ProbeAddr(ctx, "tcp", sqldb.PostgresAddr(cfg))
}

// Register adds the PostgreSQL backend and its five core scenarios to r.
func Register(r *scenarios.Registry) {
	r.AddBackend(Backend)
	for _, sc := range catalog() {
		r.Register(sc.name, Name, factory(sc))
		r.SetVariants(sc.name, Name, sc.variants)
	}
}

// Config parses a connection string (a postgres:// URL or keyword=value
// pairs; empty means DefaultURL) with what the run adds: its dialer, its
// application_name and its isolation level (see sqldb.PostgresConfig).
func Config(conn string, p scenarios.Params) (*pgx.ConnConfig, error) {
	if _, err := sqldb.ParseIsolation(p.Isolation); err != nil {
		return nil, scenarios.BadParam(fmt.Errorf("postgres: unknown isolation level %q — use read-committed, repeatable-read, serializable or read-uncommitted (or leave it empty for the server default)", p.Isolation))
	}
	return sqldb.PostgresConfig(conn, sqldb.Options{Dial: p.Dial, AppName: "racetest " + p.RunID, Isolation: sqldb.Isolation(p.Isolation)})
}
