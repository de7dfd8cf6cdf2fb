package httpfire

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"text/template"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/racetest/racetest/explore"
	"github.com/racetest/racetest/internal/sqldb"
)

// A server that answers a burst's requests one at a time has one worker,
// or holds one lock around the whole request: in its process (a guard that
// fails with two replicas) or in the database (a guard that holds with
// any). From the HTTP side the three look alike. The database itself can
// tell the last apart: while the burst is in flight, a session waits on a
// lock while it holds one of the tables the run's checks read. lockWatch
// asks it, on a connection of its own, polling while the burst is in
// flight (a wait shorter than a poll is missed, and the burst then stays
// served one at a time: never the other way round).
//
// PostgreSQL: pg_locks, a session waiting on a lock (a row's transaction,
// a tuple, a table) that holds a lock on one of the checked tables, as
// every statement on a table does. MySQL and MariaDB: InnoDB's status
// report, read live, a transaction in LOCK WAIT for a lock on one of the
// checked tables of the connection's database. A lock that names no table
// (an advisory lock taken before any table, GET_LOCK) is not told from
// another client's, and is not counted; nor is a server-wide count of lock
// waits, which took every other client's wait for the service's: on a
// shared server a mutex in the service's process read as the database's
// lock (measured: every burst, with the rest of the test suite beside it).
//
// Only the checks' tables are known: a run judged by --effects auto with
// no --watch, or by checks whose tables the scanner cannot read for sure,
// is not watched.
type lockWatch struct {
	dialect sqldb.Dialect
	pgCfg   *pgx.ConnConfig
	myCfg   *mysql.Config
	where   string // "host:port/db", for the report
	// tables are the checked tables, as the scanner writes them (lower
	// case, no schema); db is MySQL's database, as the server names it.
	tables []string
	db     string

	pg *pgx.Conn
	my *sql.DB
	// cur is the burst being watched: the polls share the one connection,
	// so a watch started ends the one before it, if the run left it open.
	cur *burstWatch
}

// lockPoll is the pause between two polls of the live lock tables.
const lockPoll = 2 * time.Millisecond

// The questions lockWatch asks. pgWaiting counts the sessions waiting on a
// lock that hold a lock on one of the tables ($1); MySQL's answer is read
// from InnoDB's status report.
const (
	pgWaiting = `SELECT count(DISTINCT w.pid) FROM pg_locks w
JOIN pg_locks h ON h.pid = w.pid AND h.granted AND h.locktype = 'relation'
JOIN pg_class c ON c.oid = h.relation
WHERE NOT w.granted AND w.pid <> pg_backend_pid() AND c.relname = ANY($1)`
	myInnoDBState = "SHOW ENGINE INNODB STATUS"
	myDatabase    = "SELECT DATABASE()"
)

// newLockWatch is the watch on the database of the run's SQL checks
// (effects, invariants; auto's with --watch), or nil when none reads SQL
// or their tables cannot be read for sure.
func newLockWatch(auto *autoCheck, checks ...effectsCheck) *lockWatch {
	if auto != nil {
		var w *lockWatch
		switch {
		case auto.pg != nil:
			w = &lockWatch{dialect: sqldb.Postgres, pgCfg: auto.pg, where: fmt.Sprintf("%s:%d/%s", auto.pg.Host, auto.pg.Port, auto.pg.Database)}
		case auto.my != nil:
			w = &lockWatch{dialect: sqldb.MySQL, myCfg: auto.my, where: auto.my.Addr + "/" + auto.my.DBName}
		default:
			return nil
		}
		for _, t := range auto.watch {
			w.tables = append(w.tables, strings.ToLower(t))
		}
		if len(w.tables) == 0 {
			return nil
		}
		return w
	}
	var w *lockWatch
	for _, c := range checks {
		var d sqldb.Dialect
		var text string
		switch c := c.(type) {
		case *pgCheck:
			if w == nil {
				w = &lockWatch{dialect: sqldb.Postgres, pgCfg: c.cfg, where: fmt.Sprintf("%s:%d/%s", c.cfg.Host, c.cfg.Port, c.cfg.Database)}
			}
			d, text = sqldb.Postgres, queryText(c.query)
		case *mysqlCheck:
			if w == nil {
				w = &lockWatch{dialect: sqldb.MySQL, myCfg: c.cfg, where: c.cfg.Addr + "/" + c.cfg.DBName}
			}
			d, text = sqldb.MySQL, queryText(c.query)
		default:
			continue
		}
		if d != w.dialect {
			continue
		}
		w.tables = append(w.tables, checkedTables(d, text)...)
	}
	if w == nil || len(w.tables) == 0 {
		return nil
	}
	slices.Sort(w.tables)
	w.tables = slices.Compact(w.tables)
	return w
}

