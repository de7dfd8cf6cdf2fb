package pgstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// snapshot is a table's definition and contents, compared byte for byte.
func snapshot(t *testing.T, c *pgx.Conn, table string) string {
	t.Helper()
	var cols, idx, rows string
	ctx := context.Background()
	err := c.QueryRow(ctx, `SELECT
		(SELECT string_agg(column_name || ' ' || data_type, ', ' ORDER BY ordinal_position) FROM information_schema.columns WHERE table_name = $1::text),
		(SELECT coalesce(string_agg(indexdef, '; ' ORDER BY indexname), '') FROM pg_indexes WHERE tablename = $1::text)`, table).Scan(&cols, &idx)
	if err != nil {
		t.Fatalf("describe %s: %v", table, err)
	}
	q := "SELECT coalesce(string_agg(x::text, E'\\n' ORDER BY id), '') FROM " + pgx.Identifier{table}.Sanitize() + " x"
	if err := c.QueryRow(ctx, q).Scan(&rows); err != nil {
		t.Fatalf("read %s: %v", table, err)
	}
	return cols + "\n" + idx + "\n" + rows
}

// A run touches only what it made: tables that racetest did not create —
// one with a name of its own, one that looks like another run's — keep
// their definition and rows through normal runs of every scenario and
// through a run cancelled mid-burst.
func TestPreexistingTablesUntouched(t *testing.T) {
	p := serverParams(t)
	c := rawConn(t)
	ctx := context.Background()
	keep := []string{"pgstore_keep_" + p.RunID, "racetest_" + scenarios.NewRunID() + "_effects"}
	for _, name := range keep {
		q := pgx.Identifier{name}.Sanitize()
		if _, err := c.Exec(ctx, "CREATE TABLE "+q+" (id int PRIMARY KEY, k text NOT NULL, worker int, note text);"+
			"CREATE INDEX ON "+q+" (k);"+
			"INSERT INTO "+q+" VALUES (1, 'racetest_x_0', 0, 'user data'), (2, 'b', NULL, 'é ünïcode'), (3, '', 7, NULL)"); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		t.Cleanup(func() { _, _ = c.Exec(context.Background(), "DROP TABLE IF EXISTS "+q) })
	}
	before := map[string]string{}
	for _, name := range keep {
		before[name] = snapshot(t, c, name)
	}

	for _, sc := range catalog() {
		q := p
		q.RunID = scenarios.NewRunID()
		tg := build(t, sc.name, q)
		run(t, ctx, tg, 4, 5)
		if n := leftovers(t, c, q.Prefix()); n != 0 {
			t.Errorf("%s: %d relations named %s* left after the run", sc.name, n, q.Prefix())
		}
	}

	// Cancelled mid-run: the gap keeps a burst in flight most of the time.
	q := p
	q.RunID = scenarios.NewRunID()
	q.Gap = 10 * time.Millisecond
	tg := build(t, scenarios.CheckThenWrite, q)
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(150*time.Millisecond, cancel)
	res, err := runner.Run(cctx, tg, runner.Attempts(4), runner.Bursts(100000))
	if !errors.Is(err, context.Canceled) || !res.Interrupted {
		t.Fatalf("cancelled run: err %v, interrupted %v; want context.Canceled", err, res.Interrupted)
	}
	if res.CleanupErr != nil {
		t.Fatalf("cleanup after cancel: %v", res.CleanupErr)
	}
	if n := leftovers(t, c, q.Prefix()); n != 0 {
		t.Errorf("cancelled run: %d relations named %s* left", n, q.Prefix())
	}
	t.Logf("cancelled after %d bursts", len(res.Bursts))

	for _, name := range keep {
		if after := snapshot(t, c, name); after != before[name] {
			t.Errorf("table %s changed:\nbefore:\n%s\nafter:\n%s", name, before[name], after)
		}
	}
}

// evenWorkersOnly is unique-insert with a second constraint added after
// Prepare: odd workers' inserts fail with a check violation (23514), a
// real server error that is not the duplicate key.
type evenWorkersOnly struct {
	*target
	c *pgx.Conn
}

func (e evenWorkersOnly) Prepare(ctx context.Context) error {
	if err := e.target.Prepare(ctx); err != nil {
		return err
	}
	_, err := e.c.Exec(ctx, "ALTER TABLE "+e.n.saves+" ADD CONSTRAINT "+e.n.index("even_workers")+" CHECK (worker % 2 = 0)")
	return err
}

