package proxy

import (
	"strings"
	"testing"

	"github.com/racetest/racetest/explore"
)

func TestWritesOrLocks(t *testing.T) {
	pg, my := explore.Postgres, explore.MySQL
	for _, c := range []struct {
		text  string
		d     explore.Dialect
		write bool
	}{
		{"SELECT count(*) FROM redemptions WHERE user_id = $1", pg, false},
		{"(((", pg, true}, // nothing but parentheses: not sure, so a write
		{"((SELECT 1))", pg, false},
		{"select id, lower(email) from users where id in (select user_id from t) order by 1 limit 1", pg, false},
		{"SELECT 'INSERT INTO x' FROM t -- UPDATE", pg, false},
		{"SELECT * FROM t /* DELETE */ WHERE a = 'FOR UPDATE'", my, false},
		{"BEGIN", pg, false},
		{"START TRANSACTION", my, false},
		{"COMMIT", pg, false},
		{"ROLLBACK", my, false},
		{"SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", my, false},
		{"SHOW transaction_isolation", pg, false},
		{"EXPLAIN SELECT 1", pg, false},
		{"(SELECT 1) UNION (SELECT 2)", pg, false},
		{"SELECT a INTO @x FROM t", my, false},
		{"BEGIN; SELECT 1; COMMIT", pg, false},
		{"", pg, false}, // nothing runs
		{" ; ", my, false},
		{"INSERT INTO t (a) VALUES ($1)", pg, true},
		{"insert into t values (1)", my, true},
		{"UPDATE t SET n = n + 1 WHERE id = 1", pg, true},
		{"DELETE FROM t", my, true},
		{"MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE", pg, true},
		{"REPLACE INTO t VALUES (1)", my, true},
		{"INSERT INTO t VALUES (1) ON DUPLICATE KEY UPDATE n = n + 1", my, true},
		{"SELECT * FROM t WHERE id = 1 FOR UPDATE", pg, true},
		{"SELECT * FROM t WHERE id = 1 FOR NO KEY UPDATE", pg, true},
		{"SELECT * FROM t WHERE id = 1 FOR SHARE", my, true},
		{"SELECT * FROM t WHERE id = 1 FOR KEY SHARE", pg, true},
		{"SELECT * FROM t WHERE id = 1 LOCK IN SHARE MODE", my, true},
		{"WITH x AS (DELETE FROM t RETURNING *) SELECT count(*) FROM x", pg, true},
		{"WITH x AS (SELECT 1) SELECT * FROM x", pg, false},
		{"CALL do_it(1)", my, true},
		{"DO $$ BEGIN END $$", pg, true},
		{"LOCK TABLE t IN EXCLUSIVE MODE", pg, true},
		{"SELECT pg_advisory_xact_lock(42)", pg, true},
		{"SELECT GET_LOCK('a', 10)", my, true},
		{"SELECT nextval('s')", pg, true},
		{`SELECT "my_func"(1)`, pg, true},
		{"SELECT * INTO newtable FROM t", pg, true},
		{"EXPLAIN ANALYZE DELETE FROM t", pg, true},
		{"TRUNCATE t", pg, true},
		{"CREATE TABLE t (id int)", my, true},
		{"SELECT 1; DELETE FROM t", pg, true},
		{"SELECT 'unterminated", pg, true},
		{"SELECT /*! FOR UPDATE */ 1", my, true},
		{"COPY t FROM STDIN", pg, true},
		{"FROBNICATE t", pg, true},
	} {
		if got := WritesOrLocks(c.text, c.d); got != c.write {
			t.Errorf("WritesOrLocks(%q, %s) = %v, want %v", c.text, c.d, got, c.write)
		}
	}
}

func TestNormalize(t *testing.T) {
	pg, my := explore.Postgres, explore.MySQL
	for _, c := range []struct {
		text string
		d    explore.Dialect
		want string
	}{
		{"SELECT count(*)\n  FROM redemptions\tWHERE user_id = 42", pg, "SELECT count(*) FROM redemptions WHERE user_id = $1"},
		{"INSERT INTO t (a, b) VALUES ($1, 'x') -- note", pg, "INSERT INTO t (a, b) VALUES ($1, $2)"},
		{"UPDATE t SET s = E'a\\'b', n = 3.5 WHERE id = $2", pg, "UPDATE t SET s = $3, n = $4 WHERE id = $2"},
		{"INSERT INTO t VALUES ('a', 12, ?) /* c */", my, "INSERT INTO t VALUES (?, ?, ?)"},
		{"SELECT `Name` FROM t WHERE x='it''s'", my, "SELECT `Name` FROM t WHERE x=?"},
		{"SELECT 'open   string", pg, "SELECT 'open string"},
	} {
		if got := Normalize(c.text, c.d); got != c.want {
			t.Errorf("Normalize(%q, %s)\n got %q\nwant %q", c.text, c.d, got, c.want)
		}
	}
	long := "INSERT INTO t VALUES "
	for range 200 {
		long += "(1, 'x'), "
	}
	if got := Normalize(long+"(2, 'y')", my); len(got) > maxNormalized+len("…") || got[len(got)-3:] != "…" {
		t.Errorf("Normalize of a long statement: %d bytes, ends %q; want at most %d and …", len(got), got[len(got)-3:], maxNormalized)
	}
}

// The pieces of the reading at their edges: what starts a word, what is a
// literal, parameters out of order, a cut that would split a character.
func TestSQLPieces(t *testing.T) {
	for _, w := range []string{`"x`, "_x", "A", "Z", "a", "z", "\x80x", "\xffx"} {
		if !isWord(w) {
			t.Errorf("isWord(%q) = false", w)
		}
	}
	for _, w := range []string{"", "'", "?", "(", "@", "[", "`", "{", "0", "9", "\x7f"} {
		if isWord(w) {
			t.Errorf("isWord(%q) = true", w)
		}
	}
	for _, l := range []string{"'", "0", "9", ".5"} {
		if !isLiteral(l) {
			t.Errorf("isLiteral(%q) = false", l)
		}
	}
	for _, l := range []string{"", ".", "/", ":", "A", "?"} {
		if isLiteral(l) {
			t.Errorf("isLiteral(%q) = true", l)
		}
	}
	pg := explore.Postgres
	for text, want := range map[string]string{
		"SELECT $2, $1, 'x'":     "SELECT $2, $1, $3",
		"SELECT 0, 9, .5 FROM t": "SELECT $1, $2, $3 FROM t",
	} {
		if got := Normalize(text, pg); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", text, got, want)
		}
	}
	exact := strings.Repeat("a", maxNormalized)
	if got := clip(exact); got != exact {
		t.Errorf("clip of exactly %d bytes cut it to %d", maxNormalized, len(got))
	}
	split := strings.Repeat("a", maxNormalized-1) + "é" + "bbb" // é's second byte at the cut
	if got, want := clip(split), strings.Repeat("a", maxNormalized-1)+"…"; got != want {
		t.Errorf("clip split a character: %q…", got[len(got)-8:])
	}
	if got := clip(strings.Repeat("é", maxNormalized)); !strings.HasSuffix(got, "é…") || len(got) != maxNormalized+len("…") {
		t.Errorf("clip of two-byte characters: %d bytes, ends %q", len(got), got[len(got)-5:])
	}
}
