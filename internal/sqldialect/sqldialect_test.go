package sqldialect

import (
	"strings"
	"testing"
)

func TestPickAnswersPerFamily(t *testing.T) {
	if got := Pick(MySQL, "m", "p"); got != "m" {
		t.Errorf("Pick(MySQL) = %q", got)
	}
	if got := Pick(Postgres, "m", "p"); got != "p" {
		t.Errorf("Pick(Postgres) = %q", got)
	}
	for _, d := range Dialects {
		if !Known(d) {
			t.Errorf("%s is listed but not known", d)
		}
	}
}

// A Dialect made from a string nothing checked gets neither family's way.
func TestPickPanicsOnAnUnknownDialect(t *testing.T) {
	for _, d := range []Dialect{"", "sqlite", "Postgres"} {
		if Known(d) {
			t.Errorf("Known(%q)", d)
		}
		func() {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(r.(string), "no SQL family") {
					t.Errorf("Pick(%q): recovered %v, want a panic naming it", d, r)
				}
			}()
			Pick(d, "m", "p")
		}()
	}
}

func TestDialectStatements(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{MySQL.Rebind("a = ? AND b = ?"), "a = ? AND b = ?"},
		{Postgres.Rebind("a = ? AND b = ?"), "a = $1 AND b = $2"},
		{Postgres.Rebind("é = ?"), "é = $1"},
		{MySQL.QuoteIdent("st`ock"), "`st``ock`"},
		{Postgres.QuoteIdent(`st"ock`), `"st""ock"`},
		{MySQL.BeginReadOnly(), "START TRANSACTION READ ONLY"},
		{Postgres.BeginReadOnly(), "BEGIN TRANSACTION READ ONLY"},
		{MySQL.Hint(), MySQLHint},
		{Postgres.Hint(), PostgresHint},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
