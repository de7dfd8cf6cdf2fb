package explore

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
)

// What a statement touches, as the reduction reads it: tables named by
// the text, read or written; anything the text cannot vouch for touches
// everything.
func TestSQLFootprint(t *testing.T) {
	known := KnownTables(AnyDialect, "CREATE TABLE racetest_{{.RunID}}_test (id INT PRIMARY KEY, value INT)", "CREATE TABLE IF NOT EXISTS other (k INT);")
	rc := SQL{Known: known}
	for _, c := range []struct {
		sql      string
		snapshot bool
		want     string
	}{
		{"SELECT value FROM racetest_{{.RunID}}_test WHERE id = 1", false, "[{racetest_{{.runid}}_test  false}]"},
		{"SELECT COUNT(*) FROM other o, racetest_{{.RunID}}_test t WHERE o.k = t.id", false, "[{other  false} {racetest_{{.runid}}_test  false}]"},
		{"SELECT value FROM unknown WHERE id = 1", false, "[{*  false}]"},
		{"UPDATE racetest_{{.RunID}}_test SET value = 11 WHERE id = 1", false, "[{(lock manager)  true} {racetest_{{.runid}}_test  true}]"},
		{"INSERT INTO other (k) SELECT id FROM racetest_{{.RunID}}_test", false, "[{(lock manager)  true} {other  true} {racetest_{{.runid}}_test  true}]"},
		{"DELETE FROM other WHERE k = 20", false, "[{(lock manager)  true} {other  true}]"},
		{"UPDATE racetest_{{.RunID}}_test SET value = 11 WHERE id = 1", true, "all"},
		{"SELECT value FROM other", true, "[{other  false}]"},
		{"SELECT value FROM other FOR UPDATE", false, "all"},
		{"SELECT value FROM other LOCK IN SHARE MODE", false, "all"},
		{"SELECT nextval('s')", false, "all"},
		{"SELECT my_func(k) FROM other", false, "all"},
		{"WITH x AS (SELECT 1) SELECT * FROM x", false, "all"},
		{"SET @a = 1", false, "all"},
		{"COMMIT", false, "ends"},
		{"ROLLBACK", false, "ends"},
		{"COMMIT", true, "all"},
		{"ROLLBACK TO SAVEPOINT a", false, "all"},
	} {
		f := (SQL{Known: rc.Known, Snapshot: c.snapshot}).Footprint(c.sql)
		got := fmt.Sprint(f.Accesses)
		switch {
		case f.All:
			got = "all"
		case f.Ends:
			got = "ends"
		}
		if got != c.want {
			t.Errorf("%q (snapshot %v): %s, want %s", c.sql, c.snapshot, got, c.want)
		}
	}
	// At serializable nothing commutes, a plain read included.
	if f := (SQL{Known: known, Serializable: true}).Footprint("SELECT value FROM other"); !f.All {
		t.Errorf("a read at serializable: %+v, want all", f)
	}
	// A plain read at read committed holds nothing for its commit.
	if f := rc.Footprint("SELECT value FROM other"); !f.Fleeting {
		t.Errorf("a plain read: %+v, want fleeting", f)
	}
	// A setup with a trigger, a foreign key or a view knows no table apart.
	for _, setup := range [][]string{{"CREATE TABLE a (id INT)", "CREATE TABLE b (a INT REFERENCES a(id));"}, {"CREATE TABLE a (id INT)", "CREATE VIEW v AS SELECT * FROM a;"}} {
		if KnownTables(AnyDialect, setup...)("a") {
			t.Errorf("%q: table a known apart", setup)
		}
	}
}

// footprintOf writes a footprint for a table of tests: "all", "ends", or
// the tables reached ("t u", "*" for an unknown one), in order.
func footprintOf(f Footprint) string {
	switch {
	case f.All:
		return "all"
	case f.Ends:
		return "ends"
	}
	var out []string
	for _, a := range f.Accesses {
		if a != locks {
			out = append(out, a.Table)
		}
	}
	return strings.Join(out, " ")
}

