package sqldb

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/racetest/racetest/internal/sqldialect"
)

// SessionID reads the server's id of the session behind q: PostgreSQL's
// backend pid, MySQL's and MariaDB's connection id. LockWait asks about
// the session by it, from another connection.
func SessionID(ctx context.Context, d Dialect, q Querier) (int64, error) {
	query := sqldialect.Pick(d, "SELECT CONNECTION_ID()", "SELECT pg_backend_pid()")
	var id int64
	if err := q.QueryRow(ctx, query).Scan(&id); err != nil {
		return 0, fmt.Errorf("%s: reading the session's id: %w", d, err)
	}
	return id, nil
}

// Lock-wait questions, asked on a connection other than the session's.
// PostgreSQL: the sessions that block the backend's lock request (row and
// table locks, transaction ids, advisory locks). MySQL and MariaDB: the
// process list names a wait for a table, metadata or user lock; a row
// lock wait is in InnoDB's status report, which is read live
// (information_schema.innodb_trx is a cache that a reader polling faster
// than every 100 ms never sees refreshed).
const (
	pgLockWait    = "SELECT cardinality(pg_blocking_pids($1)) > 0"
	myOtherWait   = "SELECT COUNT(*) FROM information_schema.processlist WHERE id = ? AND (state LIKE 'Waiting for %lock%' OR state = 'User lock')"
	myInnoDBState = "SHOW ENGINE INNODB STATUS"
)

// LockWait reports whether session id (see SessionID) is waiting on a
// lock, as the server's own lock tables say, asking over q (a connection
// other than the session's, which is busy with the statement that may
// wait).
func LockWait(ctx context.Context, d Dialect, q Querier, id int64) (bool, error) {
	var waiting bool
	err := func() error {
		if postgres := sqldialect.Pick(d, false, true); postgres {
			return q.QueryRow(ctx, pgLockWait, id).Scan(&waiting)
		}
		var n int64
		if err := q.QueryRow(ctx, myOtherWait, id).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			waiting = true // a table, metadata or user lock: InnoDB's report would not name it
			return nil
		}
		var typ, name, status string
		if err := q.QueryRow(ctx, myInnoDBState).Scan(&typ, &name, &status); err != nil {
			return err
		}
		waiting = innoDBWaits(status, id)
		return nil
	}()
	if err != nil {
		return false, fmt.Errorf("%s: asking whether session %d waits on a lock: %w", d, id, err)
	}
	return waiting, nil
}

// innoDBWaits reads InnoDB's status report: whether the transaction of
// thread id is in LOCK WAIT. Each transaction's entry begins with
// "---TRANSACTION", names its thread ("MySQL thread id 42," or "MariaDB
// thread id 42,") and, while it waits, has a line "LOCK WAIT …".
func innoDBWaits(status string, id int64) bool {
	thread := regexp.MustCompile(`(?m)^(MySQL|MariaDB) thread id ` + strconv.FormatInt(id, 10) + `,`)
	for _, trx := range strings.Split(status, "---TRANSACTION ")[1:] {
		if thread.MatchString(trx) {
			return regexp.MustCompile(`(?m)^LOCK WAIT `).MatchString(trx)
		}
	}
	return false
}
