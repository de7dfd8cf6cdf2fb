package httpfire

import (
	"context"
	"errors"
	"slices"
	"testing"
	"text/template"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/proxy"
	"github.com/racetest/racetest/scenarios"
)

// InnoDB's report counts a wait only for a transaction in LOCK WAIT for a
// lock on a checked table of the connection's database.
func TestInnoDBWaitsOn(t *testing.T) {
	waiting := func(db, table string) string {
		return "---TRANSACTION 421, ACTIVE 1 sec starting index read\nmysql tables in use 1, locked 1\nLOCK WAIT 2 lock struct(s), heap size 1128, 1 row lock(s)\nMariaDB thread id 42, OS thread handle 1, query id 9 localhost root Sending data\n------- TRX HAS BEEN WAITING 1 SEC FOR THIS LOCK TO BE GRANTED:\nRECORD LOCKS space id 5 page no 3 n bits 8 index PRIMARY of table `" + db + "`.`" + table + "` trx id 421 lock_mode X locks rec but not gap waiting\n"
	}
	running := "---TRANSACTION 420, ACTIVE 2 sec\n2 lock struct(s), heap size 1128, 1 row lock(s)\nMariaDB thread id 41, OS thread handle 2, query id 8 localhost root\nRECORD LOCKS space id 5 page no 3 n bits 8 index PRIMARY of table `test`.`acct` trx id 420 lock_mode X locks rec but not gap\n"
	head := "=====================================\nTRANSACTIONS\n------------\n"
	for _, c := range []struct {
		status string
		want   bool
	}{
		{head + running + waiting("test", "acct"), true},
		{head + running + waiting("TEST", "Acct"), true},
		{head + running + waiting("other", "acct"), false},
		{head + running + waiting("test", "acct_noise"), false},
		// Waiting on another table while it holds a checked one: counted,
		// as PostgreSQL's question counts it.
		{head + running + waiting("test", "acct_noise") + "RECORD LOCKS space id 5 page no 4 n bits 8 index PRIMARY of table `test`.`moves` trx id 421 lock_mode X\n", true},
		{head + running, false},
		{head, false},
	} {
		if got := innoDBWaitsOn(c.status, "test", []string{"acct", "moves"}); got != c.want {
			t.Errorf("%q: %v, want %v", c.status, got, c.want)
		}
	}
}

// The watch reads the tables of the run's SQL checks; a check whose tables
// the scanner is not sure of, or auto without --watch, leaves the run
// unwatched.
func TestNewLockWatch(t *testing.T) {
	pg := &pgx.ConnConfig{}
	pg.Host, pg.Port, pg.Database = "db", 5432, "shop"
	check := func(q string) effectsCheck {
		return &pgCheck{cfg: pg, query: template.Must(template.New("q").Parse(q))}
	}
	w := newLockWatch(nil, nil, check("SELECT count(*) FROM acct a WHERE a.balance <> 100 - (SELECT sum(amount) FROM moves m WHERE m.k = a.k)"), check("SELECT count(*) FROM Acct WHERE k = '{{.Token}}'"))
	if w == nil || w.dialect != sqldb.Postgres || !slices.Equal(w.tables, []string{"acct", "moves"}) || w.where != "db:5432/shop" {
		t.Fatalf("watch %+v, want acct and moves on db:5432/shop", w)
	}
	for _, q := range []string{"SELECT nextval('s')", "SELECT 1", "SELECT count(*) FROM t; DELETE FROM t"} {
		if w := newLockWatch(nil, check(q)); w != nil {
			t.Errorf("%q: watched %v, want no watch", q, w.tables)
		}
	}
	// Each check read by its own server's rules: MySQL's backticks.
	my := &mysql.Config{Addr: "db:3306", DBName: "shop"}
	mycheck := &mysqlCheck{cfg: my, query: template.Must(template.New("q").Parse("SELECT count(*) FROM `acct` WHERE k = '{{.Token}}'"))}
	if w := newLockWatch(nil, mycheck); w == nil || w.dialect != sqldb.MySQL || !slices.Equal(w.tables, []string{"acct"}) || w.where != "db:3306/shop" {
		t.Errorf("a MySQL check: %+v, want acct on db:3306/shop", w)
	}
	// A second server's check is not this watch's to read.
	if w := newLockWatch(nil, check("SELECT count(*) FROM moves"), mycheck); w == nil || !slices.Equal(w.tables, []string{"moves"}) {
		t.Errorf("checks on two servers: %+v, want the first server's tables", w)
	}
	if w := newLockWatch(nil, nil); w != nil {
		t.Errorf("no check: watched %v", w.tables)
	}
	if w := newLockWatch(&autoCheck{dialect: sqldb.Postgres, pg: pg}); w != nil {
		t.Errorf("auto without --watch: watched %v", w.tables)
	}
	if w := newLockWatch(&autoCheck{dialect: sqldb.Postgres, pg: pg, watch: []string{"Acct"}}); w == nil || !slices.Equal(w.tables, []string{"acct"}) {
		t.Errorf("auto with --watch Acct: %+v", w)
	}
	if w := newLockWatch(&autoCheck{dialect: sqldb.MySQL, my: &mysql.Config{Addr: "db:3306", DBName: "shop"}, watch: []string{"acct"}}); w == nil || w.dialect != sqldb.MySQL || w.where != "db:3306/shop" {
		t.Errorf("auto:mysql with --watch acct: %+v", w)
	}
	if w := newLockWatch(&autoCheck{watch: []string{"coupon:*"}}); w != nil {
		t.Errorf("auto on a store that is no SQL server: %+v", w)
	}
}

