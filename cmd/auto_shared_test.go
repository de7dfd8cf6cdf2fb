package cmd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/internal/testenv"
)

// ownSchema makes a schema (PostgreSQL) or a database (MariaDB) of the
// test's own on d's server, dropped when the test ends, and returns the
// connection string that reaches it: racetest's flag value, and the churn's.
// A snapshot without --watch reads a whole schema, so on the shared one
// every other writer is in it: the other packages' tests that go test runs
// beside cmd's, another run of cmd's own tests. In 3 of 4 runs of cmd's
// tests, two at a time, the other run's tables changed while no attempt
// ran, or between two solo runs: INCONCLUSIVE, rightly, but not for the
// churn the test sets up. Here only the test writes.
func ownSchema(t *testing.T, d sqldb.Dialect) string {
	t.Helper()
	ctx := context.Background()
	admin := testenv.SQL(t, d)
	b := make([]byte, 4)
	rand.Read(b)
	name := "snapown_" + hex.EncodeToString(b)
	kind, conn := "DATABASE", ""
	switch d {
	case sqldb.Postgres:
		kind = "SCHEMA"
		conn = testenv.URL(string(d))
		if !strings.HasPrefix(conn, "postgres://") && !strings.HasPrefix(conn, "postgresql://") {
			conn += " search_path=" + name // keyword=value form
			break
		}
		u, err := url.Parse(conn)
		if err != nil {
			t.Fatalf("%s: %v", testenv.Env(string(d)), err)
		}
		q := u.Query()
		q.Set("search_path", name)
		u.RawQuery = q.Encode()
		conn = u.String()
	case sqldb.MySQL:
		cfg, err := sqldb.MySQLConfig(testenv.Conn(string(d)))
		if err != nil {
			t.Fatalf("%s: %v", testenv.Env(string(d)), err)
		}
		cfg.DBName = name
		conn = cfg.FormatDSN()
	}
	if err := admin.Exec(ctx, "CREATE "+kind+" "+name); err != nil {
		t.Fatalf("create %s %s: %v", strings.ToLower(kind), name, err)
	}
	t.Cleanup(func() {
		drop := "DROP " + kind + " " + name
		if d == sqldb.Postgres {
			drop += " CASCADE"
		}
		if err := admin.Exec(context.Background(), drop); err != nil {
			t.Errorf("%s by hand: %v", drop, err)
		}
	})
	return conn
}

// openAt opens d's server at conn, as a run does, closed when the test ends.
func openAt(t *testing.T, d sqldb.Dialect, conn string) *sqldb.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := sqldb.Open(ctx, d, conn, sqldb.Options{})
	if err != nil {
		testenv.Unavailable(t, string(d), err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// churnTables creates a table of the test's own at conn (on d's server)
// every few milliseconds, each under a new name, and drops the one before
// it, until the test ends: what another team's tests (or another racetest
// run) do on a shared database. prefix starts every name. The last table
// is dropped at the end. The churn's pace is the server's: each CREATE and
// DROP waits for its commit, which on a loaded machine can take longer
// than a whole run of a few bursts. So it returns the number of CREATEs
// and DROPs that returned since a time: a run that saw fewer than
// minChurn of them went by without the churn the test is about, and is
// run again (churned).
func churnTables(t *testing.T, d sqldb.Dialect, conn, prefix string) (since func(time.Time) int) {
	t.Helper()
	ctx := context.Background()
	db := openAt(t, d, conn)
	b := make([]byte, 4)
	rand.Read(b)
	base := prefix + hex.EncodeToString(b) + "_churn"
	stop, done := make(chan struct{}), make(chan struct{})
	var standing []string // the tables made and not yet dropped
	var mu sync.Mutex
	var at []time.Time // when each CREATE and DROP returned
	note := func() {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
	}
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			name := fmt.Sprintf("%s%d", base, i)
			if db.Exec(ctx, "CREATE TABLE "+name+" (id INT PRIMARY KEY, n INT)") != nil {
				continue
			}
			note()
			standing = append(standing, name)
			for len(standing) > 1 && db.Exec(ctx, "DROP TABLE "+standing[0]) == nil {
				note()
				standing = standing[1:]
			}
			time.Sleep(3 * time.Millisecond)
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
		for _, name := range standing {
			if err := db.Exec(ctx, "DROP TABLE IF EXISTS "+name); err != nil {
				t.Errorf("drop %s by hand: %v", name, err)
			}
		}
	})
	return func(from time.Time) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, a := range at {
			if a.After(from) {
				n++
			}
		}
		return n
	}
}

// minChurn is the fewest tables created or dropped during a run for the
// run to have seen the churn: a change right at its start (before its
// first listing) or its end (after its last) goes unseen, so one or two
// are not enough.
const minChurn = 4

