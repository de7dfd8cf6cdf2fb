package mysqlstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/conformance"
	"github.com/racetest/racetest/scenarios/runs"
)

// serverParams returns parameters for the local test server, or skips the
// test (fails it under RACETEST_REQUIRE_SERVERS) when none answers.
func serverParams(t *testing.T) scenarios.Params {
	t.Helper()
	p := scenarios.Params{RunID: scenarios.NewRunID(), Conn: testenv.Conns("mysql")}
	st, err := Open(context.Background(), p)
	if err != nil {
		testenv.Unavailable(t, Name, err)
	}
	st.Close()
	return p
}

func TestConformance(t *testing.T) {
	p := serverParams(t)
	conformance.Run(t, conformance.Suite{Registry: testenv.Registry(Register), Backend: Name, Params: scenarios.Params{Conn: p.Conn}})
}

// On MyISAM every single statement is still atomic (table locks), so the
// catalog's expectations hold; what changes is shown by TestMyISAMIgnoresTransactions.
func TestConformanceMyISAM(t *testing.T) {
	p := serverParams(t)
	conformance.Run(t, conformance.Suite{Registry: testenv.Registry(Register), Backend: Name, Bursts: 10,
		Params: scenarios.Params{Conn: p.Conn, Engine: "myisam"}})
}

// build makes scenario on this backend with p, for a test.
func build(t *testing.T, scenario string, p scenarios.Params) *target {
	t.Helper()
	if p.RunID == "" {
		p.RunID = scenarios.NewRunID()
	}
	tg, err := testenv.Registry(Register).Build(context.Background(), scenario, Name, p)
	if err != nil {
		t.Fatalf("build %s: %v", scenario, err)
	}
	return tg.(*target)
}

func run(t *testing.T, tg runner.Target, attempts, bursts int, opts ...runner.Option) *runner.Result {
	t.Helper()
	res, err := runner.Run(context.Background(), tg, append([]runner.Option{runner.Attempts(attempts), runner.Bursts(bursts)}, opts...)...)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if res.CleanupErr != nil {
		t.Errorf("cleanup: %v", res.CleanupErr)
	}
	return res
}

// runTables lists the tables in the database whose names start with the
// run's prefix: after a run there must be none.
func runTables(t *testing.T, p scenarios.Params) []string {
	t.Helper()
	st, err := Open(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rows, err := st.DB().Query("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME LIKE ?",
		strings.ReplaceAll(p.Prefix(), "_", `\_`)+"%")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	return names
}

// A table racetest did not create, with rows, is identical after a normal
// run and after a run cancelled mid-way, and the runs leave nothing behind.
func TestPreexistingTableUntouched(t *testing.T) {
	p := serverParams(t)
	st, err := Open(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	// Closed in a cleanup registered first, so it runs after the drop below
	// (a deferred Close would run before it and leave the table behind).
	t.Cleanup(func() { st.Close() })
	db := st.DB()
	// Named like a user's table, not with a run prefix, and dropped by the
	// test itself.
	own := "precious_" + scenarios.NewRunID()
	if _, err := db.Exec("CREATE TABLE `" + own + "` (id INT PRIMARY KEY, token VARCHAR(64), status VARCHAR(16)) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := db.Exec("DROP TABLE IF EXISTS `" + own + "`"); err != nil {
			t.Errorf("drop %s: %v", own, err)
		}
	})
	if _, err := db.Exec("INSERT INTO `"+own+"` VALUES (1, ?, 'issued'), (2, 'racetest_x_1', 'redeemed')", p.Prefix()+"0"); err != nil {
		t.Fatal(err)
	}
	snapshot := func() string {
		var table string
		var sum int64
		if err := db.QueryRow("CHECKSUM TABLE `"+own+"`").Scan(&table, &sum); err != nil {
			t.Fatal(err)
		}
		var rows string
		if err := db.QueryRow("SELECT GROUP_CONCAT(CONCAT_WS(':', id, token, status) ORDER BY id) FROM `" + own + "`").Scan(&rows); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%d %s", sum, rows)
	}
	before := snapshot()

	for _, scenario := range []string{scenarios.CheckThenWrite, scenarios.ConditionalUpdate, scenarios.TTLLease} {
		q := p
		q.RunID = scenarios.NewRunID()
		run(t, build(t, scenario, q), 4, 3)
		if left := runTables(t, q); len(left) > 0 {
			t.Errorf("%s: tables left after the run: %v", scenario, left)
		}

		q.RunID = scenarios.NewRunID()
		ctx, cancel := context.WithCancel(context.Background())
		res, err := runner.Run(ctx, build(t, scenario, q), runner.Attempts(4), runner.Bursts(1000),
			runner.OnProgress(func(pr runner.Progress) {
				if pr.Done == 3 {
					cancel()
				}
			}))
		cancel()
		if !errors.Is(err, context.Canceled) || !res.Interrupted {
			t.Errorf("%s: cancelled run returned %v (interrupted %v), want context.Canceled", scenario, err, res.Interrupted)
		}
		if res.CleanupErr != nil {
			t.Errorf("%s: cleanup after cancel: %v", scenario, res.CleanupErr)
		}
		if left := runTables(t, q); len(left) > 0 {
			t.Errorf("%s: tables left after the cancelled run: %v", scenario, left)
		}
	}
	if after := snapshot(); after != before {
		t.Errorf("pre-existing table changed: %q, want %q", after, before)
	}
}

