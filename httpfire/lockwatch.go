package httpfire

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/racetest/racetest/internal/sqldb"
)

// A server that answers a burst's requests one at a time has one worker,
// or holds one lock around the whole request: in its process (a guard that
// fails with two replicas) or in the database (a guard that holds with
// any). From the HTTP side the three look alike. The database itself can
// tell the last apart: while the burst is in flight, one of its sessions
// waits on a lock. lockWatch asks it, on a connection of its own to the
// database the run's SQL checks read.
//
// PostgreSQL: pg_stat_activity lists each session waiting on a heavyweight
// lock (row, tuple, transaction id, advisory, table) with wait_event_type
// 'Lock'; it is live, so it is polled while the burst is in flight, and a
// wait shorter than the poll interval can be missed (the burst then stays
// served one at a time, never the other way round). MySQL and MariaDB:
// Innodb_row_lock_waits counts every row lock wait the server began, read
// before and after the burst, so no row lock wait is missed; table,
// metadata and user locks (GET_LOCK) are seen in the process list,
// polled. Either counts the database's sessions, not only the service's:
// another client's wait in the same moment is taken for the service's.
type lockWatch struct {
	dialect sqldb.Dialect
	pgCfg   *pgx.ConnConfig
	myCfg   *mysql.Config
	where   string // "host:port/db", for the report

	pg *pgx.Conn
	my *sql.DB
	// cur is the burst being watched: the polls share the one connection,
	// so a watch started ends the one before it, if the run left it open.
	cur *burstWatch
}

// lockPoll is the pause between two polls of the live lock tables.
const lockPoll = time.Millisecond

// The questions lockWatch asks. pgWaiting counts the sessions of the
// connection's database waiting on a lock; myWaiting the sessions waiting
// on a table, metadata or user lock; myRowWaits reads the counter of row
// lock waits.
const (
	pgWaiting  = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'"
	myWaiting  = "SELECT COUNT(*) FROM information_schema.processlist WHERE id <> CONNECTION_ID() AND (state LIKE 'Waiting for %lock%' OR state = 'User lock')"
	myRowWaits = "SHOW GLOBAL STATUS LIKE 'Innodb_row_lock_waits'"
)

// newLockWatch is the watch on the database of the first SQL check among
// checks (effects, invariants, auto), or nil when none reads SQL.
func newLockWatch(auto *autoCheck, checks ...effectsCheck) *lockWatch {
	if auto != nil {
		switch {
		case auto.pg != nil:
			return &lockWatch{dialect: sqldb.Postgres, pgCfg: auto.pg, where: fmt.Sprintf("%s:%d/%s", auto.pg.Host, auto.pg.Port, auto.pg.Database)}
		case auto.my != nil:
			return &lockWatch{dialect: sqldb.MySQL, myCfg: auto.my, where: auto.my.Addr + "/" + auto.my.DBName}
		}
	}
	for _, c := range checks {
		switch c := c.(type) {
		case *pgCheck:
			return &lockWatch{dialect: sqldb.Postgres, pgCfg: c.cfg, where: fmt.Sprintf("%s:%d/%s", c.cfg.Host, c.cfg.Port, c.cfg.Database)}
		case *mysqlCheck:
			return &lockWatch{dialect: sqldb.MySQL, myCfg: c.cfg, where: c.cfg.Addr + "/" + c.cfg.DBName}
		}
	}
	return nil
}

// open connects the watch. A database that answers the checks but not
// these questions (no right to read the process list or the status) makes
// the watch fail at its first burst, not the run: open only connects.
func (w *lockWatch) open(ctx context.Context) error {
	if w.dialect == sqldb.Postgres {
		conn, err := pgx.ConnectConfig(ctx, w.pgCfg.Copy())
		if err != nil {
			return fmt.Errorf("watching %s for lock waits: %w", w.where, err)
		}
		w.pg = conn
		return nil
	}
	conn, err := mysql.NewConnector(w.myCfg.Clone())
	if err != nil {
		return err
	}
	w.my = sql.OpenDB(conn)
	w.my.SetMaxOpenConns(1)
	if err := w.my.PingContext(ctx); err != nil {
		return fmt.Errorf("watching %s for lock waits: %w", w.where, err)
	}
	return nil
}

