// Package sqldialect names the SQL families racetest speaks: one type,
// Dialect, for internal/sqldb (which calls it sqldb.Dialect), the
// snapshots of internal/sqlsnap and the race package, which must not pull
// in a driver (this package imports nothing).
//
// What differs between the families is chosen with Pick, which names
// every family: a third one is a third argument of Pick, and the compiler
// then finds every place that must say what it does there. No place falls
// back on MySQL's way for a family it does not know.
package sqldialect

import (
	"strconv"
	"strings"
)

// Dialect is the SQL family a server speaks.
type Dialect string

const (
	MySQL    Dialect = "mysql" // MySQL and MariaDB
	Postgres Dialect = "postgres"
)

// Dialects lists every family, in Pick's order.
var Dialects = []Dialect{MySQL, Postgres}

// Pick returns d's value: mysql's or postgres's. A Dialect that names
// neither family panics: it was made from a string nothing checked, and
// answering with either family's way would be a guess.
func Pick[T any](d Dialect, mysql, postgres T) T {
	switch d {
	case MySQL:
		return mysql
	case Postgres:
		return postgres
	}
	panic("sqldialect: " + strconv.Quote(string(d)) + " is no SQL family racetest knows (known: mysql, postgres)")
}

// Known reports whether d names a family: Pick answers for it.
func Known(d Dialect) bool {
	switch d {
	case MySQL, Postgres:
		return true
	}
	return false
}

// The "what to change" half of each family's connection errors.
const (
	MySQLHint    = "set --mysql-dsn or RACETEST_MYSQL_DSN"
	PostgresHint = "set --postgres-url or RACETEST_POSTGRES_URL"
)

// Hint is the "what to change" half of the dialect's connection errors.
func (d Dialect) Hint() string { return Pick(d, MySQLHint, PostgresHint) }

// BeginReadOnly is the statement that opens a read-only transaction; a
// check runs inside one and ends with ROLLBACK, never COMMIT.
func (d Dialect) BeginReadOnly() string {
	return Pick(d, "START TRANSACTION READ ONLY", "BEGIN TRANSACTION READ ONLY")
}

// Rebind rewrites a statement written with ? placeholders for the dialect:
// $1, $2, ... on PostgreSQL, unchanged on MySQL. It does not look inside
// quoted strings: a literal '?' in a statement for PostgreSQL must be a
// parameter instead.
func (d Dialect) Rebind(query string) string {
	if numbered := Pick(d, false, true); !numbered {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// QuoteIdent quotes a table or column name: "name" on PostgreSQL, `name`
// on MySQL, the quote character doubled inside.
func (d Dialect) QuoteIdent(name string) string {
	q := Pick(d, "`", `"`)
	return q + strings.ReplaceAll(name, q, q+q) + q
}