// A table that already carries the run's name was not made by the run: it
// is neither used nor dropped.
func TestExistingTableWithRunNameNotDropped(t *testing.T) {
	p := serverParams(t)
	tg := build(t, scenarios.UniqueInsert, p)
	name := tg.st.Table("unique_insert")
	db := tg.st.DB()
	if _, err := db.Exec("CREATE TABLE `" + name + "` (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	st, err := Open(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	// One cleanup, in order: a deferred Close would run before it and leak the table.
	t.Cleanup(func() {
		st.DB().Exec("DROP TABLE IF EXISTS `" + name + "`")
		st.Close()
	})
	if _, err := db.Exec("INSERT INTO `" + name + "` VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	_, err = runner.Run(context.Background(), tg, runner.Attempts(2), runner.Bursts(1))
	if err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("run over an existing table: err = %v, want 'already exists'", err)
	}
	var n int
	if err := st.DB().QueryRow("SELECT COUNT(*) FROM `" + name + "` WHERE id = 7").Scan(&n); err != nil || n != 1 {
		t.Errorf("the existing table was changed or dropped: count %d, err %v", n, err)
	}
}

// Only the duplicate-key error is "declined": a missing table or a value
// too long for its column is an error, and stays one.
func TestUniqueInsertOtherErrorsAreErrors(t *testing.T) {
	p := serverParams(t)
	for _, tc := range []struct {
		name   string
		inject string // run against the table after Prepare, before the bursts
		number uint16
	}{
		{"dropped table", "DROP TABLE `%s`", sqldb.ErrNoSuchTable},
		{"value too long", "ALTER TABLE `%s` MODIFY token VARCHAR(4) NOT NULL", sqldb.ErrDataTooLong},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := p
			q.RunID = scenarios.NewRunID()
			tg := build(t, scenarios.UniqueInsert, q)
			inject := &injector{target: tg, stmt: tc.inject}
			if tc.number == sqldb.ErrDataTooLong {
				var mode string
				if err := tg.st.DB().QueryRow("SELECT @@SESSION.sql_mode").Scan(&mode); err != nil || !strings.Contains(mode, "STRICT") {
					t.Skipf("sql_mode %q is not strict: the server truncates instead of refusing", mode)
				}
			}
			// A dropped table also makes counting fail, which stops the run;
			// a too-long value does not.
			res, err := runner.Run(context.Background(), inject, runner.Attempts(4), runner.Bursts(2))
			t.Logf("run err: %v", err)
			if out := res.Outcomes(); out[runner.Declined] > 0 || out[runner.Executed] > 0 {
				t.Errorf("outcomes %v: a non-duplicate error was counted as declined or executed", out)
			}
			if res.CleanupErr != nil {
				t.Errorf("cleanup: %v", res.CleanupErr)
			}
			if inject.errors == 0 || inject.declined > 0 || inject.number != tc.number {
				t.Errorf("attempts: %d errors (number %d), %d declined; want all errors with number %d",
					inject.errors, inject.number, inject.declined, tc.number)
			}
		})
	}
}

// injector breaks the target's table after Prepare, and records what the
// attempts of the first burst returned (the run stops when Effects fails).
type injector struct {
	*target
	stmt string

	mu               sync.Mutex
	errors, declined int
	number           uint16
}

func (i *injector) Prepare(ctx context.Context) error {
	if err := i.target.Prepare(ctx); err != nil {
		return err
	}
	_, err := i.st.DB().ExecContext(ctx, fmt.Sprintf(i.stmt, i.table))
	return err
}

