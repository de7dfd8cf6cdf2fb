package sqldb

import (
	"errors"
	"strings"
	"testing"
)

// A check's statement is refused from its text unless its first word is a
// query's; a query that writes all the same is the read-only transaction's
// to refuse.
func TestCheckQuery(t *testing.T) {
	for _, q := range []string{
		"SELECT count(*) FROM t", "select 1", "  WITH x AS (SELECT 1) SELECT * FROM x", "(SELECT 1) UNION (SELECT 2)",
		"/* the count */ SELECT 1", "-- the count\nSELECT 1", "VALUES (1)", "TABLE t", "SHOW server_version", "EXPLAIN SELECT 1",
		"SELECT a INTO @x FROM t", "WITH d AS (DELETE FROM t RETURNING 1) SELECT count(*) FROM d",
	} {
		if err := CheckQuery(q); err != nil {
			t.Errorf("%q refused: %v", q, err)
		}
	}
	for q, word := range map[string]string{
		"DELETE FROM t": "DELETE", "update t set v = v + 100": "UPDATE", "INSERT INTO t VALUES (1)": "INSERT",
		"DROP TABLE t": "DROP", "TRUNCATE t": "TRUNCATE", "COMMIT": "COMMIT", "BEGIN": "BEGIN", "ROLLBACK": "ROLLBACK",
		"SET TRANSACTION READ WRITE": "SET", "/* x */ DELETE FROM t": "DELETE", "(DELETE FROM t)": "DELETE",
		"CALL p()": "CALL", "REPLACE INTO t VALUES (1)": "REPLACE", "LOCK TABLES t WRITE": "LOCK", "'x'": "'",
		"SELECT * FROM t INTO OUTFILE '/tmp/x'": "SELECT … INTO OUTFILE", "select * from t into   dumpfile '/tmp/x'": "SELECT … INTO DUMPFILE",
		// Past a comment, the statement's own first word.
		"-- a note\nDELETE FROM t": "DELETE", "/**/DELETE FROM t": "DELETE",
		// A word is letters, digits and '_': a query word with one more
		// of any of them is another word.
		"selecta 1": "SELECTA", "selectz 1": "SELECTZ", "SELECTA 1": "SELECTA", "SELECTZ 1": "SELECTZ",
		"select0 1": "SELECT0", "select9 1": "SELECT9", "select_x 1": "SELECT_X",
	} {
		err := CheckQuery(q)
		var we *WriteError
		if !errors.As(err, &we) || we.Statement != word || !strings.Contains(err.Error(), ReadOnlyRule) {
			t.Errorf("%q: %v, want %s refused", q, err, word)
		}
	}
}

func TestOneValue(t *testing.T) {
	if err := OneValue(1, 1); err != nil {
		t.Errorf("one row, one column: %v", err)
	}
	for _, c := range []struct {
		rows, cols int
		want       string
	}{{0, 0, "returned no row"}, {3, 1, "returned 3 rows"}, {1, 2, "returned 2 columns"}, {2, 2, "returned 2 rows"}} {
		if err := OneValue(c.rows, c.cols); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%d rows, %d columns: %v, want %q", c.rows, c.cols, err, c.want)
		}
	}
}

// The refusal says which kind it was: refused from its text, or by the
// server inside the read-only transaction.
func TestWriteErrorSaysWhoRefused(t *testing.T) {
	byText := (&WriteError{Statement: "DELETE"}).Error()
	if !strings.HasPrefix(byText, "DELETE is not a query: ") || strings.Contains(byText, "server refused") {
		t.Errorf("refused by its text: %q", byText)
	}
	byServer := (&WriteError{Err: errors.New("cannot execute DELETE in a read-only transaction")}).Error()
	if !strings.HasPrefix(byServer, "the server refused it in a read-only transaction (cannot execute DELETE") || !strings.Contains(byServer, ReadOnlyRule) {
		t.Errorf("refused by the server: %q", byServer)
	}
}