// Only the duplicate-key error (23505) counts as declined; any other
// error the insert meets is counted as an error, never as "already done".
func TestUniqueInsertCountsOtherErrorsAsErrors(t *testing.T) {
	p := serverParams(t)
	c := rawConn(t)
	tg := evenWorkersOnly{build(t, scenarios.UniqueInsert, p), c}
	const n = 8
	res := run(t, context.Background(), tg, n, 10)
	for _, b := range res.Bursts {
		o := b.Outcomes
		if o[runner.Error] != n/2 || o[runner.Executed] != 1 || o[runner.Declined] != n/2-1 || b.Effects != 1 {
			t.Errorf("burst %d: outcomes %v, effects %d; want %d errors (odd workers), 1 executed, %d declined, 1 effect",
				b.Index, o, b.Effects, n/2, n/2-1)
		}
	}
	found := false
	for msg := range res.Errors {
		found = found || strings.Contains(msg, "23514")
	}
	if !found {
		t.Errorf("no check-violation (23514) among the errors: %v", res.Errors)
	}
}

// Under SERIALIZABLE, check-then-write lets one attempt through and the
// others fail with 40001 (at the read, the insert or the commit). Only
// commits count as executed, so executed equals the effects in the store.
func TestSerializableCheckThenWrite(t *testing.T) {
	p := serverParams(t)
	p.Isolation = "serializable"
	tg := build(t, scenarios.CheckThenWrite, p)
	res := run(t, context.Background(), tg, 8, 20)
	conflicts := 0
	for _, b := range res.Bursts {
		if b.Effects > 1 {
			t.Errorf("burst %d: %d effects under SERIALIZABLE, want at most 1 (outcomes %v)", b.Index, b.Effects, b.Outcomes)
		}
		if b.Outcomes[runner.Executed] != b.Effects {
			t.Errorf("burst %d: %d attempts executed but %d effects in the store", b.Index, b.Outcomes[runner.Executed], b.Effects)
		}
		conflicts += b.Outcomes[runner.Conflict]
	}
	out := res.Outcomes()
	if out[runner.Error]+out[runner.Unknown] > 0 {
		t.Errorf("errors: %v", res.Errors)
	}
	if conflicts == 0 {
		t.Errorf("no serialization failure in %d bursts of 8 (outcomes %v, overlap %+v)", len(res.Bursts), out, res.OverlapSummary())
	}
	if notes := strings.Join(tg.Notes(), "\n"); !strings.Contains(notes, "isolation serializable") {
		t.Errorf("notes do not name the isolation in force: %q", notes)
	}
	t.Logf("effects %+v, outcomes %v, conflicts by step %v", res.EffectsSummary(), out, res.Errors)
}

// FOR UPDATE on a row that does not exist yet locks nothing in PostgreSQL:
// under READ COMMITTED the race stays.
func TestForUpdateOnMissingRowStillRaces(t *testing.T) {
	p := serverParams(t)
	p.Variant = VariantForUpdate
	p.Isolation = "read-committed"
	p.Gap = 5 * time.Millisecond
	res := run(t, context.Background(), build(t, scenarios.CheckThenWrite, p), 4, 10)
	if res.Violations() == 0 {
		t.Errorf("no burst over 1 effect with FOR UPDATE on a missing row: effects %+v", res.EffectsSummary())
	}
}

// One active sanction per user: a second active row is refused with the
// duplicate key, and after deactivation a new one is allowed.
func TestOneActivePerUser(t *testing.T) {
	p := serverParams(t)
	p.Variant = VariantOneActive
	tg := build(t, scenarios.UniqueInsert, p)
	ctx := context.Background()
	if err := tg.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tg.Cleanup(context.Background()) })
	app, _ := tg.Open(ctx, 0, 1)
	sess, err := app.Session(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	subj := runner.Subject{Burst: 42, Key: p.Prefix() + "42"}
	w := &runner.Worker{ID: 0}
	if o := sess.Attempt(ctx, subj, w); o.Class != runner.Executed {
		t.Fatalf("first active sanction: %s (%v), want executed", o.Class, o.Err)
	}
	o := sess.Attempt(ctx, subj, w)
	if o.Class != runner.Declined || !sqldb.IsDuplicate(o.Err) {
		t.Fatalf("second active sanction: %s (%v), want declined by 23505", o.Class, o.Err)
	}
	c := rawConn(t)
	if _, err := c.Exec(ctx, "UPDATE "+tg.n.sanctions+" SET active = false WHERE user_id = 42"); err != nil {
		t.Fatal(err)
	}
	if o := sess.Attempt(ctx, subj, w); o.Class != runner.Executed {
		t.Fatalf("active sanction after deactivation: %s (%v), want executed", o.Class, o.Err)
	}
	var active, all int
	if err := c.QueryRow(ctx, "SELECT count(*) FILTER (WHERE active)::int, count(*)::int FROM "+tg.n.sanctions+" WHERE user_id = 42").Scan(&active, &all); err != nil {
		t.Fatal(err)
	}
	if active != 1 || all != 2 {
		t.Errorf("user 42 has %d active of %d sanctions, want 1 of 2", active, all)
	}
}

