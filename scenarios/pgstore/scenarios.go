package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// Variants the scenarios accept (besides "", the first of each list).
const (
	VariantPlain     = "plain"
	VariantForUpdate = "for-update"
	// VariantOneActive is unique-insert as "one active sanction per user":
	// a partial unique index (WHERE active) decides, and a deactivated row
	// of the same user must not get in the way.
	VariantOneActive = "one-active"
)

// scenario is one core scenario's statements on PostgreSQL.
type scenario struct {
	name     string
	variants []string
	tables   func(n names, p scenarios.Params) []table
	reset    func(ctx context.Context, t *target, c *pgx.Conn, s runner.Subject) error
	attempt  func(ctx context.Context, s *session, subj runner.Subject, w *runner.Worker) runner.Outcome
	effects  func(ctx context.Context, t *target, c *pgx.Conn, s runner.Subject) (int64, error)
	note     func(t *target) string
}

// table is one table the run creates, with its indexes.
type table struct {
	name string
	ddl  []string
}

func (sc scenario) accepts(v string) bool { return v == "" || slices.Contains(sc.variants, v) }

func catalog() []scenario {
	return []scenario{
		{
			name:    scenarios.MemorySet,
			tables:  effectsTable,
			attempt: memorySet,
			effects: countEffects,
		},
		{
			name:     scenarios.CheckThenWrite,
			variants: []string{VariantPlain, VariantForUpdate, scenarios.VariantForShare, scenarios.VariantAdvisoryLock},
			tables:   effectsTable,
			attempt:  checkThenWrite,
			effects:  countEffects,
			note: func(t *target) string {
				switch t.p.Variant {
				case VariantForUpdate:
					return "postgres: the check is SELECT ... FOR UPDATE, which locks nothing while the row does not exist yet"
				case scenarios.VariantForShare:
					return "postgres: the check is SELECT ... FOR SHARE, which locks nothing while the row does not exist yet"
				case scenarios.VariantAdvisoryLock:
					return "postgres: each transaction first takes pg_advisory_xact_lock(hashtextextended(<token>, 0)), held until COMMIT"
				}
				return ""
			},
		},
		{
			name:    scenarios.ConditionalUpdate,
			tables:  couponsTable,
			reset:   issueCoupon,
			attempt: redeemCoupon,
			effects: countRedemptions,
		},
		{
			name:     scenarios.UniqueInsert,
			variants: []string{VariantOneActive},
			tables:   uniqueTables,
			reset:    liftedSanction,
			attempt:  uniqueInsert,
			effects:  countUnique,
			note: func(t *target) string {
				if t.p.Variant == VariantOneActive {
					return "postgres: one active sanction per user: a partial unique index (WHERE active); each user starts with one deactivated sanction, which must not block"
				}
				return ""
			},
		},
		{
			name:    scenarios.TTLLease,
			tables:  leaseTables,
			reset:   freeLease,
			attempt: takeLease,
			effects: mostHolders,
			note: func(t *target) string {
				return fmt.Sprintf("postgres: lease expiry by the server's clock (clock_timestamp()), TTL %s", t.p.TTL)
			},
		},
	}
}

var (
	errAlready     = errors.New("already done")
	errNotIssued   = errors.New("no coupon in status issued: already redeemed")
	errLeaseHeld   = errors.New("lease held by another worker")
	errMemoryTaken = errors.New("already processing in this replica")
)

func sleep(ctx context.Context, d time.Duration) error { return scenarios.Sleep(ctx, d) }

// --- memory-set and check-then-write: rows in an effects table ---

func effectsTable(n names, _ scenarios.Params) []table {
	return []table{{name: n.effects, ddl: []string{
		// k is indexed but not unique: nothing in the store stops a second write.
		"CREATE TABLE " + n.effects + ` (id bigserial PRIMARY KEY, k text NOT NULL, worker int NOT NULL,
			replica int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`,
		"CREATE INDEX " + n.index("effects_k") + " ON " + n.effects + " (k)",
	}}}
}

func recordEffect(ctx context.Context, s *session, subj runner.Subject, w *runner.Worker) error {
	_, err := s.c.Exec(ctx, "INSERT INTO "+s.t.n.effects+" (k, worker, replica) VALUES ($1::text, $2::int, $3::int)",
		subj.Key, w.ID, w.Replica)
	return err
}

func countEffects(ctx context.Context, t *target, c *pgx.Conn, s runner.Subject) (n int64, err error) {
	err = c.QueryRow(ctx, "SELECT count(*) FROM "+t.n.effects+" WHERE k = $1::text", s.Key).Scan(&n)
	return n, err
}

// memorySet: the processing set lives in the replica's memory, correctly
// locked; the guarded action then writes its effect to the database.
func memorySet(ctx context.Context, s *session, subj runner.Subject, w *runner.Worker) runner.Outcome {
	a := s.a
	w.Step(ctx, "check")
	if !a.memory.Claim(subj.Key) {
		return runner.Refused(errMemoryTaken)
	}
	if err := sleep(ctx, s.t.p.Gap); err != nil {
		return runner.Failed(err)
	}
	w.Step(ctx, "act")
	if err := recordEffect(ctx, s, subj, w); err != nil {
		return sqldb.Classify(fmt.Errorf("insert effect: %w", err))
	}
	return runner.Done()
}

