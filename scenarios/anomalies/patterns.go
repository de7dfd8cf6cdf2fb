package anomalies

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// ---- lost-update: one account row; its balance is the effects ----

var lostUpdateSQL = &sqlPattern{
	tables: []table{{part: "accounts",
		// writes counts the committed writes: the store computes it
		// (writes + 1), so unlike the balance it cannot be lost.
		columns: "id BIGINT PRIMARY KEY, balance BIGINT NOT NULL, version BIGINT NOT NULL, writes BIGINT NOT NULL"}},
	reset: func(ctx context.Context, t *sqlTarget, s runner.Subject) error {
		return t.db.Exec(ctx, "INSERT INTO "+t.tableName("accounts")+" (id, balance, version, writes) VALUES (?, 0, 0, 0)", s.Data)
	},
	attempts: map[string]sqlAttempt{
		Naive:     readModifyWrite(""),
		ForUpdate: readModifyWrite(" FOR UPDATE"),
		Atomic:    atomicIncrement,
		Version:   versionedIncrement,
	},
	tally: func(ctx context.Context, t *sqlTarget, s runner.Subject) (tally, error) {
		var balance, writes int
		err := t.db.Admin(ctx, func(ctx context.Context, q sqldb.Querier) error {
			return q.QueryRow(ctx, t.q("SELECT balance, writes FROM "+t.tableName("accounts")+" WHERE id = ?"), s.Data).Scan(&balance, &writes)
		})
		// Every write that committed must have landed.
		return tally{effects: balance, allowed: writes, required: writes}, err
	},
	note: func(t *sqlTarget) string {
		return "lost-update: effects are the increments in the balance; each committed write also counts itself (writes = writes + 1), and fewer increments than writes is a lost update"
	},
}

// readModifyWrite reads the balance (with lock appended to the SELECT) and
// writes read + 1, computed in the application, in one transaction.
func readModifyWrite(lock string) sqlAttempt {
	return func(ctx context.Context, s *sqlSession, subj runner.Subject, w *runner.Worker) runner.Outcome {
		t := s.t
		tx, err := s.begin(ctx)
		if err != nil {
			return outcome(err)
		}
		w.Step(ctx, "check")
		var balance int64
		err = tx.QueryRow(ctx, t.q("SELECT balance FROM "+t.tableName("accounts")+" WHERE id = ?"+lock), subj.Data).Scan(&balance)
		if err == nil {
			err = scenarios.Sleep(ctx, t.p.Gap)
		}
		if err == nil {
			w.Step(ctx, "act")
			_, _, err = tx.Exec(ctx, t.q("UPDATE "+t.tableName("accounts")+" SET balance = ?, writes = writes + 1 WHERE id = ?"), balance+1, subj.Data)
		}
		return outcome(end(ctx, tx, err))
	}
}

// atomicIncrement lets the store do the arithmetic, in one statement.
func atomicIncrement(ctx context.Context, s *sqlSession, subj runner.Subject, w *runner.Worker) runner.Outcome {
	t := s.t
	w.Step(ctx, "act")
	n, _, err := s.c.Exec(ctx, t.q("UPDATE "+t.tableName("accounts")+" SET balance = balance + 1, writes = writes + 1 WHERE id = ?"), subj.Data)
	if err == nil && n != 1 {
		err = fmt.Errorf("the increment changed %d rows, want 1", n)
	}
	return outcome(err)
}

// versionedIncrement is optimistic concurrency: write only if the version
// read is still the row's, and read again when the write changed 0 rows.
func versionedIncrement(ctx context.Context, s *sqlSession, subj runner.Subject, w *runner.Worker) runner.Outcome {
	t := s.t
	tries := maxTries(t.p)
	for try := 1; ; try++ {
		w.Step(ctx, "check")
		var balance, version int64
		err := s.c.QueryRow(ctx, t.q("SELECT balance, version FROM "+t.tableName("accounts")+" WHERE id = ?"), subj.Data).Scan(&balance, &version)
		if err == nil {
			err = scenarios.Sleep(ctx, t.p.Gap)
		}
		if err != nil {
			return outcome(err)
		}
		w.Step(ctx, "act")
		n, _, err := s.c.Exec(ctx, t.q("UPDATE "+t.tableName("accounts")+" SET balance = ?, version = version + 1, writes = writes + 1 WHERE id = ? AND version = ?"),
			balance+1, subj.Data, version)
		switch {
		case err != nil:
			return outcome(err)
		case n == 1:
			return runner.Done()
		case try == tries:
			return outcome(errDeclined{fmt.Sprintf("the version moved on each of %d tries", tries)})
		}
	}
}