// Every quoting and comment form each server accepts, read as that server
// reads it (issue 42): a quote inside a string, an identifier or a
// comment never hides the table after it, and where the reading is not
// certain (a server setting decides it, an executable comment, an
// unterminated quote) the statement touches everything.
func TestSQLFootprintQuoting(t *testing.T) {
	known := func(table string) bool { return table == "t" || table == "u" || table == "racetest_{{.runid}}_t" }
	for _, c := range []struct {
		d    Dialect
		sql  string
		want string
	}{
		// PostgreSQL.
		{Postgres, `SELECT 'it''s' AS q, value FROM t`, "t"},
		{Postgres, `SELECT E'it\'s' AS q, value FROM t`, "t"},
		{Postgres, `SELECT e'it\\' AS q, value FROM t`, "t"},
		{Postgres, `SELECT E'it''s\'' AS q, value FROM t`, "t"},
		{Postgres, `SELECT $$it's$$ AS q, value FROM t`, "t"},
		{Postgres, `SELECT $q$it's $$ 'x$q$ AS q, value FROM t`, "t"},
		{Postgres, `SELECT $q$it's FROM t`, "all"},
		{Postgres, `SELECT $1, value FROM t WHERE id = $2`, "t"},
		{Postgres, `SELECT 'it\'s' AS q, value FROM t`, "all"},      // standard_conforming_strings decides where it ends
		{Postgres, `SELECT 'a\\' AS q, value FROM t`, "t"},          // ends at one place either way
		{Postgres, "SELECT 'a\\' FROM u -- ', value FROM t", "all"}, // standard_conforming_strings on: u; off: t
		{Postgres, `SELECT "it's" AS q, value FROM t`, "t"},
		{Postgres, `SELECT "a""b'" FROM t`, "t"},
		{Postgres, `SELECT U&'it''s' AS q, value FROM t`, "t"},
		{Postgres, `SELECT U&"d\0061t'" FROM t`, "t"},
		{Postgres, `SELECT B'01', X'1F', N'it''s' FROM t`, "t"},
		{Postgres, "SELECT 1 -- it's\n, value FROM t", "t"},
		{Postgres, "SELECT 1--1\n, value FROM t", "t"},
		{Postgres, "SELECT 1 -- it's\r, value FROM u\n, value FROM t", "all"}, // PostgreSQL ends the comment at \r, MySQL does not
		{Postgres, "SELECT 1 -- it's\r\n, value FROM t", "t"},
		{Postgres, `SELECT 1 /* it's /* nested */ still' */, value FROM t`, "t"},
		{Postgres, `SELECT 1 /* it's FROM t`, "all"},
		{Postgres, `SELECT 1 /* /* */ FROM t`, "all"},
		{Postgres, "SELECT 1 # it's\n FROM t", "all"},
		{Postgres, `SELECT value FROM "T"`, "t"},
		{Postgres, `SELECT value FROM public."t"`, "t"},
		{Postgres, `SELECT value FROM "public".t`, "t"},
		{Postgres, `SELECT value FROM "x.t"`, "*"},
		{Postgres, `SELECT value FROM "where"`, "*"},
		{Postgres, `SELECT t.* FROM t`, "t"},
		{Postgres, "SELECT `x` FROM t", "all"},
		{Postgres, `SELECT 1$$ FROM u$$ FROM t`, "all"},
		{Postgres, `SELECT x FROM t; SELECT 1`, "all"},
		{Postgres, `SELECT x FROM t;`, "t"},
		{Postgres, `SELECT value FROM racetest_{{.RunID}}_t WHERE k = '{{.Token}}'`, "racetest_{{.runid}}_t"},
		{Postgres, `SELECT value FROM racetest_{{ .RunID }}_t WHERE k = {{.Attempt}}`, "racetest_{{.runid}}_t"},
		{Postgres, `SELECT value FROM t WHERE k = {{printf "%c" 39}} FROM u`, "all"},
		{Postgres, `SELECT value FROM t WHERE k = {{- .RunID}}`, "all"},
		{Postgres, `SELECT value FROM t WHERE k = '{{.Token}`, "all"},
		{Postgres, `SELECT value FROM t WHERE k = {x}`, "all"},
		{Postgres, `SELECT value FROM t WHERE k = \N`, "all"},
		// A table where the old reading lost it.
		{Postgres, `SELECT value FROM (u JOIN t ON true)`, "all"},
		{Postgres, `SELECT * FROM (SELECT 1) x, t`, "t"},
		{Postgres, `SELECT * FROM u JOIN t USING (id), t x`, "u t t"},
		{Postgres, `SELECT value FROM t . x`, "all"},
		{Postgres, `SELECT value FROM`, "all"},
		{Postgres, `INSERT INTO t (id) VALUES (1) ON CONFLICT (id) DO UPDATE SET id = 2`, "t"},
		// MySQL and MariaDB.
		{MySQL, `SELECT 'it\'s' AS q, value FROM t`, "all"}, // NO_BACKSLASH_ESCAPES decides where it ends
		{MySQL, `SELECT 'it''s' AS q, value FROM t`, "t"},
		{MySQL, `SELECT 'a\\' AS q, value FROM t`, "t"},
		{MySQL, "SELECT 'a\\' FROM u -- ', value FROM t", "all"}, // backslash escapes: t; NO_BACKSLASH_ESCAPES: u
		{MySQL, "SELECT \"a\\\" FROM u -- \", value FROM t", "all"},
		{MySQL, `SELECT "it's" AS q, value FROM t`, "t"},
		{MySQL, `SELECT "it""s" AS q, value FROM t`, "t"},
		{MySQL, `SELECT "it\"s" AS q, value FROM t`, "all"},
		{MySQL, "SELECT `it's` FROM t", "t"},
		{MySQL, "SELECT ```it's` FROM t", "t"},
		{MySQL, "SELECT value FROM `T`", "t"},
		{MySQL, "SELECT value FROM db.`t`", "t"},
		{MySQL, "SELECT 1 # it's\n, value FROM t", "t"},
		{MySQL, "SELECT 1 -- it's\n, value FROM t", "t"},
		{MySQL, "SELECT 1--1, value FROM t", "t"},
		{MySQL, "SELECT 1 --it's\n, value FROM t", "all"},
		{MySQL, `SELECT 1 /* it's */ , value FROM t`, "t"},
		{MySQL, `SELECT 1 /*! , value FROM u */ FROM t`, "all"},
		{MySQL, `SELECT 1 /*!50000 , value FROM u */ FROM t`, "all"},
		{MySQL, `SELECT 1 /*M!100000 , value FROM u */ FROM t`, "all"},
		{MySQL, `SELECT /*+ MAX_EXECUTION_TIME(1) */ value FROM t`, "all"},
		{MySQL, `SELECT 1 /* /* */ FROM t`, "all"},
		{MySQL, `SELECT 1 /* it's FROM t`, "all"},
		{MySQL, `SELECT $$it's$$ FROM t`, "all"},
		{MySQL, `SELECT _utf8mb4'it''s', N'x', X'1F', value FROM t`, "t"},
		{MySQL, `SELECT value FROM t STRAIGHT_JOIN u`, "t u"},
		{MySQL, `SELECT value FROM 1t`, "all"},
		{MySQL, `SELECT value FROM $t`, "*"},
		{MySQL, `INSERT t VALUES (1)`, "t"},
		{MySQL, `INSERT IGNORE t SELECT * FROM u`, "t u"},
		{MySQL, `REPLACE t SET id = 1`, "t"},
		{MySQL, `UPDATE t, u SET t.id = u.id`, "t u"},
		{MySQL, `SELECT value FROM t WHERE x = 'a' 'b'`, "t"},
		{MySQL, `SELECT @a := value, @@sql_mode FROM t`, "t"},
		{MySQL, "SELECT value FROM t WHERE k = {oj x}", "all"},
		// Unknown server: certain only where both read alike.
		{AnyDialect, `SELECT 'it''s' AS q, value FROM t`, "t"},
		{AnyDialect, `SELECT "it's" AS q, value FROM t`, "t"},
		{AnyDialect, `SELECT $$it's$$ FROM t`, "all"},
		{AnyDialect, "SELECT 1 # x\n FROM t", "all"},
	} {
		f := SQL{Known: known, Dialect: c.d}.Footprint(c.sql)
		if got := footprintOf(f); got != c.want {
			t.Errorf("%s: %q: %s, want %s", c.d, c.sql, got, c.want)
		}
	}
}

