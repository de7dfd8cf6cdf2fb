package pgstore

import (
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/scenarios"
)

// Name is the backend's name on the command line.
const Name = "postgres"

// DefaultURL is the server racetest talks to when --postgres-url and
// RACETEST_POSTGRES_URL are both empty.
const DefaultURL = sqldb.DefaultPostgresURL

// hint is the "what to change" half of every connection error.
const hint = sqldb.PostgresHint

// Register adds the PostgreSQL backend and its five core scenarios to r.
func Register(r *scenarios.Registry) {
	r.AddBackend(scenarios.Backend{
		Name:    Name,
		Summary: "PostgreSQL through pgx v5 (--postgres-url, default " + DefaultURL + ")",
		Server:  true,
	})
	for _, sc := range catalog() {
		r.Register(sc.name, Name, factory(sc))
		def, others := "", sc.variants
		if len(others) > 0 && others[0] == VariantPlain {
			def, others = others[0], others[1:] // plain is the default by name
		}
		r.SetVariants(sc.name, Name, def, others...)
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
