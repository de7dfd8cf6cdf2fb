package sqldb

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

// ReadOnlyRule is what a check that writes is told: effects and invariant
// checks are read; writes belong in the setup.
const ReadOnlyRule = "--effects and --invariant only read; put writes in --setup"

// Codes of a statement the server refused because the transaction is read
// only: PostgreSQL's read_only_sql_transaction, MySQL's and MariaDB's
// ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION.
const (
	CodeReadOnlyTransaction = "25006"
	ErrReadOnlyTransaction  = 1792
)

// queryWords are the first words of the statements a check may run: each
// is a query, and none ends or changes the read-only transaction it runs
// in (BEGIN, COMMIT, SET TRANSACTION are refused). What a query may still
// write (PostgreSQL's WITH … DELETE, SELECT INTO, a function that writes)
// the read-only transaction refuses at the server.
var queryWords = []string{"SELECT", "WITH", "VALUES", "TABLE", "SHOW", "EXPLAIN"}

// WriteError is a check (an effects query, an invariant) that would
// write, or tried to: refused before it was sent (Statement names its first
// word), or by the server inside the read-only transaction (Err).
type WriteError struct {
	Statement string
	Err       error
}

func (e *WriteError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("the server refused it in a read-only transaction (%v), and it was rolled back: %s", e.Err, ReadOnlyRule)
	}
	return fmt.Sprintf("%s is not a query: %s (a check runs %s)", e.Statement, ReadOnlyRule, strings.Join(queryWords, ", "))
}

func (e *WriteError) Unwrap() error { return e.Err }

// CheckQuery refuses, from its text alone, a check statement that is not
// a query: its first word (after comments and opening parentheses) must
// be one of queryWords, and MySQL's SELECT … INTO OUTFILE or DUMPFILE,
// which writes a file on the server, is refused too. A statement that
// passes may still write (WITH … DELETE): the caller runs it in a
// read-only transaction (BeginReadOnly) and rolls that back.
func CheckQuery(text string) error {
	w := firstWord(text)
	if w == "" {
		return nil
	}
	ok := false
	for _, q := range queryWords {
		if w == q {
			ok = true
		}
	}
	if !ok {
		return &WriteError{Statement: w}
	}
	upper := " " + strings.Join(strings.Fields(strings.ToUpper(text)), " ") + " "
	for _, f := range []string{" INTO OUTFILE ", " INTO DUMPFILE "} {
		if strings.Contains(upper, f) {
			return &WriteError{Statement: "SELECT …" + strings.TrimRight(f, " ")}
		}
	}
	return nil
}

// firstWord is a statement's first keyword, upper-cased, past blanks,
// comments and opening parentheses.
func firstWord(s string) string {
	for {
		s = strings.TrimLeft(s, " \t\r\n(")
		switch {
		case strings.HasPrefix(s, "--"):
			end := strings.IndexByte(s, '\n')
			if end < 0 {
				return ""
			}
			s = s[end:]
		case strings.HasPrefix(s, "/*"):
			end := strings.Index(s[2:], "*/")
			if end < 0 {
				return ""
			}
			s = s[end+4:]
		default:
			end := strings.IndexFunc(s, func(r rune) bool {
				return !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
			})
			if end < 0 {
				end = len(s)
			}
			if end == 0 && s != "" {
				// A statement that starts with neither a word nor a
				// comment ({{ a template }}, a quote) is no query we know.
				return strings.ToUpper(s[:1])
			}
			return strings.ToUpper(s[:end])
		}
	}
}

// IsReadOnlyRefusal reports a statement the server refused because its
// transaction is read only (SQLSTATE 25006, MySQL 1792): a check that
// tried to write.
func IsReadOnlyRefusal(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == CodeReadOnlyTransaction {
		return true
	}
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == ErrReadOnlyTransaction
}

// OneValue refuses a check's result that is not exactly one value: one
// row of one column. rows and cols are what it returned.
func OneValue(rows, cols int) error {
	if rows == 0 {
		return errors.New("returned no row — a check returns exactly one value (use count(*) or coalesce to always return one row)")
	}
	if rows > 1 {
		return fmt.Errorf("returned %d rows — a check returns exactly one value: count them (SELECT count(*) FROM …)", rows)
	}
	if cols != 1 {
		return fmt.Errorf("returned %d columns — a check returns exactly one value (one row, one column)", cols)
	}
	return nil
}