// A burst the runner left open (an error between its reset and its
// account) is ended at the proxy by Cleanup: the proxy holds nothing past
// the run, and takes the next burst.
func TestCleanupEndsTheOpenHold(t *testing.T) {
	testenv.SQL(t, sqldb.Postgres) // skips, or fails under RACETEST_REQUIRE_SERVERS, without the server
	p, err := proxy.Start(context.Background(), proxy.Config{Upstream: testenv.URL("postgres")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	target, err := New(Config{URL: "http://127.0.0.1:1/", Proxy: p.ControlAddr()}, scenarios.Params{RunID: scenarios.NewRunID()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := target.dialProxy(ctx); err != nil {
		t.Fatal(err)
	}
	b := newBurst(Vars{})
	b.expected = 2
	if err := target.beginHold(ctx, b); err != nil {
		t.Fatal(err)
	}
	target.open = b
	if _, err := p.Begin(proxy.BurstSpec{Attempts: 2}); !errors.Is(err, proxy.ErrBurstActive) {
		t.Fatalf("a second burst while the first is open: %v, want ErrBurstActive", err)
	}
	target.Cleanup(ctx)
	if _, err := p.Begin(proxy.BurstSpec{Attempts: 2}); err != nil {
		t.Fatalf("after Cleanup the proxy still holds the run's burst: %v", err)
	}
}

// The note says how many watched bursts saw a wait, and says so when the
// database could not be asked (the bursts then count as untested).
func TestLockNote(t *testing.T) {
	tg := &Target{locks: &lockWatch{where: "db:5432/shop"}}
	tg.st.lockWatched(true, nil)
	tg.st.lockWatched(false, nil)
	tg.st.lockWatched(true, nil)
	if got, want := tg.lockNote(), "lock waits on db:5432/shop: a session waited on a lock in 2 of 3 bursts (a burst answered one at a time while one did was queued by the database's lock, and counts as tested)"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	tg.st.lockWatched(false, errors.New("permission denied for pg_locks"))
	if got := tg.lockNote(); got != "lock waits: could not be watched (permission denied for pg_locks): a burst the server answered one at a time counts as untested" {
		t.Errorf("after a failure: %q", got)
	}
	if got := (&Target{}).lockNote(); got != "" {
		t.Errorf("no watch: %q", got)
	}
	quiet := &Target{locks: &lockWatch{where: "x"}}
	quiet.st.lockWatched(false, nil)
	if got := quiet.lockNote(); got != "" {
		t.Errorf("no wait: %q, want nothing said", got)
	}
}