func (w *lockWatch) close() {
	if w.cur != nil {
		_, _ = w.cur.end(context.Background())
	}
	if w.pg != nil {
		_ = w.pg.Close(context.Background())
	}
	if w.my != nil {
		_ = w.my.Close()
	}
}

// burstWatch is one burst's watch: started before the burst's requests
// leave, ended once they are answered.
type burstWatch struct {
	w     *lockWatch
	stop  chan struct{}
	done  chan struct{}
	rows0 int64 // Innodb_row_lock_waits at the start (MySQL)

	once   sync.Once
	waited bool
	err    error
}

// askTimeout bounds one question to the database. A question is never
// cancelled half-way (pgx closes a connection whose query is cancelled):
// the watch stops between two.
const askTimeout = 5 * time.Second

// start begins watching until end, or until ctx ends. A failure to ask is
// kept for the end: the burst is then not known to have waited.
func (w *lockWatch) start(ctx context.Context) *burstWatch {
	if w.cur != nil {
		_, _ = w.cur.end(ctx)
	}
	bw := &burstWatch{w: w, stop: make(chan struct{}), done: make(chan struct{})}
	if err := w.reopen(ctx); err != nil {
		bw.err = err
		close(bw.done)
		w.cur = bw
		return bw
	}
	if w.dialect == sqldb.MySQL {
		bw.rows0, bw.err = w.rowWaits(ctx)
	}
	go bw.poll(ctx)
	w.cur = bw
	return bw
}

// reopen connects again after a connection was lost (a server restarted).
func (w *lockWatch) reopen(ctx context.Context) error {
	if w.pg != nil && w.pg.IsClosed() {
		w.pg = nil
		return w.open(ctx)
	}
	return nil
}

// poll asks the live lock tables until a wait is seen or the watch ends.
func (bw *burstWatch) poll(ctx context.Context) {
	defer close(bw.done)
	q := myWaiting
	if bw.w.dialect == sqldb.Postgres {
		q = pgWaiting
	}
	t := time.NewTicker(lockPoll)
	defer t.Stop()
	for {
		n, err := bw.w.ask(ctx, q)
		if err != nil {
			bw.err = err
			return
		}
		if n > 0 {
			bw.waited = true
			return
		}
		select {
		case <-bw.stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ask runs one counting question, bounded by askTimeout but not cancelled
// with ctx.
func (w *lockWatch) ask(ctx context.Context, q string) (int64, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), askTimeout)
	defer cancel()
	var n int64
	var err error
	if w.dialect == sqldb.Postgres {
		err = w.pg.QueryRow(ctx, q).Scan(&n)
	} else {
		err = w.my.QueryRowContext(ctx, q).Scan(&n)
	}
	return n, err
}

// end stops the watch (once) and reports whether a session waited on a
// lock during it, and an error when the database could not be asked.
func (bw *burstWatch) end(ctx context.Context) (bool, error) {
	bw.once.Do(func() {
		close(bw.stop)
		<-bw.done
		if bw.w.cur == bw {
			bw.w.cur = nil
		}
		if bw.w.dialect != sqldb.MySQL || bw.err != nil || bw.waited {
			return
		}
		// A row lock wait the polls missed is in the counter.
		rows1, err := bw.w.rowWaits(ctx)
		if err != nil {
			bw.err = err
			return
		}
		bw.waited = rows1 > bw.rows0
	})
	if bw.err != nil {
		return false, fmt.Errorf("watching %s for lock waits: %w", bw.w.where, bw.err)
	}
	return bw.waited, nil
}

// rowWaits reads MySQL's and MariaDB's count of row lock waits.
func (w *lockWatch) rowWaits(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), askTimeout)
	defer cancel()
	var name, v string
	if err := w.my.QueryRowContext(ctx, myRowWaits).Scan(&name, &v); err != nil {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}
