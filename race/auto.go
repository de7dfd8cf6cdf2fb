package race

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"

	"github.com/racetest/racetest/internal/sqldialect"
	"github.com/racetest/racetest/internal/sqlsnap"
	"github.com/racetest/racetest/runner"
)

// Watcher measures what a store holds, for Case.Auto: per table its rows
// ("grants rows") and the sum of each numeric column ("grants.amount").
// Auto makes one for a *sql.DB; any func of this shape does for another
// store.
type Watcher func(ctx context.Context) (runner.Snapshot, error)

// Auto measures db, a PostgreSQL or MySQL/MariaDB database opened with
// the team's own driver, for Case.Auto: the tables named, or every table
// of the connection's schema (never another schema, never racetest_runs),
// their rows and the sums of their numeric columns, read exactly.
//
//	race.Test(t, race.Case{Subject: newCoupon, Attempt: redeem, Auto: race.Auto(db, "coupons", "redemptions")})
func Auto(db *sql.DB, tables ...string) Watcher {
	var (
		mu   sync.Mutex
		plan *sqlsnap.SnapshotPlan
	)
	return func(ctx context.Context) (runner.Snapshot, error) {
		mu.Lock()
		defer mu.Unlock()
		c, err := db.Conn(ctx)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		q := connQuerier{c}
		if plan == nil {
			var version string
			if err := c.QueryRowContext(ctx, "SELECT version()").Scan(&version); err != nil {
				return nil, fmt.Errorf("race.Auto: reading the server's version: %w", err)
			}
			d := sqldialect.MySQL
			if strings.HasPrefix(version, "PostgreSQL") {
				d = sqldialect.Postgres
			}
			if plan, err = sqlsnap.Plan(ctx, d, q, tables, sqlsnap.DefaultLimits); err != nil {
				return nil, err
			}
		}
		return plan.Read(ctx, q)
	}
}

// connQuerier runs sqlsnap's statements on one connection of a *sql.DB.
type connQuerier struct{ c *sql.Conn }

func (q connQuerier) Rows(ctx context.Context, query string) ([][]any, error) {
	rows, err := q.c.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out [][]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		out = append(out, vals)
	}
	return out, rows.Err()
}

func (q connQuerier) Row(ctx context.Context, query string, dest ...any) error {
	return q.c.QueryRowContext(ctx, query).Scan(dest...)
}

// Snapshot measures the store through the case's Auto.
func (t *target) Snapshot(ctx context.Context) (runner.Snapshot, error) {
	if t.c.Auto == nil {
		return nil, fmt.Errorf("case %q: no Auto to measure the store with", t.c.Name)
	}
	return t.c.Auto(ctx)
}
