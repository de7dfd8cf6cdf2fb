package cmd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/internal/testenv"
)

// readOnlyCase is one check that must be refused with exit 2 (issue 42,
// items 6 and 7): the flag it is given as, the check, and what stderr
// must say. ran: the refusal comes from the server, after the setup ran
// (its teardown ran too); otherwise nothing ran, not even the setup.
type readOnlyCase struct {
	flag, check string
	want        string
	ran         bool
	// server: the server refused the request as a statement (two in one
	// request): any failure will do, as long as nothing was written.
	server bool
}

// acctTable makes a table of the test's own on d's server holding three
// accounts, two below 0 (on MySQL a MyISAM table, which ignores
// transactions), and a function that adds 100 to every balance; it
// returns the table's name and a func that reads it whole ("1:5 2:-1
// 3:-2"). Both are dropped when the test ends.
func acctTable(t *testing.T, d sqldb.Dialect) (*sqldb.DB, string, func() string) {
	t.Helper()
	ctx := context.Background()
	db := testenv.SQL(t, d)
	b := make([]byte, 4)
	rand.Read(b)
	name := "racetest_" + hex.EncodeToString(b) + "_acct"
	create, bump := "CREATE TABLE "+name+" (id INT PRIMARY KEY, balance INT NOT NULL)",
		"CREATE FUNCTION "+name+"_bump() RETURNS int LANGUAGE sql AS $$ UPDATE "+name+" SET balance = balance + 100; SELECT 0 $$"
	if d == sqldb.MySQL {
		create += " ENGINE=MyISAM"
		bump = "CREATE FUNCTION " + name + "_bump() RETURNS INT MODIFIES SQL DATA BEGIN UPDATE " + name + " SET balance = balance + 100; RETURN 0; END"
	}
	if err := db.Exec(ctx, create); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Exec(context.Background(), "DROP TABLE "+name); err != nil {
			t.Errorf("drop %s by hand: %v", name, err)
		}
	})
	if err := db.Exec(ctx, bump); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Exec(context.Background(), "DROP FUNCTION "+name+"_bump"); err != nil {
			t.Errorf("drop %s_bump by hand: %v", name, err)
		}
	})
	if err := db.Exec(ctx, "INSERT INTO "+name+" VALUES (1, 5), (2, -1), (3, -2)"); err != nil {
		t.Fatal(err)
	}
	read := func() string {
		var out []string
		err := db.Admin(ctx, func(ctx context.Context, q sqldb.Querier) error {
			rows, err := q.Query(ctx, "SELECT id, balance FROM "+name+" ORDER BY id")
			for _, r := range rows.Values {
				out = append(out, fmt.Sprintf("%v:%v", r[0], r[1]))
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(out, " ")
	}
	return db, name, read
}

// tableExists reports whether name is a table of db's schema.
func tableExists(t *testing.T, db *sqldb.DB, name string) bool {
	t.Helper()
	n, err := db.Count(context.Background(), "SELECT count(*) FROM information_schema.tables WHERE table_name = '"+name+"'")
	if err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// sqlChecksThatWrite are the checks of issue 42 on a SQL server: each
// write form, and an invariant that returns several values.
func sqlChecksThatWrite(table string, postgres bool) []readOnlyCase {
	cases := []readOnlyCase{
		{"--effects", "DELETE FROM " + table, "DELETE is not a query: --effects and --invariant only read; put writes in --setup", false, false},
		{"--effects", "UPDATE " + table + " SET balance = balance + 100", "UPDATE is not a query", false, false},
		{"--invariant", "UPDATE " + table + " SET balance = 0; SELECT 0", "UPDATE is not a query", false, false},
		{"--invariant", "SELECT 0; COMMIT; DELETE FROM " + table + "; SELECT 0", "COMMIT is not a query", false, false},
		{"--effects", "TRUNCATE " + table, "TRUNCATE is not a query", false, false},
		{"--invariant", "SELECT id FROM " + table + " WHERE balance < 0 ORDER BY id", "the invariant script's last statement returned 2 rows — a check returns exactly one value", true, false},
		{"--effects", "SELECT count(*), 1 FROM " + table, "returned 2 columns", true, false},
		{"--effects", "SELECT id FROM " + table + " WHERE id > 10", "returned no row", true, false},
		// A function that writes passes the text, and the read-only
		// transaction refuses it (on MariaDB, into a MyISAM table too).
		{"--invariant", "SELECT " + table + "_bump()", "the server refused it in a read-only transaction", true, false},
		// A template that reads with the sample values and writes with
		// the run's: judged again before it is sent.
		{"--effects", `{{if eq .Token "x"}}SELECT 0{{else}}DELETE FROM ` + table + `{{end}}`, "DELETE is not a query", true, false},
	}
	if postgres {
		cases = append(cases,
			readOnlyCase{"--effects", "WITH d AS (DELETE FROM " + table + " RETURNING 1) SELECT count(*) FROM d", "the server refused it in a read-only transaction", true, false},
			readOnlyCase{"--invariant", "SELECT * INTO " + table + "_copy FROM " + table, "read-only transaction", true, false})
	}
	return cases
}

// runSQLChecksThatWrite runs each case as 'racetest sql -b backend': exit
// 2, the table as it was, and the setup run (its marker table made) only
// where the server refused the write inside the check's read-only
// transaction.
func runSQLChecksThatWrite(t *testing.T, backend string, d sqldb.Dialect) {
	db, table, read := acctTable(t, d)
	before := read()
	marker := table + "_setup"
	for _, c := range sqlChecksThatWrite(table, d == sqldb.Postgres) {
		t.Run(c.flag+" "+strings.ReplaceAll(c.check, table, "T"), func(t *testing.T) {
			args := []string{"sql", "-b", backend, "--setup", "CREATE TABLE " + marker + " (x INT)", "--attempt", "SELECT 1",
				c.flag, c.check, "-n", "2", "--bursts", "2", "--timeline=false"}
			if c.ran {
				args = append(args, "--teardown", "DROP TABLE "+marker)
			}
			_, stderr, code := execCmd(t, false, args...)
			if code != exitUsage || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, want %d saying %q:\n%s", code, exitUsage, c.want, stderr)
			}
			if got := read(); got != before {
				t.Errorf("the check changed the user's table: %s, was %s", got, before)
			}
			if tableExists(t, db, marker) {
				if !c.ran {
					t.Errorf("the setup ran before the check was refused")
				}
				_ = db.Exec(context.Background(), "DROP TABLE "+marker)
			}
			if tableExists(t, db, table+"_copy") {
				t.Errorf("SELECT INTO made a table")
				_ = db.Exec(context.Background(), "DROP TABLE "+table+"_copy")
			}
		})
	}
}

func TestChecksOnlyReadPostgres(t *testing.T) {
	runSQLChecksThatWrite(t, "postgres", sqldb.Postgres)
}

func TestChecksOnlyReadMySQL(t *testing.T) {
	runSQLChecksThatWrite(t, "mysql", sqldb.MySQL)
}

// On Redis, the server's COMMAND INFO judges each command of a check,
// before the setup runs: the writes are refused and the keys untouched;
// the reads run. (FLUSHDB and FLUSHALL are judged in internal/redisdb,
// which never sends them: a test that failed here would empty the shared
// server.)
func TestChecksOnlyReadRedis(t *testing.T) {
	rdb, p := testenv.OwnRedis(t)
	ctx := context.Background()
	set, counter, list, zset, marker := p+":s", p+":c", p+":l", p+":z", p+":setup"
	rdb.SAdd(ctx, set, "a", "b", "c")
	rdb.Set(ctx, counter, 5, 0)
	rdb.RPush(ctx, list, "x")
	state := func() string {
		members, _ := rdb.SMembers(ctx, set).Result()
		c, _ := rdb.Get(ctx, counter).Result()
		return fmt.Sprintf("%d members, counter %s", len(members), c)
	}
	before := state()
	for _, c := range []readOnlyCase{
		{"--effects", "DEL " + set, "DEL is flagged write or admin by the server's COMMAND INFO: --effects and --invariant only read; put writes in --setup", false, false},
		{"--effects", "INCR " + counter, "INCR is flagged write", false, false},
		{"--invariant", "SPOP " + set, "SPOP is flagged write", false, false},
		{"--effects", "SET " + counter + " 0", "SET is flagged write", false, false},
		{"--invariant", `EVAL "return redis.call('DEL', KEYS[1])" 1 ` + set, "EVAL is not flagged read-only", false, false},
		{"--effects", "MULTI\nDEL " + set + "\nEXEC", "MULTI is not flagged read-only", false, false},
		{"--effects", "GET " + counter + "\nDEL " + set, "DEL is flagged write", false, false},
		{"--effects", "SMEMBERS " + set, "the effects script's last statement returned an array of 3 elements", true, false},
		// A command named by a template: judged before it is sent.
		{"--effects", `{{"SPOP"}} ` + set, "SPOP is flagged write", true, false},
	} {
		t.Run(c.flag+" "+strings.ReplaceAll(c.check, p, "P"), func(t *testing.T) {
			rdb.Del(ctx, marker)
			args := []string{"redis", "--setup", "SET " + marker + " 1", "--attempt", "GET " + counter, c.flag, c.check, "-n", "2", "--bursts", "2", "--timeline=false"}
			_, stderr, code := execCmd(t, false, args...)
			if code != exitUsage || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, want %d saying %q:\n%s", code, exitUsage, c.want, stderr)
			}
			if got := state(); got != before {
				t.Errorf("the check changed the keys: %s, was %s", got, before)
			}
			if n := rdb.Exists(ctx, marker).Val(); n > 0 && !c.ran {
				t.Errorf("the setup ran before the check was refused")
			}
		})
	}
	for _, read := range []string{"GET " + counter, "SCARD " + set, "LLEN " + list, "EXISTS " + set, "ZCARD " + zset, `EVAL_RO "return 0" 0`, "OBJECT REFCOUNT " + set} {
		t.Run("reads "+strings.ReplaceAll(read, p, "P"), func(t *testing.T) {
			_, stderr, code := execCmd(t, false, "redis", "--attempt", "GET "+counter, "--effects", read, "-n", "2", "--bursts", "2", "--timeline=false")
			if code != exitOK && code != exitInconclusive {
				t.Errorf("exit %d:\n%s", code, stderr)
			}
		})
	}
}

// 'racetest http' checks read the same way, through the same code: each
// sql: and redis: form that writes, or returns several values, is exit 2
// and the data is as it was.
func TestHTTPChecksOnlyRead(t *testing.T) {
	pg, pgTable, pgRead := acctTable(t, sqldb.Postgres)
	_ = pg
	my, myTable, myRead := acctTable(t, sqldb.MySQL)
	_ = my
	rdb, p := testenv.OwnRedis(t)
	ctx := context.Background()
	set := p + ":s"
	rdb.SAdd(ctx, set, "a", "b", "c")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer srv.Close()
	state := func() string { return pgRead() + " | " + myRead() + " | " + fmt.Sprint(rdb.SCard(ctx, set).Val()) }
	before := state()
	for _, c := range []readOnlyCase{
		{"--effects", "sql:postgres:DELETE FROM " + pgTable, "--effects: DELETE is not a query: --effects and --invariant only read; put writes in --setup", false, false},
		{"--invariant", "sql:postgres:UPDATE " + pgTable + " SET balance = 0; SELECT 0", "UPDATE is not a query", false, false},
		{"--invariant", "sql:postgres:SELECT 0; COMMIT; DELETE FROM " + pgTable, "cannot insert multiple commands", true, true},
		{"--effects", "sql:postgres:WITH d AS (DELETE FROM " + pgTable + " RETURNING 1) SELECT count(*) FROM d", "the server refused it in a read-only transaction", true, false},
		{"--invariant", "sql:postgres:SELECT id FROM " + pgTable + " WHERE balance < 0 ORDER BY id", "--invariant: sql:postgres returned 2 rows", true, false},
		{"--effects", "sql:mysql:UPDATE " + myTable + " SET balance = balance + 100", "UPDATE is not a query", false, false},
		{"--invariant", "sql:mysql:SELECT 0; COMMIT; DELETE FROM " + myTable, "1064", true, true},
		{"--invariant", "sql:mysql:SELECT " + myTable + "_bump()", "the server refused it in a read-only transaction", true, false},
		{"--invariant", "sql:postgres:SELECT " + pgTable + "_bump()", "the server refused it in a read-only transaction", true, false},
		{"--invariant", "sql:mysql:SELECT id FROM " + myTable + " WHERE balance < 0 ORDER BY id", "--invariant: sql:mysql returned 2 rows", true, false},
		{"--effects", "redis:DEL " + set, "--effects: DEL is flagged write or admin by the server's COMMAND INFO", false, false},
		{"--invariant", "redis:SPOP " + set, "SPOP is flagged write", false, false},
		{"--effects", "redis:SMEMBERS " + set, "returned an array of 3 elements", true, false},
		// GET with the sample values, SPOP with the run's: judged again
		// before it is sent.
		{"--effects", `redis:{{if eq .Token "0000000000000000"}}GET{{else}}SPOP{{end}} ` + set, "SPOP is flagged write", true, false},
	} {
		t.Run(c.flag+" "+c.check, func(t *testing.T) {
			_, stderr, code := execCmd(t, false, "http", srv.URL, c.flag, c.check, "-n", "2", "--bursts", "2", "--timeline=false")
			if c.server {
				// Refused by the server as a statement (one statement per
				// request), before it ran: nothing was written.
				if code == exitOK || !strings.Contains(stderr, c.want) {
					t.Errorf("exit %d, want a failure saying %q:\n%s", code, c.want, stderr)
				}
			} else if code != exitUsage || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, want %d saying %q:\n%s", code, exitUsage, c.want, stderr)
			}
			if got := state(); got != before {
				t.Errorf("the check changed the data: %s, was %s", got, before)
			}
		})
	}
}