// churned runs run until the churn (since, from churnTables) made at
// least minChurn changes while it ran, at most three times, and returns
// that run's output and exit code; a run the churn passed by is logged
// and run again, and three such runs fail the test, saying so.
func churned(t *testing.T, since func(time.Time) int, run func() (out, stderr string, code int)) (string, string, int) {
	t.Helper()
	for try := 1; ; try++ {
		start := time.Now()
		out, stderr, code := run()
		n := since(start)
		if n >= minChurn {
			return out, stderr, code
		}
		if try == 3 {
			t.Fatalf("in 3 runs the other writer created or dropped at most %d tables while a run ran (want %d): the server's commits are too slow here for the test to say anything", n, minChurn)
		}
		t.Logf("run %d: the other writer created or dropped %d tables while it ran (exit %d); running it again", try, n, code)
	}
}

// On a shared database, without --watch, tables of others come and go
// during an auto run: one that appears or vanishes is another writer's
// (the run is INCONCLUSIVE, saying so) or, named racetest_…, another
// run's, never snapshotted. Either way the run reaches a verdict or
// INCONCLUSIVE, never an error (exit 3) on a table gone between the
// listing and its read. The schema is the test's own (ownSchema): the
// churn is its only other writer.
func TestEffectsAutoSQLTablesComeAndGo(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: bursts on a store's own server (the mutation step's runs of cmd skip it)")
	}
	dir := "../examples/auto/"
	t.Setenv("COLUMNS", "250")
	for _, c := range []struct {
		backend string
		dialect sqldb.Dialect
		flag    string
	}{{"postgres", sqldb.Postgres, "--postgres-url"}, {"mysql", sqldb.MySQL, "--mysql-dsn"}} {
		for _, prefix := range []string{"snapchurn_", "racetest_"} {
			t.Run(c.backend+"/"+prefix, func(t *testing.T) {
				conn := ownSchema(t, c.dialect)
				since := churnTables(t, c.dialect, conn, prefix)
				out, stderr, code := churned(t, since, func() (string, string, int) {
					return execCmd(t, false, "sql", "-b", c.backend, c.flag, conn, "--setup", "@"+dir+"schema.sql", "--subject", "@"+dir+"subject.sql",
						"--attempt", "@"+dir+"redeem-fixed.sql", "--effects", "auto", "--teardown", "@"+dir+"drop.sql",
						"-n", "4", "--bursts", "6", "--timeline=false", "--expect", "safe", "--strict")
				})
				// The reason is one line, folded at the terminal's width
				// wherever its list of changes puts the fold.
				switch flat := strings.Join(strings.Fields(out), " "); {
				case code == exitOK && strings.Contains(out, "SAFE"):
				case code == exitInconclusive && strings.Contains(flat, "another writer is at work"):
				default:
					t.Fatalf("exit %d, want SAFE (0) or INCONCLUSIVE for another writer (4)\n%s\n%s", code, out, stderr)
				}
				if prefix == "snapchurn_" && code == exitOK {
					t.Errorf("tables created and dropped during the run, and the run read SAFE:\n%s", out)
				}
			})
		}
	}
}

// The same over HTTP: 'racetest http … --effects auto:postgres' without
// --watch, while tables of others come and go, is INCONCLUSIVE for
// another writer, never exit 3. Besides the churn, whose pace is the
// server's commits, another session creates a table while the run's
// fourth POST is served (the first of a burst, after its solo twin's
// three; the server probe's OPTIONS are not counted) and the request
// waits for it: the run always sees one table come.
func TestEffectsAutoHTTPTablesComeAndGo(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: bursts on a store's own server (the mutation step's runs of cmd skip it)")
	}
	ctx := context.Background()
	conn := ownSchema(t, sqldb.Postgres)
	db := openAt(t, sqldb.Postgres, conn)
	other := openAt(t, sqldb.Postgres, conn)
	b := make([]byte, 4)
	rand.Read(b)
	visits := "snapvisits_" + hex.EncodeToString(b)
	during := "snapchurn_" + hex.EncodeToString(b) + "_during"
	if err := db.Exec(ctx, "CREATE TABLE "+visits+" (code TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, table := range []string{visits, during} {
			if err := db.Exec(context.Background(), "DROP TABLE IF EXISTS "+table); err != nil {
				t.Errorf("drop %s by hand: %v", table, err)
			}
		}
	}()
	var served atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && served.Add(1) == 4 {
			if err := other.Exec(r.Context(), "CREATE TABLE "+during+" (id INT PRIMARY KEY)"); err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
		}
		if err := db.Exec(r.Context(), "INSERT INTO "+visits+" (code) VALUES ($1)", r.URL.Query().Get("code")); err != nil {
			http.Error(w, err.Error(), 500)
		}
	}))
	defer srv.Close()
	churnTables(t, sqldb.Postgres, conn, "snapchurn_")
	t.Setenv("COLUMNS", "250")
	out, stderr, code := execCmd(t, false, "http", "POST", srv.URL+"/visit?code={{.Token}}", "--effects", "auto:postgres",
		"--postgres-url", conn, "-n", "3", "--bursts", "4", "--expect", "safe", "--strict")
	if code != exitInconclusive || !strings.Contains(strings.Join(strings.Fields(out), " "), "another writer is at work") {
		t.Fatalf("exit %d, want INCONCLUSIVE for another writer (4)\n%s\n%s", code, out, stderr)
	}
}

