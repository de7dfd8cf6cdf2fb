package cmd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/internal/testenv"
)

// gSingle is Hermitage's G-single (read skew) as explore sql's flags, with
// lit, a literal in the quoting the issue names, in both of the reader's
// SELECTs: at read committed the reader sees the writer's commit between
// its two reads in some order.
func gSingle(backend, lit string) []string {
	tb, done := "racetest_{{.RunID}}_test", "racetest_{{.RunID}}_done"
	reader := "BEGIN;\nSELECT " + lit + " AS q, value AS a FROM " + tb + " WHERE id = 1 \\gset\n" +
		"SELECT " + lit + " AS q, CASE WHEN value + :a <> 30 THEN 1 ELSE 0 END AS bad FROM " + tb + " WHERE id = 2 \\gset\nCOMMIT;\n" +
		"\\if :bad = 1\nINSERT INTO " + done + " (k) VALUES ('seen');\n\\endif\n"
	writer := "BEGIN;\nUPDATE " + tb + " SET value = 12 WHERE id = 1;\nUPDATE " + tb + " SET value = 18 WHERE id = 2;\nCOMMIT;\n"
	return []string{"explore", "sql", "-b", backend, "--isolation", "read-committed",
		"--setup", "CREATE TABLE " + tb + " (id INT PRIMARY KEY, value INT NOT NULL);\nCREATE TABLE " + done + " (k VARCHAR(16) NOT NULL);",
		"--subject", "DELETE FROM " + tb + ";\nDELETE FROM " + done + ";\nINSERT INTO " + tb + " (id, value) VALUES (1, 10), (2, 20);",
		"--attempt", reader, "--attempt", writer,
		"--effects", "SELECT 1 + COUNT(*) FROM " + done + ";",
		"--teardown", "DROP TABLE " + tb + ";\nDROP TABLE " + done + ";",
		"--expect", "race"}
}

// Issue 42 item 1: a quoted quote in the reader's SELECT hid its table
// from the footprint, the SELECT commuted with everything, and G-single
// at read committed read SAFE with most orders pruned. Read as each
// server reads its quoting, the SELECT reads its table: RACE, with the
// orders that only move the reader's COMMIT spared. Where the reading
// depends on a server setting (a backslash before a quote:
// NO_BACKSLASH_ESCAPES) the SELECT touches everything and nothing is
// spared.
func TestExploreQuotedQuoteIsNoSafe(t *testing.T) {
	for _, c := range []struct {
		backend, lit string
		spared       bool
	}{
		{"mysql", `'it\'s'`, false}, {"mysql", `"it's"`, true}, {"mysql", "'it''s'", true}, {"mysql", "'it''s' AS `w`, 1", true},
		{"postgres", `E'it\'s'`, true}, {"postgres", `$$it's$$`, true}, {"postgres", `$q$it's$q$`, true}, {"postgres", `'it''s'`, true},
	} {
		t.Run(c.backend+" "+c.lit, func(t *testing.T) {
			out, stderr, code := execCmd(t, false, gSingle(c.backend, c.lit)...)
			if code == exitSetup {
				testenv.Unavailable(t, c.backend, errors.New(stderr))
			}
			if code != exitOK || !strings.Contains(out, "RACE") {
				t.Errorf("exit %d, want RACE (exit 0 with --expect race)\n%s\n%s", code, out, stderr)
			}
			if spared := strings.Contains(stderr, "only swap steps that commute and are spared"); spared != c.spared {
				t.Errorf("orders spared: %v, want %v (the SELECT read as %s reads it)\n%s", spared, c.spared, c.backend, stderr)
			}
		})
	}
}

