// Package sqlrun is one run's hold on a SQL server, shared by the scenario
// families (incidents, anomalies): the run's registration (package runs),
// the tables it creates under its prefix, and the cleanup that drops those
// tables and the registration — those, and no others.
package sqlrun

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/runs"
)

// Server is one run's hold on a SQL server: the connection the run opened
// for setup and counting, and what the run made there.
type Server struct {
	db           *sqldb.DB
	runID        string
	prefix       string
	tableOptions string

	mu         sync.Mutex // guards created and registered
	created    []string
	registered bool // the run is in racetest_runs (see package runs)
}

// New holds db for the run p names. tableOptions ends every CREATE TABLE
// (" ENGINE=InnoDB"; "" on PostgreSQL). Close closes db.
func New(db *sqldb.DB, p scenarios.Params, tableOptions string) *Server {
	return &Server{db: db, runID: p.RunID, prefix: p.Prefix(), tableOptions: tableOptions}
}

// DB is the run's own connection to the server.
func (s *Server) DB() *sqldb.DB { return s.db }

// Close closes the run's connection; it drops nothing (Cleanup does).
func (s *Server) Close() error { return s.db.Close() }

// Table names part in the run's namespace. Names are known before any table
// is made, so that a replica in another process, which never prepares,
// uses them too.
func (s *Server) Table(part string) string { return s.prefix + part }

// backend names the server's family in messages ("mysql", "postgres").
func (s *Server) backend() string { return string(s.db.Dialect()) }

// Create makes table name with columns, failing if it already exists: a
// run never reuses (or later drops) a table it did not make. The run is
// registered before its first table.
//
// The name is recorded for Cleanup before the statement is sent: a CREATE
// cut short by Ctrl-C may still have run on the server (MySQL commits DDL
// at once), and only the server's own "already exists" proves that the
// table is not the run's.
func (s *Server) Create(ctx context.Context, name, columns string) error {
	if err := s.register(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	s.created = append(s.created, name)
	s.mu.Unlock()
	err := s.db.Exec(ctx, "CREATE TABLE "+name+" ("+columns+")"+s.tableOptions)
	if err == nil {
		return nil
	}
	if sqldb.MySQLNumber(err) == sqldb.ErrTableExists || sqldb.PgCode(err) == sqldb.CodeDuplicateTable {
		s.mu.Lock()
		s.created = slices.DeleteFunc(s.created, func(t string) bool { return t == name })
		s.mu.Unlock()
		return fmt.Errorf("%s: table %s already exists on %s and was not made by this run — racetest never uses or drops it; run again for a new run id: %w", s.backend(), name, s.db.Addr(), err)
	}
	return fmt.Errorf("%s: could not create table %s on %s: %w", s.backend(), name, s.db.Addr(), err)
}

// register records the run in racetest_runs, once, and refuses a run id
// whose prefix already names a table (see package runs).
func (s *Server) register(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.registered {
		return nil
	}
	err := s.db.Admin(ctx, func(ctx context.Context, q sqldb.Querier) error {
		return runs.RegisterSQL(ctx, s.db.Dialect(), runs.Querier(q), runs.New(s.runID))
	})
	var inUse *runs.InUseError
	// Without an answer the registration may have been written: Cleanup
	// removes it.
	s.registered = !errors.As(err, &inUse)
	return err
}

// Cleanup drops the tables the run made, then its registration. It dials a
// connection of its own with a deadline of its own: the run's connection
// may be the one a Ctrl-C broke in the middle of a statement, and ctx may
// be cancelled already. What it could not drop stays recorded, so a second
// call retries.
func (s *Server) Cleanup(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.created) == 0 && !s.registered {
		return nil
	}
	if err := s.drop(ctx); err != nil {
		return fmt.Errorf("%s: could not drop %s on %s (drop them by hand, or run 'racetest clean --run-id %s'): %w",
			s.backend(), strings.Join(s.created, ", "), s.db.Addr(), s.runID, err)
	}
	return nil
}

// drop does Cleanup's work with s.mu held, forgetting each thing as it goes.
func (s *Server) drop(ctx context.Context) error {
	cctx, cancel := scenarios.CleanupContext(ctx)
	defer cancel()
	pool := s.db.Pool(1)
	defer pool.Close()
	c, err := scenarios.RetryNoAnswer(cctx, pool.Conn)
	if err != nil {
		return err
	}
	defer c.Close()
	for len(s.created) > 0 {
		if _, _, err := c.Exec(cctx, "DROP TABLE IF EXISTS "+s.created[0]); err != nil {
			return err
		}
		s.created = s.created[1:]
	}
	if s.registered {
		if err := runs.UnregisterSQL(cctx, s.db.Dialect(), runs.Querier(c), s.runID); err != nil {
			return err
		}
		s.registered = false
	}
	return nil
}
