package sqldb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/internal/sqlsnap"
	"github.com/racetest/racetest/runner"
)

// privateSchema points the DB's own connection at a schema (PostgreSQL) or
// database (MySQL) of the test's own, dropped after: what an unwatched
// snapshot sees is then exactly what the test made.
func privateSchema(t *testing.T, db *DB) string {
	t.Helper()
	b := make([]byte, 4)
	rand.Read(b)
	name := "racetest_" + hex.EncodeToString(b) + "_snap"
	ctx := context.Background()
	var prev string
	if db.Dialect() == Postgres {
		if err := db.Admin(ctx, func(ctx context.Context, q Querier) error {
			return q.QueryRow(ctx, "SELECT current_setting('search_path')").Scan(&prev)
		}); err != nil {
			t.Fatal(err)
		}
		mustExec(t, db, "CREATE SCHEMA "+name)
		mustExec(t, db, "SET search_path TO "+name)
		t.Cleanup(func() {
			mustExec(t, db, "SET search_path TO "+prev)
			mustExec(t, db, "DROP SCHEMA "+name+" CASCADE")
		})
		return name
	}
	if err := db.Admin(ctx, func(ctx context.Context, q Querier) error {
		return q.QueryRow(ctx, "SELECT DATABASE()").Scan(&prev)
	}); err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, "CREATE DATABASE "+name)
	mustExec(t, db, "USE "+name)
	t.Cleanup(func() {
		mustExec(t, db, "USE "+prev)
		mustExec(t, db, "DROP DATABASE "+name)
	})
	return name
}