// Issue 42 item 2: a table made before the run (the setup's CREATE TABLE
// IF NOT EXISTS finds it) with a trigger that writes another table. The
// writer's INSERT names only its own table; the reader reads the other
// one twice at read committed and sees the trigger's row appear between.
// The catalog, read after the setup ran, shows the trigger: the INSERT
// touches every table, and the order that shows it runs (RACE, not SAFE).
// The same tables without the trigger are known apart, and the reader's
// SELECTs commute with the writer's steps: SAFE, with 8 of 10 orders
// spared (with the trigger, 4: only the reader's COMMIT moves).
func TestExploreTriggerBehindTheTextIsNoSafe(t *testing.T) {
	triggers := map[string]func(w, log string) []string{
		"postgres": func(w, log string) []string {
			return []string{"CREATE TABLE " + log + " (id INT NOT NULL)", "CREATE TABLE " + w + " (id INT NOT NULL)",
				"CREATE FUNCTION " + w + "_f() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN INSERT INTO " + log + " VALUES (NEW.id); RETURN NEW; END$$",
				"CREATE TRIGGER " + w + "_tr AFTER INSERT ON " + w + " FOR EACH ROW EXECUTE FUNCTION " + w + "_f()"}
		},
		"mysql": func(w, log string) []string {
			return []string{"CREATE TABLE " + log + " (id INT NOT NULL)", "CREATE TABLE " + w + " (id INT NOT NULL)",
				"CREATE TRIGGER " + w + "_tr AFTER INSERT ON " + w + " FOR EACH ROW INSERT INTO " + log + " VALUES (NEW.id)"}
		},
	}
	drops := map[string]func(w, log string) []string{
		"postgres": func(w, log string) []string {
			return []string{"DROP TABLE IF EXISTS " + w, "DROP TABLE IF EXISTS " + log, "DROP FUNCTION IF EXISTS " + w + "_f()"}
		},
		"mysql": func(w, log string) []string {
			return []string{"DROP TABLE IF EXISTS " + w, "DROP TABLE IF EXISTS " + log}
		},
	}
	for _, c := range []struct {
		backend string
		trigger bool
	}{{"postgres", true}, {"postgres", false}, {"mysql", true}, {"mysql", false}} {
		backend := c.backend
		t.Run(fmt.Sprintf("%s trigger=%v", backend, c.trigger), func(t *testing.T) {
			ctx := context.Background()
			db := testenv.SQL(t, sqldb.Dialect(backend))
			defer db.Close()
			b := make([]byte, 4)
			rand.Read(b)
			w, log := "racetest_"+hex.EncodeToString(b)+"_w", "racetest_"+hex.EncodeToString(b)+"_log"
			defer func() {
				for _, q := range drops[backend](w, log) {
					if err := db.Exec(context.Background(), q); err != nil {
						t.Errorf("%s by hand: %v", q, err)
					}
				}
			}()
			made := triggers[backend](w, log)
			if !c.trigger {
				made = made[:2]
			}
			for _, q := range made {
				if err := db.Exec(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			seen := "racetest_{{.RunID}}_seen"
			args := []string{"explore", "sql", "-b", backend, "--isolation", "read-committed",
				"--setup", "CREATE TABLE IF NOT EXISTS " + w + " (id INT NOT NULL);\nCREATE TABLE IF NOT EXISTS " + log + " (id INT NOT NULL);\n" +
					"CREATE TABLE " + seen + " (k VARCHAR(16) NOT NULL);",
				"--subject", "DELETE FROM " + w + ";\nDELETE FROM " + log + ";\nDELETE FROM " + seen + ";",
				"--attempt", "BEGIN;\nSELECT COUNT(*) AS a FROM " + log + " \\gset\nSELECT COUNT(*) AS b FROM " + log + " \\gset\nCOMMIT;\n" +
					"\\if :a <> :b\nINSERT INTO " + seen + " (k) VALUES ('seen');\n\\endif\n",
				"--attempt", "BEGIN;\nINSERT INTO " + w + " (id) VALUES (1);\nCOMMIT;\n",
				"--effects", "SELECT 1 + COUNT(*) FROM " + seen + ";",
				"--teardown", "DROP TABLE " + seen + ";",
				"--expect", "race"}
			if !c.trigger {
				args[len(args)-1] = "safe"
			}
			out, stderr, code := execCmd(t, false, args...)
			if c.trigger && (code != exitOK || !strings.Contains(out, "RACE")) {
				t.Errorf("exit %d, want RACE (exit 0 with --expect race)\n%s\n%s", code, out, stderr)
			}
			if !c.trigger && (code != exitOK || !safeLine.MatchString(out) || !strings.Contains(stderr, "8 only swap steps that commute and are spared")) {
				t.Errorf("exit %d, want SAFE with 8 of 10 orders spared (both tables known apart: the reads commute with the writer's steps)\n%s\n%s", code, out, stderr)
			}
		})
	}
}
