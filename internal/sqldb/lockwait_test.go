package sqldb

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

// The server, not a clock, says a session waits: an idle session and one
// whose update got its row do not wait; one whose update is queued behind
// another transaction's row lock does, as soon as it queues, and no longer
// once that lock goes.
func TestLockWaitIsWhatTheServerSays(t *testing.T) {
	for _, d := range []Dialect{MySQL, Postgres} {
		t.Run(string(d), func(t *testing.T) {
			db := open(t, d, Options{})
			tb := table(t, db, "id INT PRIMARY KEY, n INT NOT NULL")
			ctx := context.Background()
			if err := db.Exec(ctx, "INSERT INTO "+tb+" (id, n) VALUES (1, 0)"); err != nil {
				t.Fatal(err)
			}
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
			holder, waiter := conns[0], conns[1]
			id, err := SessionID(ctx, d, waiter)
			if err != nil {
				t.Fatal(err)
			}
			hid, err := SessionID(ctx, d, holder)
			if err != nil || hid == id {
				t.Fatalf("session ids %d and %d (%v): want two different sessions", hid, id, err)
			}
			ask := func() bool {
				var w bool
				if err := db.Admin(ctx, func(ctx context.Context, q Querier) error {
					w, err = LockWait(ctx, d, q, id)
					return err
				}); err != nil {
					t.Fatal(err)
				}
				return w
			}
			if ask() {
				t.Fatal("an idle session waits, says LockWait")
			}
			tx, err := holder.Begin(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			update := "UPDATE " + tb + " SET n = n + 1 WHERE id = 1"
			if _, _, err := tx.Exec(ctx, update); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { _, _, err := waiter.Exec(ctx, update); done <- err }()
			deadline := time.Now().Add(5 * time.Second)
			for !ask() {
				if time.Now().After(deadline) {
					t.Fatal("the queued update never showed as waiting on a lock")
				}
				time.Sleep(time.Millisecond)
			}
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if ask() {
				t.Error("the update finished, and the session still waits, says LockWait")
			}
		})
	}
}

// Only a deadlock is a deadlock: a serialization failure, MariaDB's
// snapshot check and a lock wait timeout are not, whatever they say.
func TestIsDeadlockByTheServersClass(t *testing.T) {
	my := func(n uint16, msg string) error {
		return fmt.Errorf("update: %w", &mysql.MySQLError{Number: n, Message: msg})
	}
	pg := func(code, msg string) error {
		return fmt.Errorf("commit: %w", &pgconn.PgError{Code: code, Message: msg})
	}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{my(1213, "m"), true},
		{pg("40P01", "m"), true},
		{my(1020, "deadlock"), false},
		{my(1205, "deadlock"), false},
		{pg("40001", "deadlock detected"), false},
		{errors.New("deadlock 1213 40P01"), false},
		{nil, false},
	} {
		if got := IsDeadlock(tc.err); got != tc.want {
			t.Errorf("IsDeadlock(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// A MySQL 8 report as a MariaDB one: the waiting thread is found by its
// own entry, and another thread's wait is not its.
func TestInnoDBStatusNamesTheWaitingThread(t *testing.T) {
	status := "LIST OF TRANSACTIONS FOR EACH SESSION:\n" +
		"---TRANSACTION 16894, ACTIVE 0 sec starting index read\nmysql tables in use 1, locked 1\n" +
		"LOCK WAIT 2 lock struct(s), heap size 1128, 1 row lock(s)\n" +
		"MySQL thread id 620, OS thread handle 1, query id 3 127.0.0.1 root updating\n" +
		"---TRANSACTION 16893, ACTIVE 1 sec\n2 lock struct(s), heap size 1128, 1 row lock(s)\n" +
		"MySQL thread id 6201, OS thread handle 2, query id 4 127.0.0.1 root\n--------\nFILE I/O\n"
	for id, want := range map[int64]bool{620: true, 6201: false, 62: false, 7: false} {
		if got := innoDBWaits(status, id); got != want {
			t.Errorf("thread %d: waits %v, want %v", id, got, want)
		}
	}
}

// MySQL and MariaDB name a wait for a table's metadata lock and one for a
// user lock (GET_LOCK) in the process list, not in InnoDB's report: the
// session queued behind either waits, says LockWait, and no longer once
// the lock goes.
func TestLockWaitSeesMySQLMetadataAndUserLocks(t *testing.T) {
	db := open(t, MySQL, Options{})
	tb := table(t, db, "id INT PRIMARY KEY")
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
	holder, waiter := conns[0], conns[1]
	id, err := SessionID(ctx, MySQL, waiter)
	if err != nil {
		t.Fatal(err)
	}
	ask := func() bool {
		var w bool
		if err := db.Admin(ctx, func(ctx context.Context, q Querier) error {
			w, err = LockWait(ctx, MySQL, q, id)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return w
	}
	lockName := tb + "_user_lock" // the table's random name keeps it the test's own
	for _, kind := range []struct {
		name          string
		hold, release string
		wait          string // the waiter's statement, queued behind hold
		after         string // what the waiter undoes once it got through
	}{
		{name: "metadata", hold: "LOCK TABLES " + tb + " WRITE", release: "UNLOCK TABLES", wait: "SELECT COUNT(*) FROM " + tb},
		{name: "user", hold: "SELECT GET_LOCK('" + lockName + "', 60)", release: "SELECT RELEASE_LOCK('" + lockName + "')",
			wait: "SELECT GET_LOCK('" + lockName + "', 60)", after: "SELECT RELEASE_LOCK('" + lockName + "')"},
	} {
		t.Run(kind.name, func(t *testing.T) {
			if _, _, err := holder.Exec(ctx, kind.hold); err != nil {
				t.Fatal(err)
			}
			released := false
			release := func() {
				if !released {
					released = true
					if _, _, err := holder.Exec(ctx, kind.release); err != nil {
						t.Error(err)
					}
				}
			}
			defer release()
			done := make(chan error, 1)
			go func() {
				var n int64
				err := waiter.QueryRow(ctx, kind.wait).Scan(&n)
				if err == nil && kind.after != "" {
					_, _, err = waiter.Exec(ctx, kind.after)
				}
				done <- err
			}()
			deadline := time.Now().Add(10 * time.Second)
			for !ask() {
				if time.Now().After(deadline) {
					release()
					<-done
					t.Fatalf("the session queued behind a %s lock never showed as waiting", kind.name)
				}
				time.Sleep(time.Millisecond)
			}
			release()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if ask() {
				t.Errorf("the %s lock went, and the session still waits, says LockWait", kind.name)
			}
		})
	}
}
