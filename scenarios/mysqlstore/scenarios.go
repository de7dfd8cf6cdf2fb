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

var errAlready = errors.New("already done")

// effectsTable is where memory-set and check-then-write write their effect:
// one row per executed action, with a non-unique index on the token so that
// nothing but the pattern itself decides how many rows there are.
const effectsTable = "id BIGINT AUTO_INCREMENT PRIMARY KEY, token VARCHAR(64) NOT NULL, worker INT NOT NULL, KEY idx_token (token)"

func effects(part string) func(t *target) []tableDef {
	return func(*target) []tableDef { return []tableDef{{part, effectsTable}} }
}

func countTokenRows(ctx context.Context, t *target, s runner.Subject) (int, error) {
	return t.count(ctx, "SELECT COUNT(*) FROM `"+t.table+"` WHERE token = ?", s.Key)
}

// memorySet keeps the "processing" set in the replica's memory, correctly
// locked inside the replica; the guarded action then inserts its row.
var memorySet = kind{
	tables: effects("memory_set"),
	attempt: func(ctx context.Context, t *target, s *session, subj runner.Subject, w *runner.Worker) runner.Outcome {
		a := s.a
		w.Step(ctx, "check")
		if !a.memory.Claim(subj.Key) {
			return runner.Refused(errAlready)
		}
		if err := pause(ctx, t.p.Gap); err != nil {
			return runner.Failed(err)
		}
		w.Step(ctx, "act")
		if _, err := s.conn.ExecContext(ctx, "INSERT INTO `"+t.table+"` (token, worker) VALUES (?, ?)", subj.Key, w.ID); err != nil {
			return sqldb.Classify(err)
		}
		return runner.Done()
	},
	effects: countTokenRows,
}

// checkThenWrite reads, and when it finds nothing, writes — in one
// transaction, as careful code does, which on its own protects nothing.
// Its variants lock in different ways: FOR UPDATE and LOCK IN SHARE MODE
// lock the index gap of the absent row (InnoDB at repeatable-read or
// above), and GET_LOCK takes a named lock around the whole transaction.
var checkThenWrite = kind{
	variants: []string{scenarios.VariantPlain, scenarios.VariantForUpdate, scenarios.VariantForShare, scenarios.VariantAdvisoryLock},
	tables:   effects("check_then_write"),
	attempt: func(ctx context.Context, t *target, s *session, subj runner.Subject, w *runner.Worker) runner.Outcome {
		check := "SELECT id FROM `" + t.table + "` WHERE token = ? LIMIT 1"
		switch t.p.Variant {
		case scenarios.VariantForUpdate:
			check += " FOR UPDATE"
		case scenarios.VariantForShare:
			// MariaDB has no FOR SHARE; both servers accept this spelling.
			check += " LOCK IN SHARE MODE"
		case scenarios.VariantAdvisoryLock:
			// A session lock, not a transaction's: taken before BEGIN and
			// released after COMMIT, as an application does around its work.
			w.Mark("lock")
			if err := getLock(ctx, s, subj.Key); err != nil {
				return sqldb.Classify(err)
			}
			defer releaseLock(ctx, s, subj.Key)
		}
		tx, err := s.conn.BeginTx(ctx, nil)
		if err != nil {
			return sqldb.Classify(err)
		}
		defer tx.Rollback() // after Commit it does nothing
		w.Step(ctx, "check")
		var id int64
		switch err := tx.QueryRowContext(ctx, check, subj.Key).Scan(&id); {
		case err == nil:
			return runner.Refused(errAlready)
		case !errors.Is(err, sql.ErrNoRows):
			return sqldb.Classify(err)
		}
		if err := pause(ctx, t.p.Gap); err != nil {
			return runner.Failed(err)
		}
		w.Step(ctx, "act")
		if _, err := tx.ExecContext(ctx, "INSERT INTO `"+t.table+"` (token, worker) VALUES (?, ?)", subj.Key, w.ID); err != nil {
			return sqldb.Classify(err)
		}
		// The effect exists only once committed: a serialization failure
		// may still come here.
		if err := tx.Commit(); err != nil {
			return sqldb.Classify(err)
		}
		return runner.Done()
	},
	effects: countTokenRows,
	notes: func(t *target) []string {
		switch t.p.Variant {
		case scenarios.VariantForUpdate:
			return []string{"mysql: check-then-write checks with SELECT ... FOR UPDATE inside the transaction"}
		case scenarios.VariantForShare:
			return []string{"mysql: check-then-write checks with SELECT ... LOCK IN SHARE MODE inside the transaction"}
		case scenarios.VariantAdvisoryLock:
			return []string{fmt.Sprintf("mysql: check-then-write holds GET_LOCK(<token>, %d) from before BEGIN until after COMMIT", int(advisoryWait.Seconds()))}
		}
		return []string{"mysql: check-then-write checks with a plain SELECT inside the transaction (--variant for-update locks)"}
	},
}

// advisoryWait is how long GET_LOCK waits for a named lock: longer than any
// holder's transaction takes, shorter than the attempt timeout.
const advisoryWait = 5 * time.Second

// getLock takes the named lock key for the session. GET_LOCK answers 1
// when taken, 0 when the wait ran out and NULL on an error.
func getLock(ctx context.Context, s *session, key string) error {
	var got sql.NullInt64
	if err := s.conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", key, int(advisoryWait.Seconds())).Scan(&got); err != nil {
		return fmt.Errorf("GET_LOCK: %w", err)
	}
	if !got.Valid || got.Int64 != 1 {
		return fmt.Errorf("GET_LOCK(%q) was not granted within %s", key, advisoryWait)
	}
	return nil
}

