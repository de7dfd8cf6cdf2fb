package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// ttlLease takes a lease row that is free or expired by the server's clock.
// Each grant is also recorded, in the same transaction, with the interval
// it was valid for, so that the store itself tells whether two grants were
// ever valid at once.
var ttlLease = kind{
	tables: func(*target) []tableDef {
		return []tableDef{
			{"ttl_lease", "name VARCHAR(64) PRIMARY KEY, owner VARCHAR(64) NOT NULL, granted_at DATETIME(6) NULL, lock_until DATETIME(6) NOT NULL, fence BIGINT NOT NULL DEFAULT 0"},
			{"ttl_lease_grants", "id BIGINT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(64) NOT NULL, owner VARCHAR(64) NOT NULL, fence BIGINT NOT NULL, granted_at DATETIME(6) NOT NULL, lock_until DATETIME(6) NOT NULL, KEY idx_name (name)"},
		}
	},
	reset: func(ctx context.Context, t *target, burst int) (runner.Subject, error) {
		s := runner.Subject{Burst: burst, Key: t.token(burst)}
		return s, t.newLease(ctx, s.Key)
	},
	attempt: func(ctx context.Context, t *target, s *session, subj runner.Subject, w *runner.Worker) runner.Outcome {
		owner := fmt.Sprintf("r%d.w%d.v%d", w.Replica, w.ID, w.Wave)
		granted, err := t.acquire(ctx, s.conn, subj.Key, owner, w)
		switch {
		case err != nil:
			return sqldb.Classify(err)
		case !granted:
			return runner.Refused(errors.New("lease held by another worker"))
		}
		// The holder now "dies" without releasing: only the TTL frees it.
		return runner.Done()
	},
	effects: func(ctx context.Context, t *target, s runner.Subject) (int, error) {
		return t.holders(ctx, s.Key)
	},
	notes: func(t *target) []string {
		return []string{fmt.Sprintf("mysql: leases expire by the server's clock: lock_until = NOW(6) + %s", t.p.TTL)}
	},
}

// newLease inserts a lease row that has never been granted.
func (t *target) newLease(ctx context.Context, name string) error {
	_, err := t.st.DB().ExecContext(ctx, "INSERT INTO `"+t.table+"` (name, owner, lock_until) VALUES (?, '', '2000-01-01')", name)
	if err != nil {
		return fmt.Errorf("mysql: creating lease %s: %w", name, err)
	}
	return nil
}

// acquire takes lease name for owner if it is free or expired, and records
// the grant in the same transaction. w, when not nil, gets the "act" mark.
func (t *target) acquire(ctx context.Context, conn *sql.Conn, name, owner string, w *runner.Worker) (granted bool, err error) {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback() // after Commit it does nothing
	if w != nil {
		w.Step(ctx, "act")
	}
	res, err := tx.ExecContext(ctx, "UPDATE `"+t.table+"` SET owner = ?, granted_at = NOW(6), lock_until = NOW(6) + INTERVAL ? MICROSECOND, fence = fence + 1 WHERE name = ? AND lock_until < NOW(6)",
		owner, t.p.TTL.Microseconds(), name)
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, err
	}
	// Copied from the row this transaction just changed, by owner: on an
	// engine without transactions a later grant may have replaced it, and
	// then nothing is copied rather than someone else's grant.
	res, err = tx.ExecContext(ctx, "INSERT INTO `"+t.grants+"` (name, owner, fence, granted_at, lock_until) SELECT name, owner, fence, granted_at, lock_until FROM `"+t.table+"` WHERE name = ? AND owner = ?",
		name, owner)
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return false, fmt.Errorf("the grant to %s was replaced before it was recorded (%d rows copied, err %v)", owner, n, err)
	}
	if err := tx.Commit(); err != nil {
		return false, err
	}
	return true, nil
}

// holders is the most grants of lease name that were valid at one instant,
// from the recorded grants: more than one means two holders at once.
func (t *target) holders(ctx context.Context, name string) (int, error) {
	rows, err := t.st.DB().QueryContext(ctx, "SELECT granted_at, lock_until FROM `"+t.grants+"` WHERE name = ?", name)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var gs []scenarios.Grant
	for rows.Next() {
		var g scenarios.Grant
		if err := rows.Scan(&g.From, &g.Until); err != nil {
			return 0, err
		}
		gs = append(gs, g)
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	return scenarios.MostHolders(gs), nil
}

// Checks verifies the lease's liveness on the server's clock: a holder that
// died without releasing blocks others until the TTL, and not after it.
func (t *target) Checks(ctx context.Context) []runner.Check {
	if t.name != scenarios.TTLLease {
		return nil
	}
	return []runner.Check{t.leaseLiveness(ctx)}
}

func (t *target) leaseLiveness(ctx context.Context) runner.Check {
	c := runner.Check{Name: "lease liveness"}
	ttl := t.p.TTL
	ctx, cancel := context.WithTimeout(ctx, ttl+opTimeout)
	defer cancel()
	conn, err := t.st.DB().Conn(ctx)
	if err != nil {
		c.Detail = fmt.Sprintf("mysql: connection for the liveness check: %v", err)
		return c
	}
	defer conn.Close()
	// A probe proves "refused before the TTL" only if its answer came back
	// before the TTL had passed since the first grant was asked for; on a
	// loaded machine it may not, and then the check starts over.
	for try := 0; try < 5; try++ {
		name := fmt.Sprintf("%sliveness%d", t.p.Prefix(), try)
		if err := t.newLease(ctx, name); err != nil {
			c.Detail = err.Error()
			return c
		}
		start := time.Now()
		if ok, err := t.acquire(ctx, conn, name, "dies", nil); err != nil || !ok {
			c.Detail = fmt.Sprintf("the first holder could not take a free lease (granted=%v, err=%v)", ok, err)
			return c
		}
		_ = pause(ctx, ttl/2-time.Since(start))
		early, err := t.acquire(ctx, conn, name, "early", nil)
		earlyAt := time.Since(start)
		if err != nil {
			c.Detail = err.Error()
			return c
		}
		if earlyAt >= ttl {
			continue
		}
		if early {
			c.Detail = fmt.Sprintf("at %s, before the %s TTL, the lease was granted to a second holder: expected refused",
				earlyAt.Round(time.Millisecond), ttl)
			return c
		}
		return scenarios.AwaitExpiry(ctx, start, earlyAt, ttl, ", server clock", func() (bool, error) {
			return t.acquire(ctx, conn, name, "next", nil)
		})
	}
	c.Detail = fmt.Sprintf("inconclusive: in 5 tries no refusal came back within the %s TTL (the machine is too slow for this TTL; try a longer --ttl)", ttl)
	return c
}
