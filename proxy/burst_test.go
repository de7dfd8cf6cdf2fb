package proxy

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// conns takes n connections of db (a warm pool).
func conns(t *testing.T, ctx context.Context, db *sql.DB, n int) []*sql.Conn {
	t.Helper()
	out := make([]*sql.Conn, n)
	for i := range out {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		out[i] = c
	}
	return out
}

// A burst of two where only one request comes: its write is held until
// the burst's timeout, then goes on, and the burst is untested.
func TestBurstTimeout(t *testing.T) {
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			f := start(t, srv, Config{})
			tb := f.table("t", "(id INT)")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c := conns(t, ctx, f.open(2), 1)[0]
			const timeout = 700 * time.Millisecond
			id, err := f.p.Begin(BurstSpec{Attempts: 2, Timeout: timeout})
			if err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			if _, err := c.ExecContext(ctx, srv.bind("INSERT INTO "+tb+" VALUES ($1)"), 1); err != nil {
				t.Fatal(err)
			}
			if took := time.Since(began); took < timeout {
				t.Errorf("the held insert came back after %s, before the timeout %s", took, timeout)
			}
			a, err := f.p.End(id)
			if err != nil {
				t.Fatal(err)
			}
			if a.Reason != ReleasedTimeout || !a.Untested || a.Met != 1 || a.Held != 1 || a.Released < timeout {
				t.Fatalf("account: %s (reason %q, met %d, released %s); want released by the timeout, untested", accountText(a), a.Reason, a.Met, a.Released)
			}
			if !strings.Contains(a.Why, "1 of 2") {
				t.Errorf("why: %q, want it to say 1 of 2 reached the hold point", a.Why)
			}
			if n := f.count("SELECT count(*) FROM " + tb); n != 1 {
				t.Errorf("rows: %d, want 1 (the held insert ran after its release)", n)
			}
		})
	}
}

// Without reports, a request that only reads finishes, its connection
// stays quiet, and the other's held write goes on: released because the
// others are idle, and untested (only one met).
func TestBurstOthersIdle(t *testing.T) {
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			f := start(t, srv, Config{Settle: 150 * time.Millisecond})
			tb := f.table("t", "(id INT)")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cs := conns(t, ctx, f.open(2), 2)
			id, err := f.p.Begin(BurstSpec{Attempts: 2, Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			var n int
			if err := cs[1].QueryRowContext(ctx, "SELECT count(*) FROM "+tb).Scan(&n); err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			if _, err := cs[0].ExecContext(ctx, srv.bind("INSERT INTO "+tb+" VALUES ($1)"), 1); err != nil {
				t.Fatal(err)
			}
			a, err := f.p.End(id)
			if err != nil {
				t.Fatal(err)
			}
			if a.Reason != ReleasedOthersIdle || !a.Untested || a.Met != 1 || len(a.Conns) != 2 {
				t.Fatalf("account: %s; want released as others idle, 1 met, untested", accountText(a))
			}
			if took := time.Since(began); took > 50*time.Second {
				t.Errorf("the held insert waited %s", took)
			}
			states := map[string]bool{}
			for _, c := range a.Conns {
				states[c.AtRelease] = true
			}
			if !states["held"] || !states["idle"] {
				t.Errorf("states at release: %v, want one held and one idle", states)
			}
		})
	}
}

