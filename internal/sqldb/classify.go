package sqldb

import (
	"errors"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/racetest/racetest/runner"
)

// IsDuplicate reports whether err is a unique key's refusal (MySQL 1062,
// PostgreSQL 23505): the one error that means "already done".
func IsDuplicate(err error) bool { return mysqlDuplicate(err) || pgDuplicate(err) }

// IsConflict reports whether the server refused to decide and asked for a
// retry: a deadlock or a serialization failure (MySQL 1213 and 1020 or
// SQLSTATE 40001; PostgreSQL 40001 and 40P01).
func IsConflict(err error) bool { return mysqlConflict(err) || pgConflict(err) }

// IsDeadlock reports whether the server ended the transaction as a
// deadlock's victim (MySQL 1213, PostgreSQL 40P01): of the conflicts, the
// one explore counts apart.
func IsDeadlock(err error) bool {
	return MySQLNumber(err) == ErrLockDeadlock || PgCode(err) == CodeDeadlockDetected
}

// IsTooManyConnections reports whether the server refused a connection for
// its connection limit (MySQL 1040, 1203, 1226; PostgreSQL 53300).
func IsTooManyConnections(err error) bool {
	return mysqlTooManyConnections(err) || pgTooManyConnections(err)
}

// Classify turns a failed statement into an attempt outcome: deadlocks and
// serialization failures are conflicts, and everything else is an error (or
// unknown, on a timeout) — never "declined". Callers decide which result
// means "already done" (zero rows affected, a duplicate key) before calling
// it, or call ClassifyInsert.
func Classify(err error) runner.Outcome {
	if IsConflict(err) {
		return runner.Retry(err)
	}
	return runner.Failed(err)
}

// ClassifyInsert is Classify for an insert guarded by a unique key: the
// duplicate-key error is a refusal.
func ClassifyInsert(err error) runner.Outcome {
	if IsDuplicate(err) {
		return runner.Refused(err)
	}
	return Classify(err)
}

// MySQLNumber returns the server's error number carried by err, or 0.
func MySQLNumber(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

func mysqlDuplicate(err error) bool { return MySQLNumber(err) == ErrDupEntry }

// mysqlConflict: a deadlock (1213), MariaDB's snapshot-isolation check
// (1020), or any error with SQLSTATE 40001 (serialization failure).
func mysqlConflict(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	return me.Number == ErrLockDeadlock || me.Number == ErrCheckRead || string(me.SQLState[:]) == sqlStateSerialization
}

func mysqlTooManyConnections(err error) bool {
	switch MySQLNumber(err) {
	case ErrConCount, ErrTooManyUserConns, ErrUserLimitReached:
		return true
	}
	return false
}

// PgCode returns the SQLSTATE carried by a PostgreSQL error, or "".
func PgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func pgDuplicate(err error) bool { return PgCode(err) == CodeUniqueViolation }

func pgConflict(err error) bool {
	c := PgCode(err)
	return c == CodeSerializationFailure || c == CodeDeadlockDetected
}

func pgTooManyConnections(err error) bool { return PgCode(err) == CodeTooManyConnections }
