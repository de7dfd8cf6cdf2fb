package sqldb

import "github.com/racetest/racetest/runner"

// IsDuplicate reports whether err is a unique key's refusal (MySQL 1062,
// PostgreSQL 23505): the one error that means "already done".
func IsDuplicate(err error) bool { return mysqlDuplicate(err) || pgDuplicate(err) }

// IsConflict reports whether the server refused to decide and asked for a
// retry: a deadlock or a serialization failure (MySQL 1213 and 1020 or
// SQLSTATE 40001; PostgreSQL 40001 and 40P01).
func IsConflict(err error) bool { return mysqlConflict(err) || pgConflict(err) }

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
