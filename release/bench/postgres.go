package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/scenarios/runs"
)

// pgArrival is the statement's arrival by the server's clock, in µs since
// the epoch: statement_timestamp() is when the server received the command
// message, before any lock wait.
const pgArrival = "(extract(epoch FROM statement_timestamp()) * 1000000)::bigint"

type pgStore struct {
	url   string
	cfg   *pgx.ConnConfig
	admin *pgx.Conn
	ctw   string
	made  []string
	id    string // the bench's run id, registered while its table exists
	// registered: the registration may have been written, and is the
	// bench's to remove (not when the id was another run's).
	registered bool
}

func newPGStore(ctx context.Context, url, runID string) (*pgStore, error) {
	if url == "" {
		url = sqldb.DefaultPostgresURL
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: bad URL %s: %w", sqldb.RedactPostgres(url), err)
	}
	s := &pgStore{url: url, cfg: cfg, ctw: benchPrefix(runID) + "naive", id: runID}
	if s.admin, err = pgx.ConnectConfig(ctx, s.config(nil)); err != nil {
		return nil, fmt.Errorf("postgres: cannot connect to %s: %w", sqldb.RedactPostgres(url), err)
	}
	return s, nil
}

// config is racetest's: each statement one Query message (the simple
// protocol, so that the arrival is that message's), and commits that do not
// wait for the disk, so that the bursts are quick.
func (s *pgStore) config(dial dialFunc) *pgx.ConnConfig {
	c := s.cfg.Copy()
	c.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	if c.RuntimeParams == nil {
		c.RuntimeParams = map[string]string{}
	}
	c.RuntimeParams["synchronous_commit"] = "off"
	c.RuntimeParams["application_name"] = "racetest bench"
	if dial != nil {
		c.DialFunc = dial
	}
	return c
}

func (s *pgStore) prepare(ctx context.Context) error {
	err := runs.RegisterSQL(ctx, runs.Postgres, runs.Pgx(s.admin), runs.New(s.id))
	var inUse *runs.InUseError
	s.registered = !errors.As(err, &inUse)
	if err != nil {
		return err
	}
	for _, t := range []struct{ name, ddl string }{
		// As pgstore's effects table.
		{s.ctw, "CREATE TABLE " + s.ctw + " (id bigserial PRIMARY KEY, k text NOT NULL, worker int NOT NULL)"},
	} {
		if _, err := s.admin.Exec(ctx, t.ddl); err != nil {
			return fmt.Errorf("postgres: create table %s: %w", t.name, err)
		}
		s.made = append(s.made, t.name)
	}
	_, err = s.admin.Exec(ctx, "CREATE INDEX ON "+s.ctw+" (k)")
	return err
}

// pgArriveStmt reads statement_timestamp(): when the server received the
// command message.
const pgArriveStmt = "SELECT " + pgArrival

func (s *pgStore) effects(ctx context.Context, token string) (n int, err error) {
	err = s.admin.QueryRow(ctx, "SELECT count(*) FROM "+s.ctw+" WHERE k = $1", token).Scan(&n)
	return n, err
}

func (s *pgStore) open(_ context.Context, dial dialFunc, _ int) (calApp, error) {
	return &pgApp{s: s, cfg: s.config(dial)}, nil
}

type pgApp struct {
	s   *pgStore
	cfg *pgx.ConnConfig
}

func (a *pgApp) session(ctx context.Context) (calSession, error) {
	c, err := pgx.ConnectConfig(ctx, a.cfg)
	if err != nil {
		return nil, err
	}
	return &pgSession{c: c}, nil
}

func (a *pgApp) close() {}

type pgSession struct{ c *pgx.Conn }

func (p *pgSession) arrive(ctx context.Context) (at int64, err error) {
	err = p.c.QueryRow(ctx, pgArriveStmt).Scan(&at)
	return at, err
}

func (p *pgSession) close() { p.c.Close(context.Background()) }

// naive is a pool as database/sql's default behaves (connections opened on
// demand, two kept idle). (pgxpool is not among racetest's dependencies.)
func (s *pgStore) naive(context.Context) (naivePool, error) {
	cfg := s.cfg.Copy()
	// The scenario's statements sent the scenario's way (pgstore, through
	// internal/sqldb): one write and one round trip each, no statement
	// prepared in a round trip of its own. The launcher is what the bench
	// compares, not the client.
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	cfg.StatementCacheCapacity = 0
	cfg.DescriptionCacheCapacity = 0
	return &pgNaive{s: s, cfg: cfg}, nil
}

type pgNaive struct {
	s   *pgStore
	cfg *pgx.ConnConfig

	mu   sync.Mutex
	idle []*pgx.Conn
}

func (p *pgNaive) get(ctx context.Context) (*pgx.Conn, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return c, nil
	}
	p.mu.Unlock()
	return pgx.ConnectConfig(ctx, p.cfg)
}