// Any text a server reads as one string or one quoted name, written in
// each quoting form it accepts, hides nothing: the table after it is read
// (a property over generated contents: every quote, backslash, dollar and
// comment opener in every position).
func TestSQLFootprintQuotedAnything(t *testing.T) {
	alphabet := []string{"'", `"`, "`", `\`, "$", "$q$", "--", "/*", "*/", "#", "\n", "\r", "x", " ", "FROM u", ";", "{", "é"}
	pgForms := map[string]func(string) (string, bool){
		"standard": func(c string) (string, bool) {
			return "'" + strings.ReplaceAll(c, "'", "''") + "'", !strings.Contains(c, `\`)
		},
		"E": func(c string) (string, bool) {
			return "E'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(c) + "'", true
		},
		"dollar": func(c string) (string, bool) {
			return "$z$" + c + "$z$", !strings.Contains(c, "$z") && !strings.HasSuffix(c, "$")
		},
		"identifier": func(c string) (string, bool) {
			return `"` + strings.ReplaceAll(c, `"`, `""`) + `"`, c != ""
		},
	}
	myForms := map[string]func(string) (string, bool){
		"string": func(c string) (string, bool) {
			return "'" + strings.NewReplacer(`\`, `\\`, "'", "''").Replace(c) + "'", true
		},
		"double": func(c string) (string, bool) {
			return `"` + strings.NewReplacer(`\`, `\\`, `"`, `""`).Replace(c) + `"`, true
		},
		"backtick": func(c string) (string, bool) {
			return "`" + strings.ReplaceAll(c, "`", "``") + "`", c != ""
		},
	}
	rng := rand.New(rand.NewSource(42))
	known := func(table string) bool { return table == "t" }
	n := 0
	for range 3000 {
		var b strings.Builder
		for range rng.Intn(8) {
			b.WriteString(alphabet[rng.Intn(len(alphabet))])
		}
		content := b.String()
		if strings.Contains(content, "{") {
			continue // a template: read before the server reads anything
		}
		for d, forms := range map[Dialect]map[string]func(string) (string, bool){Postgres: pgForms, MySQL: myForms} {
			for name, form := range forms {
				lit, ok := form(content)
				if !ok {
					continue
				}
				n++
				stmt := "SELECT " + lit + " AS q, value FROM t"
				if got := footprintOf(SQL{Known: known, Dialect: d}.Footprint(stmt)); got != "t" {
					t.Fatalf("%s %s: %q: %s, want t", d, name, stmt, got)
				}
			}
		}
	}
	t.Logf("%d statements", n)
}

