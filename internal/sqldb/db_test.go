package sqldb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/racetest/racetest/runner"
)

// open connects to the test server of d, or skips (fails under
// RACETEST_REQUIRE_SERVERS) when it is not there. Every other package's
// tests do this through internal/testenv, which opens SQL servers through
// this package and so cannot be imported here.
func open(t testing.TB, d Dialect, o Options) *DB {
	t.Helper()
	env := map[Dialect]string{MySQL: "RACETEST_MYSQL_DSN", Postgres: "RACETEST_POSTGRES_URL"}[d]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := Open(ctx, d, os.Getenv(env), o)
	if err != nil {
		if os.Getenv("RACETEST_REQUIRE_SERVERS") != "" {
			t.Fatalf("%s server unavailable (%s) and RACETEST_REQUIRE_SERVERS is set: %v", d, env, err)
		}
		t.Skipf("%s server unavailable (%s), skipping (set RACETEST_REQUIRE_SERVERS=1 to make this a failure): %v", d, env, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// table creates a table of the test's own and drops it after.
func table(t *testing.T, db *DB, columns string) string {
	t.Helper()
	b := make([]byte, 4)
	rand.Read(b)
	name := "racetest_" + hex.EncodeToString(b) + "_sqldb"
	ctx := context.Background()
	if err := db.Exec(ctx, "CREATE TABLE "+name+" ("+columns+")"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Exec(context.Background(), "DROP TABLE "+name); err != nil {
			t.Errorf("drop %s by hand: %v", name, err)
		}
	})
	return name
}

var serverNames = map[Dialect]*regexp.Regexp{
	MySQL:    regexp.MustCompile(`^(MariaDB|MySQL|TiDB) [0-9]+\.[0-9]+`),
	Postgres: regexp.MustCompile(`^PostgreSQL [0-9]+\.[0-9]+`),
}

// TestOutcomesFromTheServer: the server's own duplicate-key and deadlock
// errors come out as declined and conflict, a missing table as an error.
func TestOutcomesFromTheServer(t *testing.T) {
	for _, d := range []Dialect{MySQL, Postgres} {
		t.Run(string(d), func(t *testing.T) {
			db := open(t, d, Options{})
			if !serverNames[d].MatchString(db.Server()) {
				t.Errorf("Server() = %q", db.Server())
			}
			tb := table(t, db, "id INT PRIMARY KEY, n INT NOT NULL")
			ctx := context.Background()
			pool, conns, err := db.Warm(ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			defer func() {
				for _, c := range conns {
					c.Close()
				}
			}()
			a, b := conns[0], conns[1]
			insert := d.Rebind("INSERT INTO " + tb + " (id, n) VALUES (?, 0)")
			if _, _, err := a.Exec(ctx, insert, 1); err != nil {
				t.Fatal(err)
			}
			_, _, err = b.Exec(ctx, insert, 1)
			if o := ClassifyInsert(err); o.Class != runner.Declined || !IsDuplicate(err) {
				t.Errorf("second insert of the same key: %v → %s, want declined", err, o.Class)
			}
			if o := Classify(err); o.Class != runner.Error {
				t.Errorf("a duplicate outside an insert's guard is %s, want error", o.Class)
			}
			if _, _, err := a.Exec(ctx, insert, 2); err != nil {
				t.Fatal(err)
			}
			_, _, err = a.Exec(ctx, "SELECT n FROM "+tb+"_missing")
			if o := Classify(err); o.Class != runner.Error || IsConflict(err) {
				t.Errorf("missing table: %s, want error", o.Class)
			}

			// A deadlock: each holds one row and asks for the other's.
			update := d.Rebind("UPDATE " + tb + " SET n = n + 1 WHERE id = ?")
			var errs [2]error
			var wg sync.WaitGroup
			var locked sync.WaitGroup
			locked.Add(2)
			for i, c := range conns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = InTx(ctx, c, "", func(tx Tx) error {
						if _, _, err := tx.Exec(ctx, update, i+1); err != nil {
							locked.Done()
							return err
						}
						locked.Done()
						locked.Wait()
						_, _, err := tx.Exec(ctx, update, 2-i)
						return err
					})
				}()
			}
			wg.Wait()
			conflicts := 0
			for _, err := range errs {
				if err != nil {
					if o := Classify(err); o.Class != runner.Conflict {
						t.Errorf("deadlock: %v → %s, want conflict", err, o.Class)
					}
					conflicts++
				}
			}
			if conflicts != 1 {
				t.Errorf("deadlock: %d transactions failed (%v), want 1", conflicts, errs)
			}
			// The survivor's two updates count; the victim's rolled back.
			if n, err := db.Count(ctx, "SELECT SUM(n) FROM "+tb); err != nil || n != 2 {
				t.Errorf("after the deadlock: sum %d (%v), want 2", n, err)
			}
		})
	}
}

// TestIsolationOnEveryConnection: Options.Isolation reaches the run's own
// connection and every warmed one, and Begin's level the transaction.
func TestIsolationOnEveryConnection(t *testing.T) {
	for _, d := range []Dialect{MySQL, Postgres} {
		t.Run(string(d), func(t *testing.T) {
			db := open(t, d, Options{Isolation: ReadCommitted})
			ctx := context.Background()
			want := map[Dialect]string{MySQL: "READ-COMMITTED", Postgres: "read committed"}[d]
			if got, err := db.Isolation(ctx); err != nil || got != want {
				t.Errorf("run's connection: %q, %v; want %q", got, err, want)
			}
			pool, conns, err := db.Warm(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			defer conns[0].Close()
			var got string
			if d == Postgres {
				err = conns[0].QueryRow(ctx, "SHOW transaction_isolation").Scan(&got)
			} else {
				got, err = MySQLIsolation(ctx, conns[0])
			}
			if err != nil || got != want {
				t.Errorf("warmed connection: %q, %v; want %q", got, err, want)
			}
			if d != Postgres {
				return // MySQL has no way to read a transaction's own level
			}
			err = InTx(ctx, conns[0], Serializable, func(tx Tx) error {
				return tx.QueryRow(ctx, "SHOW transaction_isolation").Scan(&got)
			})
			if err != nil || got != "serializable" {
				t.Errorf("Begin(serializable): %q, %v", got, err)
			}
		})
	}
}

// TestInTxRollsBack: a failing function leaves nothing behind, and its
// error comes back as it was.
func TestInTxRollsBack(t *testing.T) {
	for _, d := range []Dialect{MySQL, Postgres} {
		t.Run(string(d), func(t *testing.T) {
			db := open(t, d, Options{})
			tb := table(t, db, "id INT PRIMARY KEY")
			ctx := context.Background()
			pool, conns, err := db.Warm(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			defer conns[0].Close()
			boom := errors.New("boom")
			err = InTx(ctx, conns[0], "", func(tx Tx) error {
				if _, _, err := tx.Exec(ctx, d.Rebind("INSERT INTO "+tb+" (id) VALUES (?)"), 1); err != nil {
					return err
				}
				return boom
			})
			if !errors.Is(err, boom) {
				t.Errorf("InTx returned %v, want boom", err)
			}
			if n, err := db.Count(ctx, "SELECT COUNT(*) FROM "+tb); err != nil || n != 0 {
				t.Errorf("after a rolled-back insert: %d rows (%v), want 0", n, err)
			}
			rows, err := conns[0].Query(ctx, "SELECT 1 AS one, 'x' AS two")
			if err != nil || len(rows.Values) != 1 || strings.Join(rows.Columns, ",") != "one,two" {
				t.Errorf("Query: %+v, %v", rows, err)
			}
		})
	}
}

// TestSettings: a setting the server has reads back; one it lacks is not
// an error; a name that is not an identifier never reaches the server.
func TestSettings(t *testing.T) {
	for _, d := range []Dialect{MySQL, Postgres} {
		t.Run(string(d), func(t *testing.T) {
			db := open(t, d, Options{})
			ctx := context.Background()
			name := map[Dialect]string{MySQL: "max_connections", Postgres: "max_connections"}[d]
			if v, ok, err := db.Setting(ctx, name); err != nil || !ok || v == "" {
				t.Errorf("Setting(%s) = %q, %v, %v", name, v, ok, err)
			}
			missing := map[Dialect]string{MySQL: "racetest_no_such_variable", Postgres: "racetest.no_such_setting"}[d]
			if v, ok, err := db.Setting(ctx, missing); err != nil || ok {
				t.Errorf("Setting(%s) = %q, %v, %v; want not found", missing, v, ok, err)
			}
			if _, _, err := db.Setting(ctx, "x; DROP TABLE y"); err == nil {
				t.Error("a setting name with SQL in it was accepted")
			}
			if d == MySQL && strings.HasPrefix(db.Server(), "MariaDB") {
				// The setting that decides lost-update under REPEATABLE READ.
				if _, ok, err := db.Setting(ctx, "innodb_snapshot_isolation"); err != nil || !ok {
					t.Logf("innodb_snapshot_isolation not on %s (%v): older than 10.11.8", db.Server(), err)
				}
			}
		})
	}
}

func TestRebind(t *testing.T) {
	q := "UPDATE t SET a = ? WHERE b = ? AND c = ?"
	if got := Postgres.Rebind(q); got != "UPDATE t SET a = $1 WHERE b = $2 AND c = $3" {
		t.Errorf("Postgres.Rebind = %q", got)
	}
	if got := MySQL.Rebind(q); got != q {
		t.Errorf("MySQL.Rebind = %q", got)
	}
}

func TestParseIsolation(t *testing.T) {
	for in, want := range map[string]string{"": "", "read-committed": "READ COMMITTED", "REPEATABLE_READ": "REPEATABLE READ", "Serializable": "SERIALIZABLE", "read uncommitted": "READ UNCOMMITTED"} {
		if l, err := ParseIsolation(in); err != nil || l.SQL() != want {
			t.Errorf("ParseIsolation(%q) = %q, %v; want %q", in, l.SQL(), err, want)
		}
	}
	if _, err := ParseIsolation("snapshot"); err == nil || !strings.Contains(err.Error(), "serializable") {
		t.Errorf("ParseIsolation(snapshot): %v, want an error listing the levels", err)
	}
}

// TestPostgresAddr: a unix socket is named by its directory, not as
// "/var/run/postgresql:5432".
func TestPostgresAddr(t *testing.T) {
	for conn, want := range map[string]string{
		"postgres://u@db.internal:5433/x":                "db.internal:5433",
		"host=/var/run/postgresql user=u dbname=x":       "/var/run/postgresql",
		"postgres://u@[::1]:5432/x":                      "[::1]:5432",
		"postgres:///x?host=/tmp&user=u&sslmode=disable": "/tmp",
	} {
		cfg, err := pgx.ParseConfig(conn)
		if err != nil {
			t.Fatal(err)
		}
		if got := PostgresAddr(cfg); got != want {
			t.Errorf("PostgresAddr(%q) = %q, want %q", conn, got, want)
		}
	}
}

// A Dialect that names no family gets an error or a panic from each place
// that differs per family, never MySQL's answer.
func TestUnknownDialectIsNeverMySQL(t *testing.T) {
	const d Dialect = "sqlite"
	ctx := context.Background()
	if _, err := Open(ctx, d, "", Options{}); err == nil || !strings.Contains(err.Error(), `unknown dialect "sqlite"`) {
		t.Errorf("Open: %v", err)
	}
	if _, _, err := Setting(ctx, d, nil, "max_connections"); err == nil || !strings.Contains(err.Error(), `unknown dialect "sqlite"`) {
		t.Errorf("Setting: %v", err)
	}
	for name, f := range map[string]func(){
		"ServerName":  func() { ServerName(ctx, d, nil) },
		"SessionID":   func() { _, _ = SessionID(ctx, d, nil) },
		"LockWait":    func() { _, _ = LockWait(ctx, d, nil, 1) },
		"HiddenReach": func() { _, _ = HiddenReach(ctx, d, nil, []string{"t"}) },
		"Rebind":      func() { d.Rebind("?") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s answered for an unknown dialect", name)
				}
			}()
			f()
		}()
	}
}