func mustExec(t *testing.T, db *DB, q string) {
	t.Helper()
	if err := db.Exec(context.Background(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func snapshotOf(t *testing.T, db *DB, watch []string) (*SnapshotPlan, runner.Snapshot) {
	t.Helper()
	var p *SnapshotPlan
	var s runner.Snapshot
	err := db.Admin(context.Background(), func(ctx context.Context, q Querier) error {
		var err error
		if p, err = PlanSnapshot(ctx, db.Dialect(), q, watch); err != nil {
			return err
		}
		s, err = ReadSnapshot(ctx, p, q)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return p, s
}

func eq(t *testing.T, s runner.Snapshot, key, want string) {
	t.Helper()
	w, _ := new(big.Rat).SetString(want)
	if got, ok := s[key]; !ok || got.Cmp(w) != 0 {
		t.Errorf("%s = %v, want %s (snapshot %v)", key, got, want, s)
	}
}

func TestSnapshotReadsRowsAndSums(t *testing.T) {
	for _, d := range []Dialect{Postgres, MySQL} {
		t.Run(string(d), func(t *testing.T) {
			db := open(t, d, Options{})
			privateSchema(t, db)
			serial := "id SERIAL PRIMARY KEY"
			if d == MySQL {
				serial = "id INT AUTO_INCREMENT PRIMARY KEY"
			}
			mustExec(t, db, "CREATE TABLE stock ("+serial+", qty INT NOT NULL, price DECIMAL(10,2), score DOUBLE PRECISION, name VARCHAR(20))")
			mustExec(t, db, "CREATE TABLE grants (code VARCHAR(20) NOT NULL)")
			mustExec(t, db, "CREATE TABLE racetest_runs (n INT)")
			mustExec(t, db, "INSERT INTO racetest_runs VALUES (1)")
			mustExec(t, db, "INSERT INTO stock (qty, price, score, name) VALUES (5, 1.25, 0.1, 'a'), (7, 2.50, 0.2, 'b')")
			mustExec(t, db, "INSERT INTO grants VALUES ('x')")

			p, s := snapshotOf(t, db, nil)
			var names []string
			for _, tb := range p.Tables {
				names = append(names, tb.Name+"("+strings.Join(tb.Columns, ",")+")")
			}
			if got := strings.Join(names, " "); got != "grants() stock(qty,price,score)" {
				t.Fatalf("tables %s: the registry is never watched, the key never summed", got)
			}
			eq(t, s, "stock rows", "2")
			eq(t, s, "stock.qty", "12")
			eq(t, s, "stock.price", "3.75")
			eq(t, s, "stock.score", "0.3")
			eq(t, s, "grants rows", "1")
			if len(s) != 5 {
				t.Errorf("snapshot %v: want 5 keys", s)
			}

			_, s2 := snapshotOf(t, db, []string{"STOCK"})
			if len(s2) != 4 {
				t.Errorf("--watch STOCK read %v", s2)
			}
			mustExec(t, db, "UPDATE stock SET qty = qty - 3 WHERE name = 'a'")
			mustExec(t, db, "INSERT INTO stock (qty, price, score, name) VALUES (1, 0.05, 0, 'c')")
			_, s3 := snapshotOf(t, db, []string{"stock"})
			delta := s3.Change(s2)
			if got := runner.Signed(delta["stock.qty"]) + " " + runner.Signed(delta["stock rows"]) + " " + runner.Signed(delta["stock.price"]); got != "-2 +1 +0.05" {
				t.Errorf("delta %s", got)
			}

			err := db.Admin(context.Background(), func(ctx context.Context, q Querier) error {
				_, err := PlanSnapshot(ctx, d, q, []string{"stock", "nosuch"})
				return err
			})
			var se *runner.SnapshotError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), `no table "nosuch"`) || !strings.Contains(err.Error(), "grants, stock") {
				t.Errorf("unknown table: %v", err)
			}
		})
	}
}

func TestSnapshotRefusesTooLargeASchema(t *testing.T) {
	for _, d := range []Dialect{Postgres, MySQL} {
		t.Run(string(d), func(t *testing.T) {
			db := open(t, d, Options{})
			privateSchema(t, db)
			mustExec(t, db, "CREATE TABLE a (n INT)")
			mustExec(t, db, "CREATE TABLE b (n INT)")
			plan := func(watch ...string) error {
				return db.Admin(context.Background(), func(ctx context.Context, q Querier) error {
					_, err := PlanSnapshot(ctx, d, q, watch)
					return err
				})
			}
			defer func(l sqlsnap.Limits) { snapshotLimits = l }(snapshotLimits)
			snapshotLimits.Tables = 2
			if err := plan(); err != nil {
				t.Fatalf("2 tables at a limit of 2: %v", err)
			}
			snapshotLimits.Tables = 1
			var se *runner.SnapshotError
			if err := plan(); !errors.As(err, &se) || !strings.Contains(err.Error(), "--watch TABLE") {
				t.Fatalf("2 tables over a limit of 1: %v", err)
			}
			if err := plan("a"); err != nil {
				t.Fatalf("one watched table: %v", err)
			}
			snapshotLimits = sqlsnap.Limits{Tables: 10, Bytes: 0}
			mustExec(t, db, "INSERT INTO a VALUES (1)")
			// Both servers report a table's size as of its statistics
			// (PostgreSQL's relpages: a size read from the table itself
			// would lock it), which ANALYZE brings up to date.
			if d == MySQL {
				mustExec(t, db, "ANALYZE TABLE a")
			} else {
				mustExec(t, db, "ANALYZE a")
			}
			if err := plan(); !errors.As(err, &se) || !strings.Contains(err.Error(), "MiB") {
				t.Fatalf("data over a limit of 0 bytes: %v", err)
			}
		})
	}
}

// On a shared database another session's DROP TABLE can wait behind a
// long transaction, and every lock on that table queues behind the DROP.
// Planning a snapshot of other tables (--watch) must not wait with them:
// the listing once read each table's size with pg_relation_size, which
// locks the table, and the run failed after 30 s.
func TestSnapshotPlanDoesNotQueueBehindADrop(t *testing.T) {
	db := open(t, Postgres, Options{})
	schema := privateSchema(t, db)
	mustExec(t, db, "CREATE TABLE watched (n INT)")
	mustExec(t, db, "CREATE TABLE busy (n INT)")
	ctx := context.Background()
	pool, conns, err := db.Warm(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	defer conns[1].Close()
	defer conns[0].Close()
	// A long transaction reads busy; the DROP waits for it.
	tx, err := conns[0].Begin(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tx.Exec(ctx, "SELECT count(*) FROM "+schema+".busy"); err != nil {
		t.Fatal(err)
	}
	dropped := make(chan error, 1)
	go func() {
		_, _, err := conns[1].Exec(ctx, "DROP TABLE "+schema+".busy")
		dropped <- err
	}()
	// Until the DROP is queued: a lock of busy's not granted.
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := db.Count(ctx, "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'busy' AND NOT l.granted")
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the DROP never queued behind the transaction")
		}
		time.Sleep(10 * time.Millisecond)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	err = db.Admin(pctx, func(ctx context.Context, q Querier) error {
		_, err := PlanSnapshot(ctx, Postgres, q, []string{"watched"})
		return err
	})
	took := time.Since(start)
	if rerr := tx.Rollback(ctx); rerr != nil {
		t.Fatal(rerr)
	}
	if derr := <-dropped; derr != nil {
		t.Fatal(derr)
	}
	if err != nil {
		t.Fatalf("planning a snapshot of another table while a DROP waited: %v (after %s)", err, took)
	}
}

// A read may answer from the last one when the server has committed
// nothing since (PostgreSQL: the same pg_current_snapshot), so a write
// must show at the first read after its commit, whenever it began: a
// transaction that wrote before a read and committed after it (its xid
// the newest, above the read's xmax), and one whose xid a later commit
// left in the running list (below xmax). On a quiet server, a read that
// answered from the last one with either commit made would miss a row.
func TestSnapshotSeesEveryCommit(t *testing.T) {
	for _, d := range []Dialect{Postgres, MySQL} {
		t.Run(string(d), func(t *testing.T) {
			db := open(t, d, Options{})
			schema := privateSchema(t, db)
			mustExec(t, db, "CREATE TABLE t (v INT)")
			mustExec(t, db, "INSERT INTO t VALUES (1)")
			ctx := context.Background()
			p, s := snapshotOf(t, db, []string{"t"})
			eq(t, s, "t rows", "1")
			read := func(want string) {
				t.Helper()
				var s runner.Snapshot
				if err := db.Admin(ctx, func(ctx context.Context, q Querier) error {
					var err error
					s, err = ReadSnapshot(ctx, p, q)
					return err
				}); err != nil {
					t.Fatal(err)
				}
				eq(t, s, "t rows", want)
			}
			read("1")
			pool := db.Pool(3) // three transactions, each on its own connection
			defer pool.Close()
			begin := func() Tx {
				t.Helper()
				c, err := pool.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				tx, err := c.Begin(ctx, "")
				if err != nil {
					t.Fatal(err)
				}
				if _, _, err := tx.Exec(ctx, "INSERT INTO "+schema+".t VALUES (2)"); err != nil {
					t.Fatal(err)
				}
				return tx
			}
			commit := func(tx Tx) {
				t.Helper()
				if err := tx.Commit(ctx); err != nil {
					t.Fatal(err)
				}
			}

			newest := begin()
			read("1")
			read("1")
			commit(newest)
			read("2")
			read("2")

			older, later := begin(), begin()
			commit(later)
			read("3")
			read("3")
			commit(older)
			read("4")
			read("4")
			if d == MySQL && p.Reused() != 0 {
				t.Errorf("MySQL: %d reads answered from the last, want none (no exact mark)", p.Reused())
			}
		})
	}
}
