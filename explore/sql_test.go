package explore

import (
	"fmt"
	"testing"
)

// What a statement touches, as the reduction reads it: tables named by
// the text, read or written; anything the text cannot vouch for touches
// everything.
func TestSQLFootprint(t *testing.T) {
	known := KnownTables("CREATE TABLE racetest_{{.RunID}}_test (id INT PRIMARY KEY, value INT);\nCREATE TABLE IF NOT EXISTS other (k INT);")
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
	for _, setup := range []string{"CREATE TABLE a (id INT); CREATE TABLE b (a INT REFERENCES a(id));", "CREATE TABLE a (id INT); CREATE VIEW v AS SELECT * FROM a;"} {
		if KnownTables(setup)("a") {
			t.Errorf("%q: table a known apart", setup)
		}
	}
}
