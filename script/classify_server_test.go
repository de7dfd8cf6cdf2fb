package script

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/racetest/racetest/runner"
)

// Each dialect's classification, against the real servers: a duplicate
// key, a serialization failure and a deadlock provoked on purpose (issue
// 25 item 8). A duplicate is the one error that means "already done"
// (declined); a serialization failure or a deadlock asks for a retry
// (conflict); the verdict counts them apart, so a slip between the three
// changes what a script's run claims.

// twoSessions opens backend's store, a table of its own with rows 1 and 2,
// and two worker connections; the table is dropped at the end.
func twoSessions(t *testing.T, backend string) (a, b SessionConn, table string) {
	t.Helper()
	st, p := open(t, backend)
	table = "racetest_" + p.RunID + "_classify"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	admin := st.Admin()
	mustExec(t, admin, fmt.Sprintf("CREATE TABLE %s (id int PRIMARY KEY, v int NOT NULL)", table))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := admin.Exec(ctx, Stmt{Text: "DROP TABLE IF EXISTS " + table}); err != nil {
			t.Errorf("drop %s: %v", table, err)
		}
	})
	mustExec(t, admin, fmt.Sprintf("INSERT INTO %s VALUES (1, 0), (2, 0)", table))
	pool, err := st.Open(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	if a, err = pool.Session(ctx, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if b, err = pool.Session(ctx, 1); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return a, b, table
}

func mustExec(t *testing.T, c Conn, q string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.Exec(ctx, Stmt{Text: q}); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func wantClass(t *testing.T, what string, c Conn, err error, want runner.Class) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error (the server did not refuse)", what)
	}
	got, schema := c.Classify(err)
	if got != want || schema {
		t.Errorf("%s: %v classified %v (schema %v), want %v (not the statement's own)", what, err, got, schema, want)
	}
}

func TestClassifyADuplicateKeyOnTheServers(t *testing.T) {
	for _, backend := range []string{"postgres", "mysql"} {
		t.Run(backend, func(t *testing.T) {
			a, _, table := twoSessions(t, backend)
			_, err := a.Exec(context.Background(), Stmt{Text: fmt.Sprintf("INSERT INTO %s VALUES (1, 9)", table)})
			wantClass(t, "a duplicate key", a, err, runner.Declined)
			// Any other refusal of the statement stays an error: a NOT
			// NULL column, and a table that does not exist (the
			// statement's own, so schema).
			_, err = a.Exec(context.Background(), Stmt{Text: fmt.Sprintf("INSERT INTO %s VALUES (3, NULL)", table)})
			if c, _ := a.Classify(err); err == nil || c != runner.Error {
				t.Errorf("a NULL in a NOT NULL column: %v classified %v, want error", err, c)
			}
			_, err = a.Exec(context.Background(), Stmt{Text: "SELECT * FROM " + table + "_missing"})
			if c, schema := a.Classify(err); err == nil || c != runner.Error || !schema {
				t.Errorf("a missing table: %v classified %v (schema %v), want error, the statement's own", err, c, schema)
			}
		})
	}
}

// A deadlock: each session locks one row, then asks for the other's. The
// server picks a victim; its error is a conflict.
func TestClassifyADeadlockOnTheServers(t *testing.T) {
	for _, backend := range []string{"postgres", "mysql"} {
		t.Run(backend, func(t *testing.T) {
			a, b, table := twoSessions(t, backend)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			upd := func(id int) Stmt { return Stmt{Text: fmt.Sprintf("UPDATE %s SET v = v + 1 WHERE id = %d", table, id)} }
			mustExec(t, a, "BEGIN")
			mustExec(t, b, "BEGIN")
			defer a.Rollback(context.Background())
			defer b.Rollback(context.Background())
			if _, err := a.Exec(ctx, upd(1)); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Exec(ctx, upd(2)); err != nil {
				t.Fatal(err)
			}
			errA := make(chan error, 1)
			go func() { _, err := a.Exec(ctx, upd(2)); errA <- err }() // waits for b
			time.Sleep(300 * time.Millisecond)
			_, errB := b.Exec(ctx, upd(1)) // waits for a: a cycle
			var victim Conn = b
			err := errB
			if errB == nil {
				victim, err = a, <-errA
			} else {
				b.Rollback(ctx) // frees a
				if e := <-errA; e != nil {
					t.Errorf("the survivor's update failed too: %v", e)
				}
			}
			wantClass(t, "a deadlock", victim, err, runner.Conflict)
		})
	}
}

// A serialization failure: a read in a snapshot, another session's write
// to the row committed, then the snapshot's own write to it. PostgreSQL
// refuses it at repeatable read (40001); MariaDB with
// innodb_snapshot_isolation (1020, "record has changed since last read").
func TestClassifyASerializationFailureOnTheServers(t *testing.T) {
	for _, backend := range []string{"postgres", "mysql"} {
		t.Run(backend, func(t *testing.T) {
			a, b, table := twoSessions(t, backend)
			if backend == "postgres" {
				mustExec(t, a, "BEGIN ISOLATION LEVEL REPEATABLE READ")
			} else {
				if _, err := a.Exec(context.Background(), Stmt{Text: "SET SESSION innodb_snapshot_isolation = ON"}); err != nil {
					t.Skipf("this server has no innodb_snapshot_isolation (MariaDB 10.6.18 and later): %v", err)
				}
				mustExec(t, a, "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
				mustExec(t, a, "START TRANSACTION WITH CONSISTENT SNAPSHOT")
			}
			defer a.Rollback(context.Background())
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := a.Exec(ctx, Stmt{Text: fmt.Sprintf("SELECT v FROM %s WHERE id = 1", table), Query: true}); err != nil {
				t.Fatal(err)
			}
			mustExec(t, b, fmt.Sprintf("UPDATE %s SET v = v + 1 WHERE id = 1", table))
			_, err := a.Exec(ctx, Stmt{Text: fmt.Sprintf("UPDATE %s SET v = v + 1 WHERE id = 1", table)})
			wantClass(t, "a serialization failure", a, err, runner.Conflict)
		})
	}
}
