package runs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/racetest/racetest/scenarios/runs"
)

// refusingSQL answers every CREATE with createErr (once) and every
// INSERT with insertErr, wrapped as a driver's error reaches RegisterSQL.
type refusingSQL struct {
	createErr, insertErr error
	creates              int
}

func (s *refusingSQL) Exec(_ context.Context, query string, _ ...any) error {
	switch {
	case strings.HasPrefix(query, "CREATE"):
		s.creates++
		if s.creates == 1 {
			return s.createErr
		}
	case strings.HasPrefix(query, "INSERT"):
		return s.insertErr
	}
	return nil
}

func (s *refusingSQL) Rows(context.Context, string, ...any) ([][]string, error) { return nil, nil }

// Registration reads a refused row with internal/sqldb's classifier: the
// unique key's refusal (1062, 23505) means the id is taken (InUseError);
// any other error, even a conflict, stays an error of its own. A table
// created at once by another run (1050, 42P07, or 23505 on PostgreSQL's
// catalogue) is created again, not an error.
func TestRegisterSQLReadsDuplicatesWithSQLDB(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("exec: %w", err) }
	mysqlErr := func(n uint16) error { return wrap(&mysql.MySQLError{Number: n}) }
	pgErr := func(code string) error { return wrap(&pgconn.PgError{Code: code}) }
	for _, c := range []struct {
		name      string
		d         runs.Dialect
		createErr error
		insertErr error
		inUse     bool
		ok        bool
	}{
		{"mysql duplicate key", runs.MySQL, nil, mysqlErr(1062), true, false},
		{"postgres unique violation", runs.Postgres, nil, pgErr("23505"), true, false},
		{"mysql deadlock", runs.MySQL, nil, mysqlErr(1213), false, false},
		{"postgres serialization failure", runs.Postgres, nil, pgErr("40001"), false, false},
		{"mysql table created meanwhile", runs.MySQL, mysqlErr(1050), nil, false, true},
		{"postgres table created meanwhile", runs.Postgres, pgErr("42P07"), nil, false, true},
		{"postgres catalogue collision", runs.Postgres, pgErr("23505"), nil, false, true},
		{"mysql other create error", runs.MySQL, mysqlErr(1142), nil, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := &refusingSQL{createErr: c.createErr, insertErr: c.insertErr}
			err := runs.RegisterSQL(context.Background(), c.d, q, runs.New("abc123"))
			var inUse *runs.InUseError
			if got := errors.As(err, &inUse); got != c.inUse {
				t.Fatalf("InUseError = %v, want %v (err: %v)", got, c.inUse, err)
			}
			if (err == nil) != c.ok {
				t.Fatalf("err = %v, want ok = %v", err, c.ok)
			}
		})
	}
}