// queryText is a check's query as written, its templates as they stand
// ({{.Token}}, which the scanner reads as a value).
func queryText(q *template.Template) string { return q.Root.String() }

// checkedTables are the tables a check's query reads, as explore's scanner
// reads them on server d: none where it is not sure (then fewer tables are
// watched, and fewer waits count: never more).
func checkedTables(d sqldb.Dialect, query string) []string {
	ed := explore.Postgres
	if d == sqldb.MySQL {
		ed = explore.MySQL
	}
	var tables []string
	for _, a := range (explore.SQL{Dialect: ed, Known: func(string) bool { return true }}).Footprint(query).Accesses {
		tables = append(tables, a.Table)
	}
	return tables
}

// open connects the watch. A database that answers the checks but not
// these questions (no right to read the process list or the status) makes
// the watch fail at its first burst, not the run: open only connects.
func (w *lockWatch) open(ctx context.Context) error {
	if w.pg != nil || w.my != nil {
		return nil // Prepare ran before
	}
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
	var db sql.NullString
	if err := w.my.QueryRowContext(ctx, myDatabase).Scan(&db); err != nil {
		return fmt.Errorf("watching %s for lock waits: %w", w.where, err)
	}
	w.db = db.String
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
	w    *lockWatch
	stop chan struct{}
	done chan struct{}

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
	t := time.NewTicker(lockPoll)
	defer t.Stop()
	for {
		waiting, err := bw.w.waiting(ctx)
		if err != nil {
			bw.err = err
			return
		}
		if waiting {
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

// waiting asks once whether a session waits on a lock while it holds one
// of the checked tables, each question bounded by askTimeout but never
// cancelled with ctx.
func (w *lockWatch) waiting(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), askTimeout)
	defer cancel()
	if w.dialect == sqldb.Postgres {
		var n int64
		err := w.pg.QueryRow(ctx, pgWaiting, w.tables).Scan(&n)
		return n > 0, err
	}
	var typ, name, status string
	if err := w.my.QueryRowContext(ctx, myInnoDBState).Scan(&typ, &name, &status); err != nil {
		return false, err
	}
	return innoDBWaitsOn(status, w.db, w.tables), nil
}

// innoDBWaitsOn reads InnoDB's status report: whether a transaction is in
// LOCK WAIT for a lock on one of tables of database db. Its entry begins
// "---TRANSACTION", has a line "LOCK WAIT …" while it waits, and names the
// lock it waits for: "… index PRIMARY of table `db`.`table` …".
func innoDBWaitsOn(status, db string, tables []string) bool {
	for _, trx := range strings.Split(status, "---TRANSACTION ")[1:] {
		if !strings.Contains(trx, "\nLOCK WAIT ") {
			continue
		}
		for _, m := range innoDBTable.FindAllStringSubmatch(trx, -1) {
			if strings.EqualFold(m[1], db) && slices.Contains(tables, strings.ToLower(m[2])) {
				return true
			}
		}
	}
	return false
}

var innoDBTable = regexp.MustCompile("of table `([^`]*)`\\.`([^`]*)`")

// end stops the watch (once) and reports whether a session waited on a
// lock during it, and an error when the database could not be asked.
func (bw *burstWatch) end(context.Context) (bool, error) {
	bw.once.Do(func() {
		close(bw.stop)
		<-bw.done
		bw.w.cur = nil // start ends the watch before it before it begins one
	})
	if bw.err != nil {
		return false, fmt.Errorf("watching %s for lock waits: %w", bw.w.where, bw.err)
	}
	return bw.waited, nil
}
