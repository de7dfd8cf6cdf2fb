package sqlrun_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/runs"
	"github.com/racetest/racetest/scenarios/sqlrun"
)

var servers = []struct{ d sqldb.Dialect }{{sqldb.MySQL}, {sqldb.Postgres}}

// open connects to d's server (skipping, or failing under
// RACETEST_REQUIRE_SERVERS, without it) for a fresh run.
func open(t *testing.T, d sqldb.Dialect) (scenarios.Params, *sqldb.DB) {
	t.Helper()
	return scenarios.Params{RunID: scenarios.NewRunID(), Conn: testenv.Conns("mysql", "postgres")}, testenv.SQL(t, d)
}

// left counts what run p has on db: tables under its prefix, and its
// registration.
func left(t *testing.T, db *sqldb.DB, p scenarios.Params) (tables, registered int) {
	t.Helper()
	ctx := context.Background()
	schema := "DATABASE()"
	if db.Dialect() == sqldb.Postgres {
		schema = "current_schema()"
	}
	tables, err := db.Count(ctx, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = "+schema+" AND table_name LIKE ?",
		strings.ReplaceAll(p.Prefix(), "_", `\_`)+"%")
	if err != nil {
		t.Fatal(err)
	}
	registered, err = db.Count(ctx, "SELECT COUNT(*) FROM "+runs.Table+" WHERE run_id = ?", p.RunID)
	if err != nil {
		t.Fatal(err)
	}
	return tables, registered
}

// A run registers before its first table, and Cleanup drops every table it
// made and then the registration, even after its context ended; a second
// Cleanup has nothing to do.
func TestCleanupDropsWhatTheRunMade(t *testing.T) {
	for _, srv := range servers {
		t.Run(string(srv.d), func(t *testing.T) {
			p, probe := open(t, srv.d)
			_, db := open(t, srv.d)
			s := sqlrun.New(db, p, "")
			t.Cleanup(func() { s.Cleanup(context.Background()) })
			ctx, cancel := context.WithCancel(context.Background())
			for _, part := range []string{"a", "b"} {
				if err := s.Create(ctx, s.Table(part), "id INT PRIMARY KEY"); err != nil {
					t.Fatal(err)
				}
			}
			if tables, registered := left(t, probe, p); tables != 2 || registered != 1 {
				t.Fatalf("after Create: %d tables, %d registrations; want 2 and 1", tables, registered)
			}
			cancel() // as after Ctrl-C
			if err := s.Cleanup(ctx); err != nil {
				t.Fatal(err)
			}
			if tables, registered := left(t, probe, p); tables+registered != 0 {
				t.Fatalf("after Cleanup: %d tables and %d registrations left", tables, registered)
			}
			if err := s.Cleanup(context.Background()); err != nil {
				t.Errorf("a second Cleanup: %v", err)
			}
		})
	}
}

// A table that already has the run's name is refused, neither used nor
// dropped; the run's own tables and registration still go.
func TestCreateRefusesATableTheRunDidNotMake(t *testing.T) {
	for _, srv := range servers {
		t.Run(string(srv.d), func(t *testing.T) {
			p, probe := open(t, srv.d)
			_, db := open(t, srv.d)
			ctx := context.Background()
			s := sqlrun.New(db, p, "")
			t.Cleanup(func() { s.Cleanup(context.Background()) })
			squatter := s.Table("squat")
			if err := s.Create(ctx, s.Table("own"), "id INT"); err != nil {
				t.Fatal(err)
			}
			if err := probe.Exec(ctx, "CREATE TABLE "+squatter+" (id INT)"); err != nil {
				t.Fatal(err)
			}
			defer probe.Exec(ctx, "DROP TABLE IF EXISTS "+squatter)
			err := s.Create(ctx, squatter, "id INT")
			if err == nil || !strings.Contains(err.Error(), "was not made by this run") {
				t.Fatalf("Create over another's table: %v, want a refusal naming it", err)
			}
			if err := s.Cleanup(ctx); err != nil {
				t.Fatal(err)
			}
			if tables, registered := left(t, probe, p); tables != 1 || registered != 0 {
				t.Errorf("after Cleanup: %d tables (want only the other's) and %d registrations", tables, registered)
			}
		})
	}
}

// A run id registered already is refused before any table, and Cleanup
// then removes nothing of the other run's.
func TestCreateRefusesARunIDInUse(t *testing.T) {
	for _, srv := range servers {
		t.Run(string(srv.d), func(t *testing.T) {
			p, probe := open(t, srv.d)
			_, db1 := open(t, srv.d)
			_, db2 := open(t, srv.d)
			ctx := context.Background()
			first, second := sqlrun.New(db1, p, ""), sqlrun.New(db2, p, "")
			if err := first.Create(ctx, first.Table("a"), "id INT"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { first.Cleanup(context.Background()) })
			var inUse *runs.InUseError
			if err := second.Create(ctx, second.Table("b"), "id INT"); !errors.As(err, &inUse) {
				t.Fatalf("a second run with the same id: %v, want InUseError", err)
			}
			if err := second.Cleanup(ctx); err != nil {
				t.Fatal(err)
			}
			if tables, registered := left(t, probe, p); tables != 1 || registered != 1 {
				t.Errorf("the refused run's Cleanup touched the first: %d tables, %d registrations left; want 1 and 1", tables, registered)
			}
			if err := first.Cleanup(ctx); err != nil {
				t.Fatal(err)
			}
			if tables, registered := left(t, probe, p); tables+registered != 0 {
				t.Errorf("after the first run's Cleanup: %d tables and %d registrations left", tables, registered)
			}
		})
	}
}
