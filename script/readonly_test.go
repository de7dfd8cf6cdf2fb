package script

import (
	"errors"
	"strings"
	"testing"

	"github.com/racetest/racetest/internal/mongodb"
	"github.com/racetest/racetest/internal/sqldb"
)

// A check returns exactly one value (issue 42, item 7): one row of one
// column on SQL, one reply on Redis, one number or boolean on MongoDB;
// anything else says what it returned.
func TestCheckReturnsOneValue(t *testing.T) {
	for _, c := range []struct {
		name    string
		count   func(Reply) (string, int, bool, error)
		r       Reply
		v       string
		n       int
		counted bool
		err     string
	}{
		{"sql one", sqlCount, Reply{Columns: []string{"count"}, Values: []string{"3"}, Rows: 1}, "3", 0, false, ""},
		{"sql rows", sqlCount, Reply{Columns: []string{"id"}, Values: []string{"2"}, Rows: 3}, "", 0, false, "returned 3 rows"},
		{"sql columns", sqlCount, Reply{Columns: []string{"a", "b"}, Values: []string{"1", "2"}, Rows: 1}, "", 0, false, "returned 2 columns"},
		{"sql none", sqlCount, Reply{}, "", 0, false, "returned no row"},
		{"redis integer", redisCount, redisReply(int64(4)), "4", 0, false, ""},
		{"redis nil", redisCount, redisReply(nil), "", 0, true, ""},
		{"redis array", redisCount, redisReply([]any{"a", "b", "c"}), "", 0, false, "returned an array of 3 elements"},
		{"redis empty array", redisCount, redisReply([]any{}), "", 0, false, "returned an empty array"},
		{"redis array of one", redisCount, redisReply([]any{"7"}), "7", 0, false, ""},
		{"redis map", redisCount, redisReply(map[any]any{"a": "1", "b": "2"}), "", 0, false, "returned an array of 2 elements"},
		{"mongo count", mongoCount, Reply{Kind: ReplyCount, Rows: 5, Command: "count"}, "", 5, true, ""},
		{"mongo find", mongoCount, Reply{Kind: ReplyDocuments, Rows: 3, Command: "find", Columns: []string{"_id", "balance"}, Values: []string{"1", "-1"}}, "", 3, true, ""},
		{"mongo find beyond its batch", mongoCount, Reply{Kind: ReplyDocuments, Rows: 101, More: true, Command: "find"}, "", 0, false, "more documents than its first batch"},
		{"mongo $count", mongoCount, Reply{Kind: ReplyDocuments, Rows: 1, Command: "aggregate", Columns: []string{"n"}, Values: []string{"3"}}, "3", 0, false, ""},
		{"mongo $count of nothing", mongoCount, Reply{Kind: ReplyDocuments, Command: "aggregate"}, "", 0, true, ""},
		{"mongo boolean", mongoCount, Reply{Kind: ReplyDocuments, Rows: 1, Command: "aggregate", Columns: []string{"_id", "ok"}, Values: []string{"", "false"}}, "false", 0, false, ""},
		{"mongo documents", mongoCount, Reply{Kind: ReplyDocuments, Rows: 3, Command: "aggregate", Columns: []string{"_id"}, Values: []string{"1"}}, "", 0, false, "returned 3 documents"},
		{"mongo fields", mongoCount, Reply{Kind: ReplyDocuments, Rows: 1, Command: "aggregate", Columns: []string{"_id", "a", "b"}, Values: []string{"", "1", "2"}}, "", 0, false, "a document of 2 fields"},
		{"mongo distinct", mongoCount, Reply{Rows: 1, Command: "distinct", Columns: []string{"ok"}, Values: []string{"1"}}, "", 0, false, "returned no count"},
	} {
		v, n, counted, err := c.count(c.r)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || v != c.v || n != c.n || counted != c.counted {
			t.Errorf("%s: %q %d %v %v, want %q %d %v", c.name, v, n, counted, err, c.v, c.n, c.counted)
		}
	}
}

// A check's statement that writes is refused as the script loads, before
// anything connects: SQL by its first word, MongoDB by its command.
func TestLoadRefusesChecksThatWrite(t *testing.T) {
	field := func(n string) string { return "--" + n }
	for _, c := range []struct {
		d       Dialect
		spec    Spec
		refused bool
	}{
		{SQL, Spec{Attempt: []string{"SELECT 1"}, Effects: "DELETE FROM t"}, true},
		{SQL, Spec{Attempt: []string{"SELECT 1"}, Invariants: []string{"UPDATE t SET v = 0; SELECT 0"}}, true},
		{SQL, Spec{Attempt: []string{"SELECT 1"}, Effects: "{{if .Burst}}DELETE{{else}}DELETE{{end}} FROM t"}, true},
		{SQL, Spec{Attempt: []string{"DELETE FROM t"}, Setup: "DELETE FROM t", Effects: "SELECT count(*) FROM t"}, false},
		{Mongo, Spec{Attempt: []string{`{"ping": 1}`}, Effects: `{"delete": "t", "deletes": [{"q": {}, "limit": 0}]}`}, true},
		{Mongo, Spec{Attempt: []string{`{"ping": 1}`}, Invariants: []string{`{"drop": "t_{{.RunID}}"}`}}, true},
		{Mongo, Spec{Attempt: []string{`{"ping": 1}`}, Effects: `{"aggregate": "t", "pipeline": [{"$out": "u"}], "cursor": {}}`}, true},
		{Mongo, Spec{Attempt: []string{`{"ping": 1}`}, Effects: `{"count": "t_{{.RunID}}"}`}, false},
		{Redis, Spec{Attempt: []string{"GET a"}, Effects: "DEL a"}, false}, // the server judges, at Prepare
	} {
		_, err := c.spec.Load("", c.d, field)
		var se *sqldb.WriteError
		var me *mongodb.WriteError
		refused := errors.As(err, &se) || errors.As(err, &me)
		if refused != c.refused || !c.refused && err != nil {
			t.Errorf("%v %+v: %v, want refused %v", c.d, c.spec, err, c.refused)
		}
	}
}