// maxTries bounds a pattern's own loop (version, conditional): each round
// lets at least one of the burst's writers through, so one try per writer
// and a margin always suffice.
func maxTries(p scenarios.Params) int { return 2*max(p.Attempts, 1) + 4 }

// ---- write-skew: one doctor per attempt, all on call ----

var writeSkewSQL = &sqlPattern{
	tables: []table{
		{part: "doctors", columns: "shift BIGINT NOT NULL, doctor INT NOT NULL, on_call INT NOT NULL, PRIMARY KEY (shift, doctor)"},
		// The materialized conflict: one row per shift that every writer
		// of the shift updates first.
		{part: "shifts", columns: "id BIGINT PRIMARY KEY, version BIGINT NOT NULL"},
	},
	reset: func(ctx context.Context, t *sqlTarget, s runner.Subject) error {
		if err := t.db.Exec(ctx, "INSERT INTO "+t.tableName("shifts")+" (id, version) VALUES (?, 0)", s.Data); err != nil {
			return err
		}
		n := max(t.p.Attempts, 1)
		rows := make([]string, n)
		args := make([]any, 0, 2*n)
		for i := range rows {
			rows[i] = "(?, ?, 1)"
			args = append(args, s.Data, i)
		}
		return t.db.Exec(ctx, "INSERT INTO "+t.tableName("doctors")+" (shift, doctor, on_call) VALUES "+strings.Join(rows, ", "), args...)
	},
	attempts: map[string]sqlAttempt{
		Naive:        goOffCall(false, false),
		ForUpdate:    goOffCall(true, false),
		Materialized: goOffCall(false, true),
	},
	tally: func(ctx context.Context, t *sqlTarget, s runner.Subject) (tally, error) {
		off, err := t.count(ctx, "SELECT COUNT(*) FROM "+t.tableName("doctors")+" WHERE shift = ? AND on_call = 0", s.Data)
		// All but one doctor may go; nobody left is the violation.
		allowed := max(t.p.Attempts, 1) - 1
		return tally{effects: off, allowed: allowed, required: min(1, allowed)}, err
	},
	note: func(t *sqlTarget) string {
		return fmt.Sprintf("write-skew: %d doctors on call per shift, one per attempt; effects are the doctors who went off call, at most %d may", t.p.Attempts, t.p.Attempts-1)
	},
}

var errStays = errDeclined{"fewer than two doctors on call: stays on call"}

// goOffCall checks that another doctor stays on call and takes the worker's
// own doctor off, in one transaction. lock reads the shift with FOR UPDATE;
// materialize first updates the shift's conflict row.
func goOffCall(lock, materialize bool) sqlAttempt {
	return func(ctx context.Context, s *sqlSession, subj runner.Subject, w *runner.Worker) runner.Outcome {
		t := s.t
		doctors := t.tableName("doctors")
		tx, err := s.begin(ctx)
		if err != nil {
			return outcome(err)
		}
		if materialize {
			w.Step(ctx, "lock")
			_, _, err = tx.Exec(ctx, t.q("UPDATE "+t.tableName("shifts")+" SET version = version + 1 WHERE id = ?"), subj.Data)
		}
		onCall := 0
		if err == nil {
			w.Step(ctx, "check")
			onCall, err = countOnCall(ctx, tx, t, doctors, subj.Data, lock)
		}
		if err == nil && onCall < 2 {
			err = errStays
		}
		if err == nil {
			err = scenarios.Sleep(ctx, t.p.Gap)
		}
		if err == nil {
			w.Step(ctx, "act")
			_, _, err = tx.Exec(ctx, t.q("UPDATE "+doctors+" SET on_call = 0 WHERE shift = ? AND doctor = ?"), subj.Data, w.ID)
		}
		return outcome(end(ctx, tx, err))
	}
}

// countOnCall counts the shift's doctors on call. Locked, it locks every
// doctor of the shift (an aggregate cannot be read FOR UPDATE) and counts
// in the application.
func countOnCall(ctx context.Context, q sqldb.Querier, t *sqlTarget, doctors string, shift any, lock bool) (int, error) {
	if !lock {
		var n int
		err := q.QueryRow(ctx, t.q("SELECT COUNT(*) FROM "+doctors+" WHERE shift = ? AND on_call = 1"), shift).Scan(&n)
		return n, err
	}
	rows, err := q.Query(ctx, t.q("SELECT doctor, on_call FROM "+doctors+" WHERE shift = ? ORDER BY doctor FOR UPDATE"), shift)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range rows.Values {
		if fmt.Sprint(r[1]) == "1" {
			n++
		}
	}
	return n, nil
}