// releaseLock releases the named lock even when the attempt's context has
// ended: a lock left held would stall every later attempt of the burst.
func releaseLock(ctx context.Context, s *session, key string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sqldb.CloseTimeout)
	defer cancel()
	_, _ = s.conn.ExecContext(rctx, "DO RELEASE_LOCK(?)", key)
}

// conditionalUpdate is one atomic compare-and-set on an issued coupon. The
// UPDATE itself counts its effect in the row (redemptions), so a second
// change would show in the store even if both attempts thought they won.
var conditionalUpdate = kind{
	tables: func(*target) []tableDef {
		return []tableDef{{"conditional_update",
			"id BIGINT PRIMARY KEY, status VARCHAR(16) NOT NULL, redeemed_by INT NULL, redemptions INT NOT NULL DEFAULT 0"}}
	},
	reset: func(ctx context.Context, t *target, burst int) (runner.Subject, error) {
		id := int64(burst) + 1
		if _, err := t.st.DB().ExecContext(ctx, "INSERT INTO `"+t.table+"` (id, status) VALUES (?, 'issued')", id); err != nil {
			return runner.Subject{}, fmt.Errorf("mysql: issuing coupon %d: %w", id, err)
		}
		return runner.Subject{Burst: burst, Key: t.token(burst), Data: id}, nil
	},
	attempt: func(ctx context.Context, t *target, s *session, subj runner.Subject, w *runner.Worker) runner.Outcome {
		w.Step(ctx, "act")
		res, err := s.conn.ExecContext(ctx, "UPDATE `"+t.table+"` SET status = 'redeemed', redeemed_by = ?, redemptions = redemptions + 1 WHERE id = ? AND status = 'issued'",
			w.ID, subj.Data)
		if err != nil {
			return sqldb.Classify(err)
		}
		n, err := res.RowsAffected()
		switch {
		case err != nil:
			return runner.Failed(err)
		case n == 0:
			return runner.Refused(errors.New("no coupon in status issued"))
		case n > 1:
			return runner.Failed(fmt.Errorf("the conditional update changed %d rows, want at most 1", n))
		}
		return runner.Done()
	},
	effects: func(ctx context.Context, t *target, s runner.Subject) (int, error) {
		return t.count(ctx, "SELECT redemptions FROM `"+t.table+"` WHERE id = ?", s.Data)
	},
}

// VariantActivePerUser is unique-insert's "one active row per user": a
// generated column that holds user_id only while the row is active, under a
// unique key (MySQL and MariaDB have no partial indexes).
const VariantActivePerUser = scenarios.VariantOneActive

// ActivePerUserTable is the definition of the one-active-per-user table on
// server: inactive rows have active_user NULL, which a unique key ignores.
func ActivePerUserTable(server sqldb.ServerInfo) string {
	return "id BIGINT AUTO_INCREMENT PRIMARY KEY, user_id BIGINT NOT NULL, active TINYINT NOT NULL, worker INT NOT NULL, " +
		"active_user BIGINT AS (IF(active = 1, user_id, NULL)) " + server.StoredColumn() + ", " +
		"UNIQUE KEY uq_active_user (active_user), KEY idx_user (user_id)"
}

// uniqueInsert inserts and lets the unique key refuse the rest; only 1062
// means "already done".
var uniqueInsert = kind{
	variants: []string{VariantActivePerUser},
	tables: func(t *target) []tableDef {
		if t.p.Variant == VariantActivePerUser {
			return []tableDef{{"unique_insert_active", ActivePerUserTable(t.st.Server())}}
		}
		return []tableDef{{"unique_insert",
			"id BIGINT AUTO_INCREMENT PRIMARY KEY, token VARCHAR(64) NOT NULL, worker INT NOT NULL, UNIQUE KEY uq_token (token)"}}
	},
	reset: func(_ context.Context, t *target, burst int) (runner.Subject, error) {
		return runner.Subject{Burst: burst, Key: t.token(burst), Data: int64(burst) + 1}, nil
	},
	attempt: func(ctx context.Context, t *target, s *session, subj runner.Subject, w *runner.Worker) runner.Outcome {
		w.Step(ctx, "act")
		var err error
		if t.p.Variant == VariantActivePerUser {
			_, err = s.conn.ExecContext(ctx, "INSERT INTO `"+t.table+"` (user_id, active, worker) VALUES (?, 1, ?)", subj.Data, w.ID)
		} else {
			_, err = s.conn.ExecContext(ctx, "INSERT INTO `"+t.table+"` (token, worker) VALUES (?, ?)", subj.Key, w.ID)
		}
		if err != nil {
			return sqldb.ClassifyInsert(err)
		}
		return runner.Done()
	},
	effects: func(ctx context.Context, t *target, s runner.Subject) (int, error) {
		if t.p.Variant == VariantActivePerUser {
			return t.count(ctx, "SELECT COUNT(*) FROM `"+t.table+"` WHERE user_id = ? AND active = 1", s.Data)
		}
		return countTokenRows(ctx, t, s)
	},
	notes: func(t *target) []string {
		if t.p.Variant == VariantActivePerUser {
			return []string{fmt.Sprintf("mysql: one active row per user through a %s generated column active_user = IF(active = 1, user_id, NULL) under a UNIQUE key",
				t.st.Server().StoredColumn())}
		}
		return nil
	},
}