// checkThenWrite: in one transaction, read whether the subject is done, and
// if not, write. BEGIN and the SELECT go out in one write (a pipelined
// batch), so the attempt's first step is a single request on the wire and
// the snapshot starts at the read, not at a separate BEGIN round trip.
func checkThenWrite(ctx context.Context, s *session, subj runner.Subject, w *runner.Worker) runner.Outcome {
	check := "SELECT id FROM " + s.t.n.effects + " WHERE k = $1::text LIMIT 1"
	switch s.t.p.Variant {
	case VariantForUpdate:
		check += " FOR UPDATE"
	case scenarios.VariantForShare:
		check += " FOR SHARE"
	}
	b := &pgx.Batch{}
	b.Queue(s.t.begin)
	if s.t.p.Variant == scenarios.VariantAdvisoryLock {
		// The lock is the transaction's first statement: under repeatable
		// read its snapshot is taken as it starts, before the wait.
		b.Queue("SELECT pg_advisory_xact_lock(hashtextextended($1::text, 0))", subj.Key)
	}
	b.Queue(check, subj.Key)
	w.Step(ctx, "check")
	br := s.c.SendBatch(ctx, b)
	_, err := br.Exec()
	if err == nil && s.t.p.Variant == scenarios.VariantAdvisoryLock {
		_, err = br.Exec()
	}
	found := false
	if err == nil {
		var id int64
		err = br.QueryRow().Scan(&id)
		found = err == nil
		if errors.Is(err, pgx.ErrNoRows) {
			err = nil
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		s.rollback(ctx)
		return sqldb.Classify(fmt.Errorf("check: %w", err))
	}
	if found {
		s.rollback(ctx)
		return runner.Refused(errAlready)
	}
	if err := sleep(ctx, s.t.p.Gap); err != nil {
		s.rollback(ctx)
		return runner.Failed(err)
	}
	w.Step(ctx, "act")
	if err := recordEffect(ctx, s, subj, w); err != nil {
		s.rollback(ctx)
		return sqldb.Classify(fmt.Errorf("insert effect: %w", err))
	}
	return s.commit(ctx)
}

// --- conditional-update: one UPDATE ... WHERE status='issued' ---

func couponsTable(n names, _ scenarios.Params) []table {
	return []table{{name: n.coupons, ddl: []string{
		"CREATE TABLE " + n.coupons + ` (id bigint PRIMARY KEY, status text NOT NULL, redeemed_by int,
			redemptions int NOT NULL DEFAULT 0)`,
	}}}
}

func issueCoupon(ctx context.Context, t *target, c *pgx.Conn, s runner.Subject) error {
	_, err := c.Exec(ctx, "INSERT INTO "+t.n.coupons+" (id, status) VALUES ($1::bigint, 'issued')", s.Burst)
	return err
}

// redeemCoupon is the compare-and-set. The same statement counts the
// redemption in the row, so the effect is written by the guarded action.
func redeemCoupon(ctx context.Context, s *session, subj runner.Subject, w *runner.Worker) runner.Outcome {
	w.Step(ctx, "act")
	var id int64
	err := s.c.QueryRow(ctx, "UPDATE "+s.t.n.coupons+` SET status = 'redeemed', redeemed_by = $2::int,
		redemptions = redemptions + 1 WHERE id = $1::bigint AND status = 'issued' RETURNING id`, subj.Burst, w.ID).Scan(&id)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return runner.Refused(errNotIssued)
	case err != nil:
		return sqldb.Classify(fmt.Errorf("redeem: %w", err))
	}
	return runner.Done()
}

func countRedemptions(ctx context.Context, t *target, c *pgx.Conn, s runner.Subject) (n int64, err error) {
	err = c.QueryRow(ctx, "SELECT redemptions FROM "+t.n.coupons+" WHERE id = $1::bigint", s.Burst).Scan(&n)
	return n, err
}

// --- unique-insert: INSERT and let the constraint refuse ---

func uniqueTables(n names, p scenarios.Params) []table {
	if p.Variant == VariantOneActive {
		return []table{{name: n.sanctions, ddl: []string{
			"CREATE TABLE " + n.sanctions + ` (id bigserial PRIMARY KEY, user_id bigint NOT NULL,
				active boolean NOT NULL, worker int)`,
			"CREATE UNIQUE INDEX " + n.index("sanctions_one_active") + " ON " + n.sanctions + " (user_id) WHERE active",
		}}}
	}
	return []table{{name: n.saves, ddl: []string{
		"CREATE TABLE " + n.saves + " (token text PRIMARY KEY, worker int NOT NULL, replica int NOT NULL)",
	}}}
}

// liftedSanction gives the one-active variant's user a deactivated
// sanction: the partial index must let the burst's new one in regardless.
func liftedSanction(ctx context.Context, t *target, c *pgx.Conn, s runner.Subject) error {
	if t.p.Variant != VariantOneActive {
		return nil
	}
	_, err := c.Exec(ctx, "INSERT INTO "+t.n.sanctions+" (user_id, active) VALUES ($1::bigint, false)", s.Burst)
	return err
}

