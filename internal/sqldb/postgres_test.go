package sqldb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/racetest/racetest/runner"
)

func TestRedactPostgres(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://alice:s3cret@db:5432/app?sslmode=disable", "postgres://alice:xxxxx@db:5432/app?sslmode=disable"},
		{"postgresql://alice:s3cret@db/app?password=s3cret", "postgresql://alice:xxxxx@db/app?password=xxxxx"},
		{"postgres://alice@db/app", "postgres://alice@db/app"},
		{"host=db user=alice password=s3cret dbname=app", "host=db user=alice password=xxxxx dbname=app"},
		{"host=db password = 's3 cr\\'et' dbname=app", "host=db password = xxxxx dbname=app"},
		{"postgres://alice:s3cret@db:notaport/app", "postgres://alice:xxxxx@db:notaport/app"},
	} {
		got := RedactPostgres(c.in)
		if got != c.want {
			t.Errorf("RedactPostgres(%q) = %q, want %q", c.in, got, c.want)
		}
		if strings.Contains(got, "s3") {
			t.Errorf("RedactPostgres(%q) leaks the password: %q", c.in, got)
		}
	}
}

func TestClassifyPostgres(t *testing.T) {
	pg := func(code string) error { return fmt.Errorf("insert: %w", &pgconn.PgError{Code: code, Message: "m"}) }
	for _, c := range []struct {
		err  error
		want runner.Class
	}{
		{pg(CodeSerializationFailure), runner.Conflict},
		{pg(CodeDeadlockDetected), runner.Conflict},
		{pg("23514"), runner.Error},
		{pg(CodeUniqueViolation), runner.Error}, // only unique-insert reads 23505, itself
		{errors.New("connection reset"), runner.Error},
		{fmt.Errorf("commit: %w", context.DeadlineExceeded), runner.Unknown},
	} {
		if got := Classify(c.err).Class; got != c.want {
			t.Errorf("Classify(%v) = %s, want %s", c.err, got, c.want)
		}
	}
	if !IsDuplicate(pg(CodeUniqueViolation)) || IsDuplicate(pg("23514")) || IsDuplicate(errors.New("duplicate key")) {
		t.Error("isDuplicate must match SQLSTATE 23505 and nothing else")
	}
}

func TestServerName(t *testing.T) {
	for _, c := range []struct{ version, sv, want string }{
		{"PostgreSQL 15.20 (Debian 15.20-0+deb12u1) on x86_64-pc-linux-gnu, compiled by gcc", "15.20 (Debian 15.20-0+deb12u1)", "PostgreSQL 15.20"},
		{"PostgreSQL 16.4 on aarch64-unknown-linux-musl, compiled by gcc", "16.4", "PostgreSQL 16.4"},
		{"CockroachDB CCL v23.1.11 (x86_64-pc-linux-gnu, built 2023/09/27)", "13.0.0", "CockroachDB CCL v23.1.11"},
	} {
		if got := PostgresServerName(c.version, c.sv); got != c.want {
			t.Errorf("PostgresServerName(%q) = %q, want %q", c.version, got, c.want)
		}
	}
}