func (i *injector) Open(ctx context.Context, replica, workers int) (runner.App, error) {
	a, err := i.target.Open(ctx, replica, workers)
	if err != nil {
		return nil, err
	}
	return recordingApp{a, i}, nil
}

type recordingApp struct {
	runner.App
	i *injector
}

func (a recordingApp) Session(ctx context.Context, worker int) (runner.Session, error) {
	s, err := a.App.Session(ctx, worker)
	if err != nil {
		return nil, err
	}
	return recordingSession{s, a.i}, nil
}

type recordingSession struct {
	runner.Session
	i *injector
}

func (s recordingSession) Attempt(ctx context.Context, subj runner.Subject, w *runner.Worker) runner.Outcome {
	o := s.Session.Attempt(ctx, subj, w)
	s.i.mu.Lock()
	defer s.i.mu.Unlock()
	switch o.Class {
	case runner.Error:
		s.i.errors++
		s.i.number = sqldb.MySQLNumber(o.Err)
	case runner.Declined:
		s.i.declined++
	}
	return o
}

// A second active row for a user is refused; after deactivation a new
// active row is allowed.
func TestActivePerUser(t *testing.T) {
	p := serverParams(t)
	p.Variant = VariantActivePerUser
	tg := build(t, scenarios.UniqueInsert, p)
	ctx := context.Background()
	if err := tg.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	defer tg.Cleanup(ctx)
	db := tg.st.DB()
	insert := func() error {
		_, err := db.Exec("INSERT INTO `" + tg.table + "` (user_id, active, worker) VALUES (42, 1, 0)")
		return err
	}
	if err := insert(); err != nil {
		t.Fatalf("first active row: %v", err)
	}
	if err := insert(); !sqldb.IsDuplicate(err) {
		t.Fatalf("second active row: err = %v, want duplicate key 1062", err)
	}
	if _, err := db.Exec("UPDATE `" + tg.table + "` SET active = 0 WHERE user_id = 42"); err != nil {
		t.Fatal(err)
	}
	if err := insert(); err != nil {
		t.Fatalf("active row after deactivation: %v", err)
	}
	var rows, active int
	if err := db.QueryRow("SELECT COUNT(*), SUM(active) FROM `"+tg.table+"` WHERE user_id = 42").Scan(&rows, &active); err != nil {
		t.Fatal(err)
	}
	if rows != 2 || active != 1 {
		t.Errorf("user 42 has %d rows, %d active; want 2 rows, 1 active", rows, active)
	}
	if notes := strings.Join(tg.Notes(), "\n"); !strings.Contains(notes, tg.st.Server().StoredColumn()) {
		t.Errorf("notes do not say how the key is built: %s", notes)
	}
	// And under concurrent attempts: exactly one active row per burst.
	q := p
	q.RunID = scenarios.NewRunID()
	res := run(t, build(t, scenarios.UniqueInsert, q), 8, 10)
	if res.Violations() > 0 || res.EffectsSummary().Min != 1 {
		t.Errorf("effects %+v, %d violations; want exactly 1 per burst", res.EffectsSummary(), res.Violations())
	}
}

// MyISAM accepts BEGIN and ROLLBACK and ignores them: the report says so,
// and a rolled-back row stays.
func TestMyISAMIgnoresTransactions(t *testing.T) {
	p := serverParams(t)
	p.Engine = "myisam"
	tg := build(t, scenarios.CheckThenWrite, p)
	ctx := context.Background()
	if err := tg.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	defer tg.Cleanup(ctx)
	notes := strings.Join(tg.Notes(), "\n")
	if !strings.Contains(notes, "MyISAM") || !strings.Contains(notes, "silently ignores") {
		t.Errorf("notes do not say the engine ignores transactions:\n%s", notes)
	}
	tx, err := tg.st.DB().Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("INSERT INTO `" + tg.table + "` (token, worker) VALUES ('rolled-back', 0)"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatalf("rollback returned %v; MyISAM is expected to accept it silently", err)
	}
	n, err := tg.count(ctx, "SELECT COUNT(*) FROM `"+tg.table+"` WHERE token = 'rolled-back'")
	if err != nil || n != 1 {
		t.Errorf("after ROLLBACK on MyISAM: %d rows (err %v); db-semantics measured 1 (the row stays)", n, err)
	}

	p.Engine = "innodb"
	p.RunID = scenarios.NewRunID()
	inno := build(t, scenarios.CheckThenWrite, p)
	if err := inno.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	defer inno.Cleanup(ctx)
	if notes := strings.Join(inno.Notes(), "\n"); !strings.Contains(notes, "InnoDB engine") || strings.Contains(notes, "ignores") {
		t.Errorf("InnoDB notes wrong:\n%s", notes)
	}
}