// lockTablesReady waits until the proxy's own connection for lock
// tables is up.
func lockTablesReady(t *testing.T, f *fixture) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		f.p.mu.Lock()
		ready, db := f.p.probeReady, f.p.probeDB
		f.p.mu.Unlock()
		if ready {
			if db == nil {
				t.Fatalf("the proxy could not read lock tables: %v", f.p.probeErr)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the proxy's connection for lock tables never came up")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A request that waits on a lock at the server (a table another session
// locked) lets the other's held write go: the server's lock tables say
// it waits, so holding longer could only wait for the timeout.
func TestBurstLockWait(t *testing.T) {
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			f := start(t, srv, Config{})
			tb := f.table("t", "(id INT)")
			locked := f.table("locked", "(id INT)")
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			lockTablesReady(t, f)
			// Another session, not through the proxy, locks the table.
			lockConn, err := f.direct.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer lockConn.Close()
			unlock := "COMMIT"
			if srv.pg {
				if _, err := lockConn.ExecContext(ctx, "BEGIN"); err != nil {
					t.Fatal(err)
				}
				if _, err := lockConn.ExecContext(ctx, "LOCK TABLE "+locked+" IN ACCESS EXCLUSIVE MODE"); err != nil {
					t.Fatal(err)
				}
			} else {
				if _, err := lockConn.ExecContext(ctx, "LOCK TABLES "+locked+" WRITE"); err != nil {
					t.Fatal(err)
				}
				unlock = "UNLOCK TABLES"
			}
			unlocked := false
			defer func() {
				if !unlocked {
					lockConn.ExecContext(ctx, unlock)
				}
			}()
			cs := conns(t, ctx, f.open(2), 2)
			for _, reports := range []bool{false, true} {
				id, err := f.p.Begin(BurstSpec{Attempts: 2, Timeout: 20 * time.Second, Settle: time.Minute, Reports: reports})
				if err != nil {
					t.Fatal(err)
				}
				readDone := make(chan error, 1)
				go func() {
					var n int
					readDone <- cs[1].QueryRowContext(ctx, "SELECT count(*) FROM "+locked).Scan(&n)
				}()
				// The read waits on the lock well before the write comes:
				// the lock tables must be read when the write is held, not
				// only as the read is sent.
				time.Sleep(200 * time.Millisecond)
				if _, err := cs[0].ExecContext(ctx, srv.bind("INSERT INTO "+tb+" VALUES ($1)"), 1); err != nil {
					t.Fatal(err)
				}
				select {
				case err := <-readDone:
					t.Fatalf("the read of the locked table finished (%v) while the table was locked", err)
				default:
				}
				if reports {
					// The lock is let go only now: the read then finishes.
					if _, err := lockConn.ExecContext(ctx, unlock); err != nil {
						t.Fatal(err)
					}
					unlocked = true
				}
				a, err := f.p.End(id)
				if err != nil {
					t.Fatal(err)
				}
				if a.Reason != ReleasedLockWait || a.LockWaits != "server lock tables" {
					t.Fatalf("reports %v: account: %s (lock waits: %s); want released for a lock wait read at the server", reports, accountText(a), a.LockWaits)
				}
				waited := false
				for _, c := range a.Conns {
					waited = waited || c.AtRelease == "lock wait"
				}
				if !waited {
					t.Errorf("reports %v: no connection was waiting on a lock at release:\n%s", reports, accountText(a))
				}
				if !reports {
					// The read is still blocked; end it before the next round.
					if _, err := lockConn.ExecContext(ctx, unlock); err != nil {
						t.Fatal(err)
					}
				}
				if err := <-readDone; err != nil {
					t.Fatal(err)
				}
				if !reports {
					// Locked again only once the read is done: locked before,
					// on a loaded machine, the read could still be on its way
					// and wait for the next round's lock, which this round
					// never lets go (1 run of 4 hung at load 8).
					if srv.pg {
						if _, err := lockConn.ExecContext(ctx, "BEGIN"); err != nil {
							t.Fatal(err)
						}
						if _, err := lockConn.ExecContext(ctx, "LOCK TABLE "+locked+" IN ACCESS EXCLUSIVE MODE"); err != nil {
							t.Fatal(err)
						}
					} else if _, err := lockConn.ExecContext(ctx, "LOCK TABLES "+locked+" WRITE"); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}

// A statement that runs a while before it blocks on a lock is probed
// while it runs ("not waiting"), and again once it waits: an answer of
// "not waiting" stands only for reprobe. Kept until the connection next
// spoke, it hid the wait, and the burst ran to its timeout untested.
func TestBurstLockWaitAfterRunning(t *testing.T) {
	srv := servers[0]
	if !srv.pg {
		t.Fatal("servers[0] is not PostgreSQL")
	}
	f := start(t, srv, Config{})
	tb := f.table("t", "(id INT)")
	locked := f.table("locked", "(id INT)")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lockTablesReady(t, f)
	lockConn, err := f.direct.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lockConn.Close()
	for _, q := range []string{"BEGIN", "LOCK TABLE " + locked + " IN ACCESS EXCLUSIVE MODE"} {
		if _, err := lockConn.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	unlocked := false
	defer func() {
		if !unlocked {
			lockConn.ExecContext(ctx, "COMMIT")
		}
	}()
	cs := conns(t, ctx, f.open(2), 2)
	id, err := f.p.Begin(BurstSpec{Attempts: 2, Timeout: 20 * time.Second, Settle: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	f.p.mu.Lock()
	probes := f.p.probes
	f.p.mu.Unlock()
	readDone := make(chan error, 1)
	go func() {
		// One message, two reads: a few hundred milliseconds of running,
		// then a wait on the lock.
		_, err := cs[1].ExecContext(ctx, "WITH RECURSIVE s AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM s WHERE n < 1000000) SELECT count(*) FROM s; SELECT count(*) FROM "+locked)
		readDone <- err
	}()
	time.Sleep(50 * time.Millisecond)
	began := time.Now()
	if _, err := cs[0].ExecContext(ctx, srv.bind("INSERT INTO "+tb+" VALUES ($1)"), 1); err != nil {
		t.Fatal(err)
	}
	held := time.Since(began)
	if _, err := lockConn.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	unlocked = true
	if err := <-readDone; err != nil {
		t.Fatal(err)
	}
	a, err := f.p.End(id)
	if err != nil {
		t.Fatal(err)
	}
	if a.Reason != ReleasedLockWait {
		t.Fatalf("held %s; account: %s (lock waits: %s); want released for the read's lock wait, seen once it began", held.Round(time.Millisecond), accountText(a), a.LockWaits)
	}
	// Asked again at the burst's pace (a tick of at most 50 ms, an answer
	// standing reprobe), not as fast as the server answers: a few probes
	// over the read's few hundred milliseconds, not hundreds.
	f.p.mu.Lock()
	probes = f.p.probes - probes
	f.p.mu.Unlock()
	if limit := int(held/(5*time.Millisecond)) + 5; probes < 1 || probes > limit {
		t.Errorf("%d lock probes in %s held: want 1 to %d, at most one every 5 ms", probes, held.Round(time.Millisecond), limit)
	}
}

// Where the server's lock tables can be read, a statement that is slow
// but waits on no lock (a long read) is not a lock wait, however long it
// goes unanswered: the other request's held write waits for it to
// finish, then goes as the others are idle. Only where the tables cannot
// be read does an unanswered statement count as a lock wait after
// LockQuiet.
func TestBurstSlowReadIsNotALockWait(t *testing.T) {
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			f := start(t, srv, Config{LockQuiet: 20 * time.Millisecond})
			tb := f.table("t", "(id INT)")
			lockTablesReady(t, f)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cs := conns(t, ctx, f.open(2), 2)
			if !srv.pg {
				if _, err := cs[1].ExecContext(ctx, "SET SESSION max_recursive_iterations = 100000000"); err != nil {
					t.Fatal(err)
				}
			}
			id, err := f.p.Begin(BurstSpec{Attempts: 2, Timeout: time.Minute, Settle: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			readDone := make(chan error, 1)
			go func() {
				var n int
				// A read a few hundred milliseconds long.
				readDone <- cs[1].QueryRowContext(ctx, "WITH RECURSIVE s AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM s WHERE n < 1000000) SELECT count(*) FROM s").Scan(&n)
			}()
			time.Sleep(50 * time.Millisecond)
			if _, err := cs[0].ExecContext(ctx, srv.bind("INSERT INTO "+tb+" VALUES ($1)"), 1); err != nil {
				t.Fatal(err)
			}
			a, err := f.p.End(id)
			if err != nil {
				t.Fatal(err)
			}
			if err := <-readDone; err != nil {
				t.Fatal(err)
			}
			if a.Reason != ReleasedOthersIdle || a.LockWaits != "server lock tables" {
				t.Fatalf("account: %s (lock waits: %s); want the write held until the slow read finished, released as the others were idle", accountText(a), a.LockWaits)
			}
		})
	}
}

// A burst no statement reaches says so, and is untested; so is one
// whose requests only read.
func TestBurstNoStatement(t *testing.T) {
	f := start(t, servers[0], Config{})
	id, err := f.p.Begin(BurstSpec{Attempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	a, err := f.p.End(id)
	if err != nil {
		t.Fatal(err)
	}
	if !a.NoStatement || !a.Untested || !strings.Contains(a.Summary(), "no statement reached the proxy") {
		t.Fatalf("account: %+v; want no statement, untested", a)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := f.open(1)
	id, err = f.p.Begin(BurstSpec{Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	a, err = f.p.End(id)
	if err != nil {
		t.Fatal(err)
	}
	if a.NoStatement || !a.Untested || a.Held != 0 || len(a.Conns) != 1 {
		t.Fatalf("account of a read-only burst: %s; want one connection, nothing held, untested", accountText(a))
	}
}

// Closing the proxy (Ctrl-C) lets a held statement go: its request
// returns rather than hanging until the burst's timeout.
func TestCloseReleases(t *testing.T) {
	f := start(t, servers[0], Config{})
	tb := f.table("t", "(id INT)")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := conns(t, ctx, f.open(1), 1)[0]
	if _, err := f.p.Begin(BurstSpec{Attempts: 2, Timeout: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.ExecContext(ctx, "INSERT INTO "+tb+" VALUES (1)")
		done <- err
	}()
	// Wait until the insert is held.
	for {
		f.p.mu.Lock()
		n := len(f.p.burst.held)
		f.p.mu.Unlock()
		if n == 1 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the insert returned (%v) without being held", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	f.p.Close()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the held insert did not return after Close")
	}
}

// The bursts below run on a fakePG, which answers at once and tells the
// transaction status exactly: what they test is the burst's bookkeeping
// (when the held statements go, what the account says), not a server.

// Bursts are numbered from 1 in the order they began. A burst whose end
// never came (its caller died) stops blocking the next one once twice
// its timeout and a minute have passed; before that it is active.
func TestBurstStaleIsDropped(t *testing.T) {
	p, _ := startFake(t, Config{})
	c := dialFake(t, p)
	const timeout = 20 * time.Second
	id, err := p.Begin(BurstSpec{Attempts: 2, Timeout: timeout, Settle: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if id != 1 {
		t.Errorf("the first burst is %d, want 1", id)
	}
	done := c.send("INSERT INTO t VALUES (1)")
	if !pending(done, 100*time.Millisecond) {
		t.Fatal("the write went on alone, want it held")
	}
	// The burst began this long ago (a clock moved on by hand).
	begunAgo := func(d time.Duration) {
		p.mu.Lock()
		p.burst.began = time.Now().Add(-d)
		p.mu.Unlock()
	}
	stale := 2*timeout + time.Minute
	begunAgo(stale - 5*time.Second)
	if _, err := p.Begin(BurstSpec{Attempts: 2}); !errors.Is(err, ErrBurstActive) {
		t.Fatalf("Begin while a burst begun %s ago (timeout %s) is active: %v, want ErrBurstActive", stale-5*time.Second, timeout, err)
	}
	begunAgo(stale + 5*time.Second)
	next, err := p.Begin(BurstSpec{Attempts: 2})
	if err != nil {
		t.Fatalf("Begin after a burst begun %s ago (timeout %s) was left: %v, want it dropped", stale+5*time.Second, timeout, err)
	}
	if next != 2 {
		t.Errorf("the second burst is %d, want 2", next)
	}
	within(t, "the write held by the dropped burst", done, 20*time.Second)
	if _, err := p.End(id); !errors.Is(err, ErrNoBurst) {
		t.Errorf("End of the dropped burst: %v, want ErrNoBurst", err)
	}
	if _, err := p.End(next); err != nil {
		t.Errorf("End of the burst begun after it: %v", err)
	}
}

// A burst that gives no timeout holds for DefaultBurstTimeout, and one
// that gives its own is held that long and no longer; the account's Why
// names the timeout that released it.
func TestBurstTimeoutDefault(t *testing.T) {
	p, _ := startFake(t, Config{})
	c := dialFake(t, p)
	id, err := p.Begin(BurstSpec{Attempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	done := c.send("INSERT INTO t VALUES (1)")
	if !pending(done, 300*time.Millisecond) {
		t.Fatal("a burst without a timeout let its only held write go at once, want it held up to DefaultBurstTimeout")
	}
	a, err := p.End(id)
	if err != nil {
		t.Fatal(err)
	}
	within(t, "the write held until End", done, 20*time.Second)
	if a.Reason != ReleasedEnded || a.Held != 1 || !a.Untested {
		t.Errorf("account: %s; want the write held until the end, untested", accountText(a))
	}

	const timeout = 200 * time.Millisecond
	id, err = p.Begin(BurstSpec{Attempts: 2, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	within(t, "the write of a burst with a 200ms timeout", c.send("INSERT INTO t VALUES (2)"), 5*time.Second)
	if a, err = p.End(id); err != nil {
		t.Fatal(err)
	}
	if a.Reason != ReleasedTimeout || a.Released < timeout || !a.Untested || !strings.Contains(a.Summary(), "untested, only 1 of 2 requests reached the hold point before the timeout (200ms)") {
		t.Errorf("account: %s; want released by its own timeout of 200ms, untested", accountText(a))
	}
}

// A burst that gives no settle period uses the proxy's; one that gives
// its own uses that, however short (a nanosecond: a connection with
// nothing in flight counts as finished at once).
func TestBurstSettle(t *testing.T) {
	p, _ := startFake(t, Config{Settle: time.Minute})
	reader, writer := dialFake(t, p), dialFake(t, p)
	id, err := p.Begin(BurstSpec{Attempts: 2, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	reader.exec("SELECT 1")
	done := writer.send("INSERT INTO t VALUES (1)")
	if !pending(done, 300*time.Millisecond) {
		t.Fatal("the write went on 300ms after the other request's read, want it held for the proxy's settle of a minute")
	}
	a, err := p.End(id)
	if err != nil {
		t.Fatal(err)
	}
	within(t, "the write held until End", done, 20*time.Second)
	if a.Reason != ReleasedEnded {
		t.Errorf("account: %s; want held until the end", accountText(a))
	}

	for _, settle := range []time.Duration{100 * time.Millisecond, time.Nanosecond} {
		id, err := p.Begin(BurstSpec{Attempts: 2, Timeout: time.Minute, Settle: settle})
		if err != nil {
			t.Fatal(err)
		}
		began := time.Now() // before the read: its quiet starts after
		reader.exec("SELECT 1")
		within(t, "the write of a burst whose other request only read", writer.send("INSERT INTO t VALUES (2)"), 20*time.Second)
		took := time.Since(began)
		a, err := p.End(id)
		if err != nil {
			t.Fatal(err)
		}
		if a.Reason != ReleasedOthersIdle || a.Met != 1 || !a.Untested || took < settle {
			t.Errorf("settle %s: account: %s (the write waited %s); want released once the reader was quiet for the burst's settle", settle, accountText(a), took)
		}
	}
}

// A write that comes after the burst's other request finished (its
// connection quiet past the settle period) goes on at once, and the
// account still counts it: one held, alone, untested for that reason,
// not "no request reached a statement that writes". Before anything is
// held the burst has nothing to release, however quiet its connections.
func TestBurstLateWriteIsCounted(t *testing.T) {
	p, _ := startFake(t, Config{})
	cs := []*fakeClient{dialFake(t, p), dialFake(t, p)}
	id, err := p.Begin(BurstSpec{Attempts: 2, Timeout: time.Minute, Settle: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		c.exec("SELECT 1")
	}
	time.Sleep(200 * time.Millisecond)
	within(t, "the late write", cs[0].send("INSERT INTO t VALUES (1)"), 20*time.Second)
	a, err := p.End(id)
	if err != nil {
		t.Fatal(err)
	}
	if a.Reason != ReleasedOthersIdle || a.Held != 1 || a.Met != 1 || !a.Untested || !strings.Contains(a.Why, "only 1 request reached the hold point") {
		t.Errorf("account: %s; want the late write held alone and released as the other was idle", accountText(a))
	}
}

// The account groups each connection's statements by transaction (a
// statement in autocommit is one of its own) and says which were inside
// BEGIN … COMMIT; the held statements go on the moment the last request
// reaches its hold point, and the account's Released is that moment.
func TestBurstAccount(t *testing.T) {
	p, _ := startFake(t, Config{})
	tx, auto := dialFake(t, p), dialFake(t, p)
	id, err := p.Begin(BurstSpec{Attempts: 2, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	tx.exec("SELECT 1")
	tx.exec("BEGIN")
	tx.exec("SELECT n FROM t")
	update := tx.send("UPDATE t SET n = 1")
	if !pending(update, 100*time.Millisecond) {
		t.Fatal("the update went on before the other request came")
	}
	within(t, "the insert", auto.send("INSERT INTO t VALUES (1)"), 20*time.Second)
	within(t, "the update", update, 20*time.Second)
	tx.exec("COMMIT")
	tx.exec("SELECT 2")
	a, err := p.End(id)
	if err != nil {
		t.Fatal(err)
	}
	if a.Reason != ReleasedAllMet || a.Met != 2 || a.Held != 2 || a.Untested || !strings.Contains(a.Summary(), "2 of 2 met") {
		t.Fatalf("account: %s; want both held and met", accountText(a))
	}
	type txn struct {
		explicit bool
		stmts    string
	}
	var got [][]txn
	for _, c := range a.Conns {
		var ts []txn
		for _, t := range c.Transactions {
			var s []string
			for _, st := range t.Statements {
				if st.Held {
					st.Text += " [held]"
				}
				s = append(s, st.Text)
			}
			ts = append(ts, txn{t.Explicit, strings.Join(s, "; ")})
		}
		got = append(got, ts)
	}
	want := [][]txn{
		{{false, "SELECT $1"}, {true, "BEGIN; SELECT n FROM t; UPDATE t SET n = $1 [held]; COMMIT"}, {false, "SELECT $1"}},
		{{false, "INSERT INTO t VALUES ($1) [held]"}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("transactions:\n got %v\nwant %v\naccount: %s", got, want, accountText(a))
	}
	last := a.Conns[1].Transactions[0].Statements[0].At
	if a.Released != last {
		t.Errorf("released at %s, want at %s, when the last request reached its hold point", a.Released, last)
	}
}

// A request quiet inside an open transaction (between its read and its
// write) has not finished, however long the quiet: the other request's
// held write waits for it, and both meet.
func TestBurstOpenTransactionIsNotIdle(t *testing.T) {
	p, _ := startFake(t, Config{})
	tx, auto := dialFake(t, p), dialFake(t, p)
	id, err := p.Begin(BurstSpec{Attempts: 2, Timeout: time.Minute, Settle: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	tx.exec("BEGIN")
	tx.exec("SELECT n FROM t")
	insert := auto.send("INSERT INTO t VALUES (1)")
	if !pending(insert, 300*time.Millisecond) {
		t.Fatal("the insert went on while the other request was quiet inside its transaction, want it held")
	}
	within(t, "the update", tx.send("UPDATE t SET n = 1"), 20*time.Second)
	within(t, "the insert", insert, 20*time.Second)
	tx.exec("COMMIT")
	a, err := p.End(id)
	if err != nil {
		t.Fatal(err)
	}
	if a.Reason != ReleasedAllMet || a.Met != 2 || a.Untested {
		t.Errorf("account: %s; want both held and met", accountText(a))
	}
}

// Where the server's lock tables are not read, a statement unanswered
// for LockQuiet counts as waiting on a lock, and lets the other's held
// write go; the account says how lock waits were told.
func TestBurstLockWaitByQuiet(t *testing.T) {
	const quiet = 100 * time.Millisecond
	p, f := startFake(t, Config{LockQuiet: quiet})
	waiter, writer := dialFake(t, p), dialFake(t, p)
	id, err := p.Begin(BurstSpec{Attempts: 2, Timeout: time.Minute, Settle: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	waiting := waiter.send("SELECT n FROM locked")
	within(t, "the write", writer.send("INSERT INTO t VALUES (1)"), 20*time.Second)
	f.release()
	within(t, "the statement that waited", waiting, 20*time.Second)
	a, err := p.End(id)
	if err != nil {
		t.Fatal(err)
	}
	var w *ConnAccount
	for i, c := range a.Conns {
		if c.Conn == 1 { // the waiter, dialled first
			w = &a.Conns[i]
		}
	}
	if a.Reason != ReleasedLockWait || a.LockWaits != "quiet for 100ms (lock tables not read)" || w == nil || w.AtRelease != "lock wait" {
		t.Fatalf("account: %s (lock waits: %s); want released for the other's lock wait, told by quiet", accountText(a), a.LockWaits)
	}
	if since := a.Released - w.Transactions[0].Statements[0].At; since < quiet {
		t.Errorf("released %s after the other's statement, want at least LockQuiet (%s) of quiet", since, quiet)
	}
}

// The account lists the connections in the order of their first
// statement; those that only prepared one come last, in the order they
// joined.
func TestBurstAccountOrder(t *testing.T) {
	p, _ := startFake(t, Config{})
	first, second, writer := dialFake(t, p), dialFake(t, p), dialFake(t, p)
	id, err := p.Begin(BurstSpec{Attempts: 1, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	first.prepare("SELECT n FROM t")
	second.prepare("SELECT n FROM t")
	writer.exec("INSERT INTO t VALUES (1)")
	a, err := p.End(id)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, c := range a.Conns {
		got = append(got, c.Conn)
	}
	if fmt.Sprint(got) != "[3 1 2]" {
		t.Errorf("connections in the order %v, want [3 1 2] (the writer, then the two that only prepared, as they came)\naccount: %s", got, accountText(a))
	}
}