// The variant under a burst: each user starts with a deactivated sanction,
// and exactly one new active sanction gets in.
func TestOneActiveBurst(t *testing.T) {
	p := serverParams(t)
	p.Variant = VariantOneActive
	res := run(t, context.Background(), build(t, scenarios.UniqueInsert, p), 8, 10)
	for _, b := range res.Bursts {
		if b.Effects != 1 || b.Outcomes[runner.Executed] != 1 || b.Outcomes[runner.Declined] != 7 {
			t.Errorf("burst %d: %d active sanctions, outcomes %v; want 1 and 7 declined", b.Index, b.Effects, b.Outcomes)
		}
	}
}

func TestServerAndIsolationNamed(t *testing.T) {
	p := serverParams(t)
	tg := build(t, scenarios.ConditionalUpdate, p)
	if !strings.HasPrefix(tg.Server(), "PostgreSQL 1") || strings.Contains(tg.Server(), "(") {
		t.Errorf("Server() = %q, want like \"PostgreSQL 15.20\"", tg.Server())
	}
	if tg.level == "" || !strings.Contains(tg.Notes()[0], tg.level) {
		t.Errorf("notes %q do not name the isolation in force %q", tg.Notes(), tg.level)
	}
	for _, iso := range []string{"read-committed", "repeatable-read"} {
		p.Isolation = iso
		if got, want := build(t, scenarios.ConditionalUpdate, p).level, strings.ReplaceAll(iso, "-", " "); got != want {
			t.Errorf("--isolation %s: the server reports %q", iso, got)
		}
	}
	p.Isolation = "read-uncommitted"
	if tg := build(t, scenarios.ConditionalUpdate, p); tg.level != "read uncommitted" || !strings.Contains(strings.Join(tg.Notes(), "\n"), "behaves as READ COMMITTED") {
		t.Errorf("read-uncommitted: level %q, notes %q", tg.level, tg.Notes())
	}
	p.Isolation = "snapshot"
	if _, err := factory(scenarioNamed(t, scenarios.ConditionalUpdate))(context.Background(), p); err == nil || !strings.Contains(err.Error(), "serializable") {
		t.Errorf("unknown isolation: %v, want an error listing the levels", err)
	}
	p.Isolation = ""
	p.Variant = "fenced"
	if _, err := factory(scenarioNamed(t, scenarios.CheckThenWrite))(context.Background(), p); err == nil || !strings.Contains(err.Error(), "for-update") {
		t.Errorf("unknown variant: %v, want an error listing the variants", err)
	}
}

// An attempt that outlives its deadline (here: blocked behind a row lock)
// is "unknown"; pgx gives up its connection, and the worker's next attempt
// dials again instead of failing or running inside a stale transaction.
func TestTimedOutAttemptReconnects(t *testing.T) {
	p := serverParams(t)
	tg := build(t, scenarios.ConditionalUpdate, p)
	ctx := context.Background()
	if err := tg.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tg.Cleanup(context.Background()) })
	subj, err := tg.Reset(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	app, _ := tg.Open(ctx, 0, 1)
	sess, err := app.Session(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()

	locker := rawConn(t)
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+tg.n.coupons+" WHERE id = 0 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	o := sess.Attempt(actx, subj, &runner.Worker{})
	cancel()
	if o.Class != runner.Unknown {
		t.Errorf("attempt blocked past its deadline: %s (%v), want unknown", o.Class, o.Err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// The timed-out UPDATE may still run once the lock is gone: the server
	// notices the closed socket only after the statement. That is why a
	// timeout is "unknown", and why effects are counted in the store.
	next := sess.Attempt(ctx, subj, &runner.Worker{})
	if next.Class != runner.Executed && next.Class != runner.Declined {
		t.Errorf("next attempt: %s (%v), want executed or declined on a fresh connection", next.Class, next.Err)
	}
	if n, err := tg.Effects(ctx, subj); err != nil || n != 1 {
		t.Errorf("effects %d (%v), want 1", n, err)
	}
	t.Logf("next attempt %s: the timed-out one %s", next.Class, map[bool]string{true: "did not run", false: "ran on the server after its client gave up"}[next.Class == runner.Executed])
}