// An empty --watch named nothing and measured every table; --solo-every without
// --effects auto was dropped without a word. Both are refused before
// anything connects, with what to give; RACETEST_SOLO_EVERY, set once for
// every run of a CI matrix, is used by auto runs and ignored by the others.
func TestEffectsAutoFlagsThatNameNothing(t *testing.T) {
	noServer := []string{"--postgres-url", "postgres://nobody@127.0.0.1:1/x?connect_timeout=1", "--redis-url", "redis://127.0.0.1:1/0"}
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"sql watch empty":          {[]string{"sql", "-b", "postgres", "--attempt", "SELECT 1;", "--effects", "auto", "--watch", ""}, "--watch '' names no tables: name the tables the attempts write, e.g. --watch 'coupons_{{.RunID}},redemptions_{{.RunID}}', or leave --watch out"},
		"sql watch empty name":     {[]string{"sql", "-b", "postgres", "--attempt", "SELECT 1;", "--effects", "auto", "--watch", "coupons,"}, `--watch "coupons,": an empty name among the tables`},
		"sql watch empty no auto":  {[]string{"sql", "-b", "postgres", "--attempt", "SELECT 1;", "--effects", "SELECT 1;", "--watch", ""}, "--watch '' names no tables"},
		"mongo watch empty":        {[]string{"mongo", "--attempt", `{"ping": 1}`, "--effects", "auto", "--watch", " "}, "an empty name among the collections"},
		"sql solo-every no auto":   {[]string{"sql", "-b", "postgres", "--attempt", "SELECT 1;", "--effects", "SELECT 1;", "--solo-every", "3"}, "--solo-every sets how often --effects auto runs a solo twin: add --effects auto, or drop --solo-every"},
		"redis solo-every no auto": {[]string{"redis", "--attempt", "GET a", "--effects", "EXISTS a", "--solo-every", "1"}, "--solo-every sets how often --effects auto runs a solo twin"},
		"http solo-every no auto":  {[]string{"http", "http://127.0.0.1:1/", "--solo-every", "2"}, "--solo-every sets how often --effects auto runs a solo twin"},
		"http watch empty":         {[]string{"http", "http://127.0.0.1:1/", "--effects", "auto:postgres", "--watch", ""}, "--watch '' names no tables, key patterns or collections: name what the endpoint writes"},
	} {
		t.Run(name, func(t *testing.T) {
			_, stderr, code := execCmd(t, false, append(tc.args, noServer...)...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d (want %d), stderr does not say %q:\n%s", code, exitUsage, tc.want, stderr)
			}
		})
	}
	// The environment's: a run without auto goes on (to the server that
	// is not there, exit 3), and an empty RACETEST_WATCH is no --watch.
	for name, env := range map[string]map[string]string{
		"solo-every": {"RACETEST_SOLO_EVERY": "3"},
		"watch":      {"RACETEST_WATCH": ""},
	} {
		t.Run("environment "+name, func(t *testing.T) {
			code, _, stderr := runWithEnv(t, env, append([]string{"sql", "-b", "postgres", "--attempt", "SELECT 1;", "--effects", "SELECT 1;", "--bursts", "1"}, noServer...)...)
			if code != exitSetup {
				t.Errorf("exit %d, want %d (refused for a setting by environment that does not apply)\n%s", code, exitSetup, stderr)
			}
		})
	}
}

// A key of the application's own with a time to live (a rate limiter's
// window, a lease) that expires during the run is not another writer,
// nor a loss: the run over keys that each expire a few bursts later
// reads SAFE, as the same key without expiry does.
func TestEffectsAutoRedisKeysThatExpire(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: bursts on a store's own server (the mutation step's runs of cmd skip it)")
	}
	autoProbe(t, "redis")
	t.Setenv("COLUMNS", "250")
	// One window per subject, opened once: SET NX is atomic. Each attempt
	// takes 15 ms, so that a burst and its solo twin take some 75 ms and
	// every window (600 ms) closes several bursts after it opened, while
	// the run (16 bursts) goes on. A window of 150 ms closed inside a solo
	// twin once, at load 6 under -race (its four attempts one at a time
	// took longer than the window): the twins then differ from each other
	// and the run is rightly INCONCLUSIVE, but it is not what this test is
	// about.
	out, stderr, code := execCmd(t, false, "redis", "--attempt", "SET rl:{{.RunID}}-{{.Token}} 1 PX 600 NX\n\\sleep 15 ms",
		"--effects", "auto", "--watch", "rl:{{.RunID}}-*", "-n", "4", "--bursts", "16", "--timeline=false", "--expect", "safe", "--strict")
	if code != exitOK || !strings.Contains(out, "SAFE") {
		t.Fatalf("exit %d, want SAFE\n%s\n%s", code, out, stderr)
	}
	time.Sleep(650 * time.Millisecond) // the run's keys expire
}