// ---- job-queue: one pending job per attempt ----

var jobQueueSQL = &sqlPattern{
	tables: []table{{part: "jobs",
		// runs counts the times a job was taken: the store computes it.
		columns: "id BIGINT PRIMARY KEY, burst BIGINT NOT NULL, status VARCHAR(16) NOT NULL, worker INT NULL, runs INT NOT NULL",
		indexes: []string{"burst, status, id"}}},
	reset: func(ctx context.Context, t *sqlTarget, s runner.Subject) error {
		n := max(t.p.Attempts, 1)
		rows := make([]string, n)
		args := make([]any, 0, 2*n)
		for i := range rows {
			rows[i] = "(?, ?, 'pending', 0)"
			args = append(args, int64(s.Burst)*int64(n)+int64(i)+1, s.Data)
		}
		return t.db.Exec(ctx, "INSERT INTO "+t.tableName("jobs")+" (id, burst, status, runs) VALUES "+strings.Join(rows, ", "), args...)
	},
	attempts: map[string]sqlAttempt{
		Naive:       takeJob(""),
		SkipLocked:  takeJob(" FOR UPDATE SKIP LOCKED"),
		Conditional: claimJob,
	},
	tally: func(ctx context.Context, t *sqlTarget, s runner.Subject) (tally, error) {
		var runs, taken sql.NullInt64
		err := t.db.Admin(ctx, func(ctx context.Context, q sqldb.Querier) error {
			return q.QueryRow(ctx, t.q("SELECT SUM(runs), SUM(CASE WHEN runs > 0 THEN 1 ELSE 0 END) FROM "+t.tableName("jobs")+" WHERE burst = ?"),
				s.Data).Scan(&runs, &taken)
		})
		// One run per job taken; every queued job must be taken.
		return tally{effects: int(runs.Int64), allowed: int(taken.Int64), required: max(t.p.Attempts, 1)}, err
	},
	note: func(t *sqlTarget) string {
		return fmt.Sprintf("job-queue: %d jobs queued per burst, one per attempt; effects are the job runs, one per job taken is allowed, and every job must be taken", t.p.Attempts)
	},
}

var errQueueEmpty = errDeclined{"no pending job"}

const nextJob = " WHERE burst = ? AND status = 'pending' ORDER BY id LIMIT 1"

// takeJob selects the first pending job (with lock appended) and takes it
// with an unconditional UPDATE, in one transaction.
func takeJob(lock string) sqlAttempt {
	return func(ctx context.Context, s *sqlSession, subj runner.Subject, w *runner.Worker) runner.Outcome {
		t := s.t
		jobs := t.tableName("jobs")
		tx, err := s.begin(ctx)
		if err != nil {
			return outcome(err)
		}
		w.Step(ctx, "check")
		var id int64
		err = tx.QueryRow(ctx, t.q("SELECT id FROM "+jobs+nextJob+lock), subj.Data).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			err = errQueueEmpty
		}
		if err == nil {
			err = scenarios.Sleep(ctx, t.p.Gap)
		}
		if err == nil {
			w.Step(ctx, "act")
			_, _, err = tx.Exec(ctx, t.q("UPDATE "+jobs+" SET status = 'taken', worker = ?, runs = runs + 1 WHERE id = ?"), w.ID, id)
		}
		return outcome(end(ctx, tx, err))
	}
}

// claimJob selects the first pending job and claims it with a conditional
// UPDATE; when another worker claimed it first (0 rows), it tries the next.
func claimJob(ctx context.Context, s *sqlSession, subj runner.Subject, w *runner.Worker) runner.Outcome {
	t := s.t
	jobs := t.tableName("jobs")
	tries := maxTries(t.p)
	for try := 1; ; try++ {
		w.Step(ctx, "check")
		var id int64
		err := s.c.QueryRow(ctx, t.q("SELECT id FROM "+jobs+nextJob), subj.Data).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			err = errQueueEmpty
		}
		if err == nil {
			err = scenarios.Sleep(ctx, t.p.Gap)
		}
		if err != nil {
			return outcome(err)
		}
		w.Step(ctx, "act")
		n, _, err := s.c.Exec(ctx, t.q("UPDATE "+jobs+" SET status = 'taken', worker = ?, runs = runs + 1 WHERE id = ? AND status = 'pending'"), w.ID, id)
		switch {
		case err != nil:
			return outcome(err)
		case n == 1:
			return runner.Done()
		case try == tries:
			return outcome(errDeclined{fmt.Sprintf("another worker claimed the job first on each of %d tries", tries)})
		}
	}
}