// A check refused from its text is refused before anything connects: the
// servers below are never dialled (there is none), and the exit is 2, not
// 3. MongoDB's write commands are refused this way, with no server at all.
func TestChecksThatWriteRefusedBeforeConnecting(t *testing.T) {
	noServer := []string{"--postgres-url", "postgres://nobody@127.0.0.1:1/x?connect_timeout=1", "--mysql-dsn", "nobody@tcp(127.0.0.1:1)/x",
		"--mongo-uri", "mongodb://127.0.0.1:1/?directConnection=true&serverSelectionTimeoutMS=500"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sql", "-b", "postgres", "--attempt", "SELECT 1", "--effects", "DELETE FROM t"}, "DELETE is not a query"},
		{[]string{"sql", "-b", "mysql", "--attempt", "SELECT 1", "--invariant", "SELECT 0;\nUPDATE t SET v = 0"}, "UPDATE is not a query"},
		{[]string{"mongo", "--attempt", `{"ping": 1}`, "--effects", `{"delete": "t", "deletes": [{"q": {}, "limit": 0}]}`}, `"delete" is not a read`},
		{[]string{"mongo", "--attempt", `{"ping": 1}`, "--effects", `{"update": "t", "updates": [{"q": {}, "u": {"$inc": {"v": 100}}}]}`}, `"update" is not a read`},
		{[]string{"mongo", "--attempt", `{"ping": 1}`, "--invariant", `{"drop": "t_{{.RunID}}"}`}, `"drop" is not a read`},
		{[]string{"mongo", "--attempt", `{"ping": 1}`, "--invariant", `{"findAndModify": "t", "query": {}, "remove": true}`}, `"findAndModify" is not a read`},
		{[]string{"mongo", "--attempt", `{"ping": 1}`, "--effects", `{"aggregate": "t", "pipeline": [{"$merge": {"into": "u"}}], "cursor": {}}`}, "with a $merge stage writes"},
	} {
		_, stderr, code := execCmd(t, false, append(c.args, noServer...)...)
		if code != exitUsage || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, "--effects and --invariant only read; put writes in --setup") {
			t.Errorf("%v: exit %d, want %d saying %q:\n%s", c.args, code, exitUsage, c.want, stderr)
		}
	}
}