// check-then-write under the isolation levels and variants db-semantics
// measured. A gap makes every attempt check before any writes, so the
// outcome does not depend on how tightly the machine released them.
func TestCheckThenWriteIsolation(t *testing.T) {
	p := serverParams(t)
	p.Gap = 20 * time.Millisecond
	for _, tc := range []struct {
		isolation, variant, engine string
		race                       bool
		level                      string
	}{
		// InnoDB RR: FOR UPDATE on a missing row takes gap locks that
		// conflict only with inserts: one commits, the rest deadlock.
		{"repeatable-read", "for-update", "", false, "REPEATABLE-READ"},
		// SERIALIZABLE turns the plain SELECT into a shared locking read.
		{"serializable", "plain", "", false, "SERIALIZABLE"},
		// READ COMMITTED takes no gap locks: FOR UPDATE protects nothing.
		{"read-committed", "for-update", "", true, "READ-COMMITTED"},
		{"repeatable-read", "plain", "", true, "REPEATABLE-READ"},
		// MyISAM accepts FOR UPDATE and locks nothing across statements.
		{"serializable", "for-update", "myisam", true, "SERIALIZABLE"},
	} {
		name := tc.isolation + "/" + tc.variant
		if tc.engine != "" {
			name += "/" + tc.engine
		}
		t.Run(name, func(t *testing.T) {
			q := p
			q.RunID, q.Isolation, q.Variant, q.Engine = scenarios.NewRunID(), tc.isolation, tc.variant, tc.engine
			tg := build(t, scenarios.CheckThenWrite, q)
			res := run(t, tg, 6, 8)
			out := res.Outcomes()
			t.Logf("effects %+v, violations %d/%d, outcomes %v", res.EffectsSummary(), res.Violations(), len(res.Bursts), out)
			if notes := strings.Join(res.Notes, "\n"); !strings.Contains(notes, tc.level) {
				t.Errorf("notes do not name the level in force %s:\n%s", tc.level, notes)
			}
			if out[runner.Error]+out[runner.Unknown] > 0 {
				t.Errorf("errors: %v", res.Errors)
			}
			if tc.race {
				if res.Violations() == 0 {
					t.Errorf("no burst above one effect; db-semantics measured a race here")
				}
				return
			}
			if res.EffectsSummary().Max > 1 {
				t.Errorf("a burst had %d effects; db-semantics measured at most 1", res.EffectsSummary().Max)
			}
			if out[runner.Conflict] == 0 {
				t.Errorf("no deadlock reported; db-semantics measured the losers failing with 1213")
			}
		})
	}
}

// Every connection, the workers' included, is dialled through Params.Dial.
func TestDialHookUsed(t *testing.T) {
	p := serverParams(t)
	var dials atomic.Int64
	var refuse atomic.Bool
	p.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if refuse.Load() {
			return nil, errors.New("dial refused by the test hook")
		}
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	tg := build(t, scenarios.ConditionalUpdate, p)
	res := run(t, tg, 6, 3, runner.Replicas(2))
	// One admin connection at least, and one per worker.
	if got := dials.Load(); got < 7 {
		t.Errorf("%d dials through the hook for 6 workers and the admin pool, want at least 7", got)
	}
	if res.Violations() > 0 {
		t.Errorf("effects %+v", res.EffectsSummary())
	}

	// With the admin connection open, the hook failing makes the workers'
	// sessions fail: they do not dial on their own.
	p.RunID = scenarios.NewRunID()
	tg = build(t, scenarios.ConditionalUpdate, p)
	refuse.Store(true)
	_, err := runner.Run(context.Background(), tg, runner.Attempts(2), runner.Bursts(1))
	if err == nil || !strings.Contains(err.Error(), "refused by the test hook") {
		t.Errorf("workers did not dial through the hook: run err = %v", err)
	}
	refuse.Store(false)
	if err := tg.Cleanup(context.Background()); err != nil {
		t.Errorf("cleanup: %v", err)
	}
}

