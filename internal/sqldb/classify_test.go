package sqldb

import (
	"context"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/racetest/racetest/runner"
)

// Each way a server says "retry" is a conflict on its own, as the server
// sends it (wrapped, as a statement's error reaches a scenario); anything
// near it is not. An attempt misclassified as an error (or declined) would
// change what the report counts and says.
func TestEachConflictSignalAlone(t *testing.T) {
	state := func(s string) (b [5]byte) { copy(b[:], s); return b }
	my := func(n uint16, st string) error {
		return fmt.Errorf("update: %w", &mysql.MySQLError{Number: n, SQLState: state(st), Message: "m"})
	}
	pg := func(code string) error { return fmt.Errorf("commit: %w", &pgconn.PgError{Code: code, Message: "m"}) }
	for _, tc := range []struct {
		name     string
		err      error
		conflict bool
	}{
		{"SQLSTATE 40001 alone, with another number", my(1180, "40001"), true},
		{"deadlock 1213 without a SQLSTATE", my(1213, ""), true},
		{"MariaDB snapshot check 1020", my(1020, "HY000"), true},
		{"lock wait timeout 1205 is not a conflict", my(1205, "HY000"), false},
		{"another class-40 state", my(1180, "40002"), false},
		{"duplicate key", my(1062, "23000"), false},
		{"postgres serialization failure", pg("40001"), true},
		{"postgres deadlock", pg("40P01"), true},
		{"postgres lock not available", pg("55P03"), false},
	} {
		if got := IsConflict(tc.err); got != tc.conflict {
			t.Errorf("%s: IsConflict = %v, want %v", tc.name, got, tc.conflict)
		}
		want := runner.Error
		if tc.conflict {
			want = runner.Conflict
		}
		if o := Classify(tc.err); o.Class != want || o.Err != tc.err {
			t.Errorf("%s: Classify = %s (%v), want %s keeping the error", tc.name, o.Class, o.Err, want)
		}
	}
}

// Only the unique key's refusal is "already done", on either server; a
// timeout is unknown even when the server's error came with it.
func TestInsertClassification(t *testing.T) {
	dup := []error{
		fmt.Errorf("insert: %w", &mysql.MySQLError{Number: 1062, Message: "Duplicate entry"}),
		fmt.Errorf("insert: %w", &pgconn.PgError{Code: "23505", Message: "duplicate key"}),
	}
	for _, err := range dup {
		if o := ClassifyInsert(err); o.Class != runner.Declined || o.Err != err {
			t.Errorf("ClassifyInsert(%v) = %s, want declined", err, o.Class)
		}
		if o := Classify(err); o.Class != runner.Error {
			t.Errorf("Classify(%v) = %s: outside an insert a duplicate key is an error", err, o.Class)
		}
	}
	deadline := fmt.Errorf("insert: %w", context.DeadlineExceeded)
	if o := ClassifyInsert(deadline); o.Class != runner.Unknown {
		t.Errorf("a timed-out insert is %s, want unknown: it may have run", o.Class)
	}
	if o := ClassifyInsert(fmt.Errorf("insert: %w", &mysql.MySQLError{Number: 1213})); o.Class != runner.Conflict {
		t.Errorf("a deadlocked insert is %s, want conflict", o.Class)
	}
}

func TestTooManyConnections(t *testing.T) {
	for _, n := range []uint16{1040, 1203, 1226} {
		if !IsTooManyConnections(&mysql.MySQLError{Number: n}) {
			t.Errorf("MySQL %d is the connection limit", n)
		}
	}
	if !IsTooManyConnections(&pgconn.PgError{Code: "53300"}) {
		t.Error("PostgreSQL 53300 is the connection limit")
	}
	for _, err := range []error{&mysql.MySQLError{Number: 1045}, &pgconn.PgError{Code: "53400"}, fmt.Errorf("too many connections")} {
		if IsTooManyConnections(err) {
			t.Errorf("%v is not the connection limit", err)
		}
	}
}