func uniqueInsert(ctx context.Context, s *session, subj runner.Subject, w *runner.Worker) runner.Outcome {
	w.Step(ctx, "act")
	var err error
	if s.t.p.Variant == VariantOneActive {
		_, err = s.c.Exec(ctx, "INSERT INTO "+s.t.n.sanctions+" (user_id, active, worker) VALUES ($1::bigint, true, $2::int)",
			subj.Burst, w.ID)
	} else {
		_, err = s.c.Exec(ctx, "INSERT INTO "+s.t.n.saves+" (token, worker, replica) VALUES ($1::text, $2::int, $3::int)",
			subj.Key, w.ID, w.Replica)
	}
	switch {
	case err == nil:
		return runner.Done()
	case sqldb.IsDuplicate(err):
		// Only the unique violation means "already done".
		return runner.Refused(err)
	}
	return sqldb.Classify(fmt.Errorf("insert: %w", err))
}

func countUnique(ctx context.Context, t *target, c *pgx.Conn, s runner.Subject) (n int64, err error) {
	if t.p.Variant == VariantOneActive {
		err = c.QueryRow(ctx, "SELECT count(*) FROM "+t.n.sanctions+" WHERE user_id = $1::bigint AND active", s.Burst).Scan(&n)
	} else {
		err = c.QueryRow(ctx, "SELECT count(*) FROM "+t.n.saves+" WHERE token = $1::text", s.Key).Scan(&n)
	}
	return n, err
}

// --- ttl-lease: UPDATE ... WHERE lock_until < clock_timestamp() ---

func leaseTables(n names, _ scenarios.Params) []table {
	return []table{
		{name: n.locks, ddl: []string{
			"CREATE TABLE " + n.locks + ` (name text PRIMARY KEY, owner text, lock_until timestamptz NOT NULL,
				fence bigint NOT NULL DEFAULT 0)`,
		}},
		{name: n.grants, ddl: []string{
			"CREATE TABLE " + n.grants + ` (id bigserial PRIMARY KEY, name text NOT NULL, owner text NOT NULL,
				fence bigint NOT NULL, granted_at timestamptz NOT NULL, lock_until timestamptz NOT NULL)`,
			"CREATE INDEX " + n.index("grants_name") + " ON " + n.grants + " (name)",
		}},
	}
}

func freeLease(ctx context.Context, t *target, c *pgx.Conn, s runner.Subject) error {
	_, err := c.Exec(ctx, "INSERT INTO "+t.n.locks+" (name, lock_until) VALUES ($1::text, '-infinity')", s.Key)
	return err
}

// grant is one lease grant as the server recorded it.
type grant struct {
	fence       int64
	from, until time.Time
}

// acquire takes lease name for owner if it is free or expired by the
// server's clock. The grant is recorded by the same statement (a
// data-modifying CTE), so a grant and its record cannot come apart.
// clock_timestamp(), not now(): now() is the transaction's start.
func acquire(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, n names, name, owner string, ttl time.Duration) (g grant, ok bool, err error) {
	err = q.QueryRow(ctx, `WITH taken AS (
		UPDATE `+n.locks+` SET owner = $1::text, lock_until = clock_timestamp() + $2::interval, fence = fence + 1
		WHERE name = $3::text AND lock_until < clock_timestamp()
		RETURNING name, owner, fence, lock_until)
	INSERT INTO `+n.grants+` (name, owner, fence, granted_at, lock_until)
	SELECT name, owner, fence, lock_until - $2::interval, lock_until FROM taken
	RETURNING fence, granted_at, lock_until`,
		owner, fmt.Sprintf("%d microseconds", ttl.Microseconds()), name).Scan(&g.fence, &g.from, &g.until)
	if errors.Is(err, pgx.ErrNoRows) {
		return g, false, nil
	}
	return g, err == nil, err
}

func takeLease(ctx context.Context, s *session, subj runner.Subject, w *runner.Worker) runner.Outcome {
	w.Step(ctx, "act")
	owner := fmt.Sprintf("r%dw%d", w.Replica, w.ID)
	_, ok, err := acquire(ctx, s.c, s.t.n, subj.Key, owner, s.t.p.TTL)
	switch {
	case err != nil:
		return sqldb.Classify(fmt.Errorf("take lease: %w", err))
	case !ok:
		return runner.Refused(errLeaseHeld)
	}
	return runner.Done()
}

// mostHolders is the most grants of the subject's lease that were valid at
// one instant, by the server's timestamps: more than one is two holders.
func mostHolders(ctx context.Context, t *target, c *pgx.Conn, s runner.Subject) (n int64, err error) {
	err = c.QueryRow(ctx, `SELECT coalesce(max(held), 0) FROM (
		SELECT (SELECT count(*) FROM `+t.n.grants+` h
			WHERE h.name = g.name AND h.granted_at <= g.granted_at AND h.lock_until > g.granted_at) AS held
		FROM `+t.n.grants+` g WHERE g.name = $1::text) x`, s.Key).Scan(&n)
	return n, err
}