// A server that refuses connections beyond a limit gives one line naming
// the limit. The account's limit (1226) shows it without starving other
// clients of the shared server; RACETEST_MYSQL_FILL_CONNECTIONS=1 also
// fills the server's max_connections (1040) for a moment.
func TestTooManyConnections(t *testing.T) {
	p := serverParams(t)
	st, err := Open(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() }) // after the DROP USER below
	cfg, _ := sqldb.MySQLConfig(p.Conn.Get("mysql"))
	user := "racetest_" + p.RunID
	host := "%"
	if _, err := st.DB().Exec(fmt.Sprintf("CREATE USER '%s'@'%s' WITH MAX_USER_CONNECTIONS 3", user, host)); err != nil {
		t.Skipf("cannot create a user with a connection limit here: %v", err)
	}
	t.Cleanup(func() {
		if _, err := st.DB().Exec(fmt.Sprintf("DROP USER '%s'@'%s'", user, host)); err != nil {
			t.Errorf("drop user %s: %v", user, err)
		}
	})
	if _, err := st.DB().Exec(fmt.Sprintf("GRANT ALL ON `%s`.* TO '%s'@'%s'", cfg.DBName, user, host)); err != nil {
		t.Fatal(err)
	}
	q := p
	q.Conn.Set("mysql", fmt.Sprintf("%s@%s(%s)/%s", user, cfg.Net, cfg.Addr, cfg.DBName))
	tg := build(t, scenarios.ConditionalUpdate, q)
	_, err = runner.Run(context.Background(), tg, runner.Attempts(6), runner.Bursts(1))
	var ce *sqldb.ConnectError
	if !errors.As(err, &ce) || sqldb.MySQLNumber(err) != sqldb.ErrUserLimitReached {
		t.Fatalf("err = %v, want a ConnectError for 1226", err)
	}
	msg := ce.Error()
	for _, want := range []string{"too many connections", "MAX_USER_CONNECTIONS", "fewer --attempts"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if left := runTables(t, q); len(left) > 0 {
		t.Errorf("tables left after the refused run: %v", left)
	}

	if os.Getenv("RACETEST_MYSQL_FILL_CONNECTIONS") == "" {
		t.Log("set RACETEST_MYSQL_FILL_CONNECTIONS=1 to also fill @@max_connections (briefly refuses every other client)")
		return
	}
	var limit int
	if err := st.DB().QueryRow("SELECT @@max_connections").Scan(&limit); err != nil {
		t.Fatal(err)
	}
	q = p
	q.RunID = scenarios.NewRunID()
	q.Attempts = limit + 10
	tg = build(t, scenarios.ConditionalUpdate, q)
	_, err = runner.Run(context.Background(), tg, runner.Attempts(q.Attempts), runner.Bursts(1))
	if !errors.As(err, &ce) || sqldb.MySQLNumber(err) != sqldb.ErrConCount {
		t.Fatalf("err = %v, want a ConnectError for 1040", err)
	}
	if !strings.Contains(ce.Error(), fmt.Sprintf("@@max_connections = %d", limit)) {
		t.Errorf("message does not name the limit %d: %s", limit, ce.Error())
	}
	t.Logf("1040: %s", ce.Error())
}

// Unreachable, wrong password, unknown database: one clear line within
// seconds, never the password.
func TestConnectFailures(t *testing.T) {
	p := serverParams(t)
	cfg, _ := sqldb.MySQLConfig(p.Conn.Get("mysql"))
	silent, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never speaks
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedAddr := closed.Addr().String()
	closed.Close()

	for _, tc := range []struct {
		name, conn string
		want       string
	}{
		{"refused", "root:" + secret + "@tcp(" + closedAddr + ")/test", "cannot connect to " + closedAddr + " (connection refused)"},
		{"refused url", "mysql://root:" + secret + "@" + closedAddr + "/test", "is the server running?"},
		{"silent", "root:" + secret + "@tcp(" + silent.Addr().String() + ")/test?timeout=1s", "cannot connect to " + silent.Addr().String()},
		{"wrong password", fmt.Sprintf("%s:%s@tcp(%s)/%s", cfg.User, secret, cfg.Addr, cfg.DBName), "wrong user or password"},
		{"unknown database", fmt.Sprintf("%s@tcp(%s)/racetest_nodb_%s", cfg.User, cfg.Addr, p.RunID), "does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := p
			q.Conn.Set("mysql", tc.conn)
			start := time.Now()
			_, err := testenv.Registry(Register).Build(context.Background(), scenarios.ConditionalUpdate, Name, q)
			took := time.Since(start)
			if err == nil {
				t.Fatal("connected")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) || strings.Contains(msg, secret) || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line containing %q and no password", msg, tc.want)
			}
			if took > connectTimeout+2*time.Second {
				t.Errorf("took %s to fail", took)
			}
			t.Logf("%s in %s", msg, took.Round(time.Millisecond))
		})
	}
}