// FuzzSQLTokens: the scanner never panics, and what it reads of a text
// it is certain of, it reads the same after a comment that closes.
// Run it for real with: go test -run '^$' -fuzz '^FuzzSQLTokens$' ./explore
func FuzzSQLTokens(f *testing.F) {
	for _, s := range []string{`SELECT 'it\'s' FROM t`, `SELECT $$a$$ FROM t`, "SELECT 1 -- x\n FROM t", `SELECT "a""b" FROM t`, "SELECT `a` FROM t", `/* /* */ */`, `E'\\'`, "{{.RunID}}", `$1`, "#"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, d := range []Dialect{Postgres, MySQL, AnyDialect} {
			toks, ok := sqlTokens(s, d)
			if !ok {
				continue
			}
			again, ok := sqlTokens("/* c */ "+s, d)
			if !ok || !slices.Equal(toks, again) {
				t.Fatalf("%s: %q read as %q, after a comment as %q (%v)", d, s, toks, again, ok)
			}
		}
	})
}

// The table reader at its edges: a statement that ends where a table is
// due, a subquery or a list of values in FROM, MySQL's INSERT and DELETE
// without INTO or FROM, and what may start a name. Each either reads the
// tables or says it cannot (never panics, never drops one).
func TestSQLTablesEdges(t *testing.T) {
	for _, c := range []struct {
		sql  string
		want string // the tables, or "uncertain"
	}{
		{"SELECT * FROM (", "uncertain"},
		{"SELECT * FROM (SELECT * FROM a) x JOIN b ON true", "[a b]"},
		{"SELECT * FROM (VALUES (1)) v", "[]"},
		{"SELECT * FROM (a JOIN b ON true)", "uncertain"},
		{"DELETE", "[]"},
		{"INSERT IGNORE", "[]"},
		{"INSERT IGNORE t VALUES (1)", "[t]"},
		{"DELETE QUICK a FROM a JOIN b ON a.k = b.k", "[a a b]"},
		{"INSERT INTO a SELECT * FROM ONLY b", "[a b]"},
		{"DELETE FROM a USING", "uncertain"},
		{"DELETE FROM a USING b WHERE a.k = b.k", "[a b]"},
		{"SELECT * FROM a JOIN b USING (k)", "[a b]"},
		{"SELECT * FROM Apple, Zebra, apple, zebra, _t, Émile", "[apple zebra apple zebra _t émile]"},
		{"SELECT * FROM @t", "uncertain"},
		{"SELECT * FROM [t]", "uncertain"},
		{"SELECT * FROM 9t", "uncertain"},
	} {
		toks, ok := sqlTokens(c.sql, AnyDialect)
		if !ok {
			t.Fatalf("%q: the scanner is not sure of it; choose another case", c.sql)
		}
		tables, ok := sqlTables(toks)
		got := fmt.Sprint(tables)
		if tables == nil && ok {
			got = "[]"
		}
		if !ok {
			got = "uncertain"
		}
		if got != c.want {
			t.Errorf("%q: %s, want %s", c.sql, got, c.want)
		}
	}
	for _, name := range []string{"A", "Z", "a", "z", "_", `"x`, "{{", "$1", "\x80"} {
		if !isName(name) {
			t.Errorf("isName(%q) = false, want true", name)
		}
	}
	for _, name := range []string{"@", "[", "`", "0", "9", "(", "^", "|", "\x7f"} {
		if isName(name) {
			t.Errorf("isName(%q) = true, want false", name)
		}
	}
}
