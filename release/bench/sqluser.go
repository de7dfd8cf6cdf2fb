package bench

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// sqlStatements are a server's check, write and clock reading, in its
// placeholders.
type sqlStatements struct{ check, write, arrive string }

// warm runs the attempt's statements once on c in a transaction rolled
// back, so that a driver that caches prepared statements (pgx's stdlib) has
// them, as on the connections of a test that has fired before.
func (s sqlStatements) warm(ctx context.Context, c *sql.Conn) error {
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var id, at int64
	if err := tx.QueryRowContext(ctx, s.check, "").Scan(&id); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if _, err := tx.ExecContext(ctx, s.write, "", -1); err != nil {
		return err
	}
	return tx.QueryRowContext(ctx, s.arrive).Scan(&at)
}

// sqlUser is database/sql as a Go test usually drives it: one *sql.DB shared
// by the goroutines, BeginTx (its own round trip), then the statements on
// the Tx.
type sqlUser struct {
	db   *sql.DB
	stmt sqlStatements
}

// openSQLUser keeps n connections idle in db's pool and opens them all
// before the first burst (database/sql keeps two by default, and would
// dial the others inside the burst).
func openSQLUser(ctx context.Context, db *sql.DB, n int, stmt sqlStatements) (*sqlUser, error) {
	db.SetMaxIdleConns(n)
	conns := make([]*sql.Conn, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if conns[i], errs[i] = db.Conn(ctx); errs[i] == nil {
				errs[i] = stmt.warm(ctx, conns[i])
			}
		})
	}
	wg.Wait()
	for _, c := range conns {
		if c != nil {
			c.Close() // back to the pool, idle
		}
	}
	if err := errors.Join(errs...); err != nil {
		db.Close()
		return nil, err
	}
	return &sqlUser{db: db, stmt: stmt}, nil
}

func (u *sqlUser) checkThenWrite(ctx context.Context, token string, worker int) error {
	tx, err := u.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var id int64
	err = tx.QueryRowContext(ctx, u.stmt.check, token).Scan(&id)
	if err == nil {
		return nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if _, err := tx.ExecContext(ctx, u.stmt.write, token, worker); err != nil {
		return err
	}
	return tx.Commit()
}

func (u *sqlUser) arrive(ctx context.Context, _ int) (at int64, err error) {
	tx, err := u.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	err = tx.QueryRowContext(ctx, u.stmt.arrive).Scan(&at)
	return at, err
}

func (u *sqlUser) close() { u.db.Close() }
