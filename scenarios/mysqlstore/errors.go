package mysqlstore

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/go-sql-driver/mysql"

	"github.com/racetest/racetest/runner"
)

// Server error numbers racetest reads. SQLState is often empty on errors
// raised at the handshake (1040 came back without one in 14 of 15 cases), so
// the number is what decides.
const (
	ErrDupEntry          = 1062 // ER_DUP_ENTRY: the unique key refused the row
	ErrLockDeadlock      = 1213 // ER_LOCK_DEADLOCK: InnoDB chose this transaction as the victim
	ErrCheckRead         = 1020 // ER_CHECKREAD: record changed since last read (MariaDB snapshot isolation)
	ErrLockWaitTimeout   = 1205 // ER_LOCK_WAIT_TIMEOUT
	ErrConCount          = 1040 // ER_CON_COUNT_ERROR: too many connections
	ErrTooManyUserConns  = 1203 // ER_TOO_MANY_USER_CONNECTIONS: @@max_user_connections
	ErrUserLimitReached  = 1226 // ER_USER_LIMIT_REACHED: the account's MAX_USER_CONNECTIONS
	ErrAccessDenied      = 1045 // ER_ACCESS_DENIED_ERROR
	ErrDBAccessDenied    = 1044 // ER_DBACCESS_DENIED_ERROR
	ErrBadDB             = 1049 // ER_BAD_DB_ERROR: unknown database
	ErrDataTooLong       = 1406 // ER_DATA_TOO_LONG (strict mode)
	ErrNoSuchTable       = 1146 // ER_NO_SUCH_TABLE
	ErrUnknownSystemVar  = 1193 // ER_UNKNOWN_SYSTEM_VARIABLE
	ErrUnknownStorageEng = 1286 // ER_UNKNOWN_STORAGE_ENGINE
)

// Number returns the server's error number carried by err, or 0.
func Number(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// IsDuplicate reports whether err is the unique key's refusal (1062): the
// one error that means "already done".
func IsDuplicate(err error) bool { return Number(err) == ErrDupEntry }

// IsConflict reports whether the server refused to decide and asked for a
// retry: a deadlock (1213), MariaDB's snapshot-isolation check (1020), or any
// error with SQLSTATE 40001 (serialization failure).
func IsConflict(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	return me.Number == ErrLockDeadlock || me.Number == ErrCheckRead || string(me.SQLState[:]) == "40001"
}

// Classify turns a failed statement into an attempt outcome: deadlocks and
// serialization failures are conflicts, and everything else is an error —
// never "declined". Callers decide which result means "already done" (zero
// rows affected, a duplicate key) before calling it.
func Classify(err error) runner.Outcome {
	if IsConflict(err) {
		return runner.Retry(err)
	}
	return runner.Failed(err)
}

// ClassifyInsert is Classify for an insert guarded by a unique key: only the
// duplicate-key error (1062) is a refusal.
func ClassifyInsert(err error) runner.Outcome {
	if IsDuplicate(err) {
		return runner.Refused(err)
	}
	return Classify(err)
}

// isBadConn reports whether err left the connection unusable, so that the
// session must take a fresh one before its next attempt.
func isBadConn(err error) bool {
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, runner.ErrTimeout)
}

// ConnectError is a failure to open a connection, explained in one line that
// names the server (never the password) and what to change. Err is the
// driver's error.
type ConnectError struct {
	Msg string
	Err error
}

func (e *ConnectError) Error() string { return e.Msg }
func (e *ConnectError) Unwrap() error { return e.Err }

const dsnHint = "set --mysql-dsn or RACETEST_MYSQL_DSN"

// connectError explains err, raised while connecting to the server of cfg.
// limit, when not nil, reads the server's connection limit over a connection
// that is already open (used for "too many connections"); need is how many
// connections the run needs at once (0 when unknown).
func connectError(cfg *mysql.Config, err error, limit func(variable string) string, need int) error {
	var ce *ConnectError
	if errors.As(err, &ce) {
		return err
	}
	addr := describeAddr(cfg)
	msg := ""
	switch n := Number(err); n {
	case ErrConCount:
		msg = fmt.Sprintf("mysql: %s refused a connection: too many connections (%s, shared with every other client) — run fewer --attempts, or raise it: SET GLOBAL max_connections = <n>%s",
			addr, limitText("@@max_connections", limit), needText(need))
	case ErrTooManyUserConns, ErrUserLimitReached:
		msg = fmt.Sprintf("mysql: %s refused a connection: user %q has too many connections (its account's MAX_USER_CONNECTIONS, or %s) — run fewer --attempts, or raise the limit",
			addr, cfg.User, limitText("@@max_user_connections", limit))
	case ErrAccessDenied:
		msg = fmt.Sprintf("mysql: wrong user or password for user %q at %s — %s", cfg.User, addr, dsnHint)
	case ErrDBAccessDenied:
		msg = fmt.Sprintf("mysql: user %q may not use database %q at %s — grant access or name another database; %s", cfg.User, cfg.DBName, addr, dsnHint)
	case ErrBadDB:
		msg = fmt.Sprintf("mysql: database %q does not exist at %s — create it (CREATE DATABASE `%s`) or name another; %s", cfg.DBName, addr, cfg.DBName, dsnHint)
	case 0:
		msg = fmt.Sprintf("mysql: cannot connect to %s (%s) — is the server running? %s", addr, netCause(err), dsnHint)
	default:
		msg = fmt.Sprintf("mysql: connecting to %s failed: %v — %s", addr, err, dsnHint)
	}
	return &ConnectError{Msg: msg, Err: err}
}

func needText(need int) string {
	if need <= 0 {
		return " (racetest holds one connection per attempt plus two of its own)"
	}
	return fmt.Sprintf(" (this run holds %d at once: one per attempt plus two of its own)", need)
}

func limitText(variable string, limit func(string) string) string {
	if limit == nil {
		return variable + " unknown"
	}
	return variable + " = " + limit(variable)
}

// netCause says in a few words why a connection could not be made.
func netCause(err error) string {
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &dnsErr):
		return "host not found: " + dnsErr.Name
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		return "no answer within the connect timeout"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "host unreachable"
	case errors.Is(err, mysql.ErrInvalidConn), errors.Is(err, driver.ErrBadConn):
		return "the connection was closed during the handshake"
	}
	return err.Error()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
