package mysqlstore

import (
	"context"
	"database/sql/driver"
	"errors"

	"github.com/go-sql-driver/mysql"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/runner"
)

// DefaultDSN is the server racetest talks to when --mysql-dsn and
// RACETEST_MYSQL_DSN are both empty.
const DefaultDSN = sqldb.DefaultMySQLDSN

// isBadConn reports whether err left the connection unusable, so that the
// session must take a fresh one before its next attempt.
func isBadConn(err error) bool {
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, runner.ErrTimeout)
}
