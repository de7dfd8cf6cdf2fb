package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/scenarios/runs"
)

// mysqlArrival is the statement's start by the server's clock, in µs since
// the epoch: NOW(6) is fixed when the statement starts, before any lock wait.
const mysqlArrival = "CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)"

type mysqlStore struct {
	cfg   *mysql.Config
	admin *sql.DB
	ctw   string // the naive launcher's check-then-write table
	made  []string
	id    string // the bench's run id, registered while its table exists
	// registered: the registration may have been written, and is the
	// bench's to remove (not when the id was another run's).
	registered bool
}

func newMySQLStore(ctx context.Context, dsn, runID string) (*mysqlStore, error) {
	cfg, err := sqldb.MySQLConfig(dsn)
	if err != nil {
		return nil, err
	}
	s := &mysqlStore{cfg: cfg, ctw: benchPrefix(runID) + "naive", id: runID}
	if s.admin, err = s.db(nil); err != nil {
		return nil, err
	}
	s.admin.SetMaxOpenConns(2)
	if err := s.admin.PingContext(ctx); err != nil {
		s.admin.Close()
		return nil, fmt.Errorf("mysql: %s does not answer: %w", cfg.Addr, err)
	}
	return s, nil
}

// db opens a pool with racetest's settings (one round trip per statement,
// arguments interpolated), dialling through dial when set.
func (s *mysqlStore) db(dial dialFunc) (*sql.DB, error) {
	cfg := s.cfg.Clone()
	if dial != nil {
		cfg.DialFunc = dial
	}
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(c), nil
}

func (s *mysqlStore) prepare(ctx context.Context) error {
	err := runs.RegisterSQL(ctx, runs.MySQL, runs.Std(s.admin), runs.New(s.id))
	var inUse *runs.InUseError
	s.registered = !errors.As(err, &inUse)
	if err != nil {
		return err
	}
	for _, t := range []struct{ name, def string }{
		// As mysqlstore's check-then-write table.
		{s.ctw, "id BIGINT AUTO_INCREMENT PRIMARY KEY, token VARCHAR(64) NOT NULL, worker INT NOT NULL, KEY idx_token (token)) ENGINE=InnoDB"},
	} {
		if _, err := s.admin.ExecContext(ctx, "CREATE TABLE `"+t.name+"` ("+t.def); err != nil {
			return fmt.Errorf("mysql: create table %s: %w", t.name, err)
		}
		s.made = append(s.made, t.name)
	}
	return nil
}

// mysqlArriveStmt reads NOW(6), which the server fixes when the statement
// starts.
const mysqlArriveStmt = "SELECT " + mysqlArrival

func (s *mysqlStore) effects(ctx context.Context, token string) (n int, err error) {
	err = s.admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+s.ctw+"` WHERE token = ?", token).Scan(&n)
	return n, err
}

func (s *mysqlStore) open(_ context.Context, dial dialFunc, workers int) (calApp, error) {
	db, err := s.db(dial)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(workers)
	db.SetMaxIdleConns(workers)
	return &mysqlApp{s: s, db: db}, nil
}

type mysqlApp struct {
	s  *mysqlStore
	db *sql.DB
}

func (a *mysqlApp) session(ctx context.Context) (calSession, error) {
	c, err := a.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.PingContext(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return &mysqlSession{c: c}, nil
}

func (a *mysqlApp) close() { a.db.Close() }

type mysqlSession struct{ c *sql.Conn }

func (m *mysqlSession) arrive(ctx context.Context) (at int64, err error) {
	err = m.c.QueryRowContext(ctx, mysqlArriveStmt).Scan(&at)
	return at, err
}

func (m *mysqlSession) close() { m.c.Close() }

// naive is database/sql's default pool (connections opened on demand, two
// kept idle) sending the scenario's own statements the scenario's way: one
// round trip each, arguments interpolated. The launcher is what the bench
// compares, not the client: with the driver's default (interpolateParams
// off) every statement would be prepared, executed and closed, three round
// trips between the check and the write where the scenario has one, and the
// naive launcher would be measured on a wider window than the modes it is
// compared with.
func (s *mysqlStore) naive(context.Context) (naivePool, error) {
	cfg := s.cfg.Clone()
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return &mysqlNaive{s: s, db: sql.OpenDB(c)}, nil
}

type mysqlNaive struct {
	s  *mysqlStore
	db *sql.DB
}

// checkThenWrite is mysqlstore's check-then-write: in a transaction, SELECT
// the token, and INSERT it when absent.
func (m *mysqlNaive) checkThenWrite(ctx context.Context, token string, worker int) error {
	tx, err := m.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var id int64
	err = tx.QueryRowContext(ctx, "SELECT id FROM `"+m.s.ctw+"` WHERE token = ? LIMIT 1", token).Scan(&id)
	if err == nil {
		return nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO `"+m.s.ctw+"` (token, worker) VALUES (?, ?)", token, worker); err != nil {
		return err
	}
	return tx.Commit()
}

func (m *mysqlNaive) arrive(ctx context.Context) (at int64, err error) {
	err = m.db.QueryRowContext(ctx, mysqlArriveStmt).Scan(&at)
	return at, err
}

func (m *mysqlNaive) close() { m.db.Close() }

func (s *mysqlStore) cleanup(ctx context.Context) error {
	for _, t := range s.made {
		if _, err := s.admin.ExecContext(ctx, "DROP TABLE IF EXISTS `"+t+"`"); err != nil {
			return fmt.Errorf("mysql: could not drop the bench's table %s — drop it with 'racetest clean --backend mysql --run-id %s': %w", t, s.id, err)
		}
	}
	s.made = nil
	if s.registered {
		if err := runs.UnregisterSQL(ctx, runs.MySQL, runs.Std(s.admin), s.id); err != nil {
			return err
		}
		s.registered = false
	}
	return nil
}

func (s *mysqlStore) close() { s.admin.Close() }

// user opens a user-style launcher (see LaunchersOf): database/sql over
// go-sql-driver with racetest's connection settings, which differ from the
// driver's defaults only where the scenario's window would (interpolated
// arguments: one round trip per statement) and in parsing.
func (s *mysqlStore) user(ctx context.Context, name string, n int) (userPool, error) {
	if name != UserSQL {
		return nil, fmt.Errorf("mysql: no launcher %q", name)
	}
	c, err := mysql.NewConnector(s.cfg.Clone())
	if err != nil {
		return nil, err
	}
	return openSQLUser(ctx, sql.OpenDB(c), n, sqlStatements{
		check:  "SELECT id FROM `" + s.ctw + "` WHERE token = ? LIMIT 1",
		write:  "INSERT INTO `" + s.ctw + "` (token, worker) VALUES (?, ?)",
		arrive: mysqlArriveStmt,
	})
}