// A server that goes away mid-run (every connection cut, new ones refused)
// stops the run with an error within seconds, keeps the bursts that
// finished, and names the tables it could not drop.
func TestServerGoneMidRun(t *testing.T) {
	p := serverParams(t)
	var mu sync.Mutex
	var conns []net.Conn
	gone := false
	p.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		defer mu.Unlock()
		if gone {
			return nil, &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err == nil {
			conns = append(conns, c)
		}
		return c, err
	}
	tg := build(t, scenarios.CheckThenWrite, p)
	t.Cleanup(func() {
		st, err := Open(context.Background(), scenarios.Params{RunID: p.RunID, Conn: p.Conn})
		if err != nil {
			t.Error(err)
			return
		}
		defer st.Close()
		// The server "went away" before the run's cleanup: drop by hand
		// what 'racetest clean' would, the table and the run's registration.
		if _, err := st.DB().Exec("DROP TABLE IF EXISTS `" + st.Table("check_then_write") + "`"); err != nil {
			t.Error(err)
		}
		if err := runs.UnregisterSQL(context.Background(), runs.MySQL, runs.Std(st.DB()), p.RunID); err != nil {
			t.Error(err)
		}
	})
	start := time.Now()
	res, err := runner.Run(context.Background(), tg, runner.Attempts(4), runner.Bursts(100),
		runner.OnProgress(func(pr runner.Progress) {
			if pr.Done == 3 {
				mu.Lock()
				gone = true
				for _, c := range conns {
					c.Close()
				}
				mu.Unlock()
			}
		}))
	took := time.Since(start)
	t.Logf("after %s: err %v; cleanup: %v", took.Round(time.Millisecond), err, res.CleanupErr)
	if err == nil {
		t.Fatal("the run went on without its server")
	}
	if len(res.Bursts) < 3 {
		t.Errorf("kept %d bursts, want the 3 that finished", len(res.Bursts))
	}
	if took > 20*time.Second {
		t.Errorf("took %s to notice", took)
	}
	if res.CleanupErr == nil || !strings.Contains(res.CleanupErr.Error(), tg.st.Table("check_then_write")) {
		t.Errorf("cleanup error does not name the table left behind: %v", res.CleanupErr)
	}
}

// After a Ctrl-C the admin pool's connections can be broken, and the next
// few dials can meet a server still tearing the interrupted sessions down:
// database/sql's own retries then end in "driver: bad connection", and the
// table stayed. The cleanup goes again on a pool of its own, and drops it.
func TestCleanupAfterBrokenConnections(t *testing.T) {
	p := serverParams(t)
	var mu sync.Mutex
	var conns []net.Conn
	var broken atomic.Int32 // the next dials whose connection is cut at once
	p.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if broken.Add(-1) >= 0 {
			c.Close()
			return c, nil
		}
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		return c, nil
	}
	tg := build(t, scenarios.CheckThenWrite, p)
	t.Cleanup(func() {
		st, err := Open(context.Background(), scenarios.Params{RunID: p.RunID, Conn: p.Conn})
		if err != nil {
			t.Error(err)
			return
		}
		defer st.Close()
		if _, err := st.DB().Exec("DROP TABLE IF EXISTS `" + st.Table("check_then_write") + "`"); err != nil {
			t.Error(err)
		}
		if err := runs.UnregisterSQL(context.Background(), runs.MySQL, runs.Std(st.DB()), p.RunID); err != nil {
			t.Error(err)
		}
	})
	if err := tg.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := runTables(t, p); len(got) == 0 {
		t.Fatal("Prepare made no table")
	}
	mu.Lock()
	for _, c := range conns {
		c.Close()
	}
	mu.Unlock()
	broken.Store(3)
	if err := tg.Cleanup(context.Background()); err != nil {
		t.Errorf("cleanup: %v", err)
	}
	if got := runTables(t, p); len(got) > 0 {
		t.Errorf("tables left after the cleanup: %v", got)
	}
}