func (p *pgNaive) put(c *pgx.Conn) {
	p.mu.Lock()
	if len(p.idle) < 2 && !c.IsClosed() {
		p.idle = append(p.idle, c)
		c = nil
	}
	p.mu.Unlock()
	if c != nil {
		c.Close(context.Background())
	}
}

// checkThenWrite is pgstore's check-then-write, written plainly: BEGIN,
// SELECT, INSERT when absent, COMMIT.
func (p *pgNaive) checkThenWrite(ctx context.Context, token string, worker int) error {
	c, err := p.get(ctx)
	if err != nil {
		return err
	}
	defer p.put(c)
	return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
		var id int64
		err := tx.QueryRow(ctx, "SELECT id FROM "+p.s.ctw+" WHERE k = $1 LIMIT 1", token).Scan(&id)
		if err == nil {
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		_, err = tx.Exec(ctx, "INSERT INTO "+p.s.ctw+" (k, worker) VALUES ($1, $2)", token, worker)
		return err
	})
}

func (p *pgNaive) arrive(ctx context.Context) (at int64, err error) {
	c, err := p.get(ctx)
	if err != nil {
		return 0, err
	}
	defer p.put(c)
	err = c.QueryRow(ctx, pgArriveStmt).Scan(&at)
	return at, err
}

func (p *pgNaive) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.idle {
		c.Close(context.Background())
	}
	p.idle = nil
}

func (s *pgStore) cleanup(ctx context.Context) error {
	for _, t := range s.made {
		if _, err := s.admin.Exec(ctx, "DROP TABLE IF EXISTS "+t); err != nil {
			return fmt.Errorf("postgres: could not drop the bench's table %s — drop it with 'racetest clean --backend postgres --run-id %s': %w", t, s.id, err)
		}
	}
	s.made = nil
	if s.registered {
		if err := runs.UnregisterSQL(ctx, runs.Postgres, runs.Pgx(s.admin), s.id); err != nil {
			return err
		}
		s.registered = false
	}
	return nil
}

func (s *pgStore) close() { s.admin.Close(context.Background()) }

// user opens a user-style launcher (see LaunchersOf): pgx's defaults, the
// connection string's settings and nothing of racetest's.
func (s *pgStore) user(ctx context.Context, name string, n int) (userPool, error) {
	switch name {
	case UserPgx:
		// Opened and warmed at once, as a test opens its workers'.
		p := &pgUser{s: s, conns: make([]*pgx.Conn, n)}
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				if p.conns[i], errs[i] = pgx.ConnectConfig(ctx, s.cfg.Copy()); errs[i] == nil {
					errs[i] = p.warm(ctx, p.conns[i])
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			p.close()
			return nil, err
		}
		return p, nil
	case UserSQL:
		db := stdlib.OpenDB(*s.cfg.Copy())
		return openSQLUser(ctx, db, n, sqlStatements{
			check:  "SELECT id FROM " + s.ctw + " WHERE k = $1 LIMIT 1",
			write:  "INSERT INTO " + s.ctw + " (k, worker) VALUES ($1, $2)",
			arrive: pgArriveStmt,
		})
	}
	return nil, fmt.Errorf("postgres: no launcher %q", name)
}

// pgUser is pgx as its documentation shows it: a connection per goroutine,
// Begin in a round trip of its own, then the statements on the Tx.
type pgUser struct {
	s     *pgStore
	conns []*pgx.Conn
}

// warm runs the attempt's statements once in a transaction rolled back, so
// that pgx has prepared and cached them, as on the connections of a test
// that has fired before: the first burst on a fresh connection would
// otherwise prepare its INSERT in a round trip between the check and the
// write, and measure a wider window than the others.
func (p *pgUser) warm(ctx context.Context, c *pgx.Conn) error {
	tx, err := c.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	var id, at int64
	if err := tx.QueryRow(ctx, "SELECT id FROM "+p.s.ctw+" WHERE k = $1 LIMIT 1", "").Scan(&id); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+p.s.ctw+" (k, worker) VALUES ($1, $2)", "", -1); err != nil {
		return err
	}
	return tx.QueryRow(ctx, pgArriveStmt).Scan(&at)
}

func (p *pgUser) checkThenWrite(ctx context.Context, token string, worker int) error {
	tx, err := p.conns[worker].Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	var id int64
	err = tx.QueryRow(ctx, "SELECT id FROM "+p.s.ctw+" WHERE k = $1 LIMIT 1", token).Scan(&id)
	if err == nil {
		return nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+p.s.ctw+" (k, worker) VALUES ($1, $2)", token, worker); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func (p *pgUser) arrive(ctx context.Context, worker int) (at int64, err error) {
	tx, err := p.conns[worker].Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx)
	err = tx.QueryRow(ctx, pgArriveStmt).Scan(&at)
	return at, err
}

func (p *pgUser) close() {
	for _, c := range p.conns {
		if c != nil {
			c.Close(context.Background())
		}
	}
	p.conns = nil
}
