package script

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/racetest/racetest/runner"
)

// fakeConn answers statements from a function and records what it was sent.
type fakeConn struct {
	sent      []string
	answer    func(st Stmt) (Reply, error)
	rollbacks int
}

func (f *fakeConn) Exec(_ context.Context, st Stmt) (Reply, error) {
	text := st.Text
	if st.Args != nil {
		text = strings.Join(st.Args, "|")
	}
	f.sent = append(f.sent, text)
	if f.answer == nil {
		return Reply{Rows: 1}, nil
	}
	return f.answer(st)
}

var errDup = errors.New("duplicate key")
var errDeadlock = errors.New("deadlock")
var errNoTable = errors.New("no such table")

func (f *fakeConn) Classify(err error) (runner.Class, bool) {
	switch err {
	case errDup:
		return runner.Declined, false
	case errDeadlock:
		return runner.Conflict, false
	case errNoTable:
		return runner.Error, true
	}
	return runner.Error, false
}

func (f *fakeConn) Rollback(context.Context) error { f.rollbacks++; return nil }

const naive = `BEGIN;
SELECT count(*) AS used FROM redemptions WHERE code = '{{.Token}}' \gset
\if :used = 0
  INSERT INTO redemptions(code, by) VALUES ('{{.Token}}', {{.Attempt}});
\else
  \decline already used
\endif
COMMIT;
`

func mustParse(t *testing.T, src string, d Dialect) *Script {
	t.Helper()
	s, err := Parse("redeem.sql", src, d, ScopeAttempt, "--attempt")
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return s
}

func TestNaiveRedeemTakesTheBranchTheCountSays(t *testing.T) {
	s := mustParse(t, naive, SQL)
	for _, tc := range []struct {
		used     string
		class    runner.Class
		inserted bool
	}{{"0", runner.Executed, true}, {"1", runner.Declined, false}} {
		f := &fakeConn{answer: func(st Stmt) (Reply, error) {
			if st.Query {
				return Reply{Columns: []string{"used"}, Values: []string{tc.used}, Rows: 1}, nil
			}
			return Reply{Rows: 1}, nil
		}}
		var marks []string
		o := s.Start(f, Data{RunID: "r1", Token: "r1-7", Burst: 7, Attempt: 3}, nil).Run(context.Background(), func(l string) { marks = append(marks, l) })
		if o.Class != tc.class {
			t.Fatalf("used=%s: outcome %v (%v), want %v", tc.used, o.Class, o.Err, tc.class)
		}
		joined := strings.Join(f.sent, "\n")
		if got := strings.Contains(joined, "INSERT INTO redemptions(code, by) VALUES ('r1-7', 3);"); got != tc.inserted {
			t.Errorf("used=%s: inserted %v, want %v; sent:\n%s", tc.used, got, tc.inserted, joined)
		}
		if tc.inserted {
			if want := "redeem.sql:2 redeem.sql:4 redeem.sql:8"; strings.Join(marks, " ") != want {
				t.Errorf("marks %q, want %q (BEGIN unmarked)", marks, want)
			}
			if f.rollbacks != 0 {
				t.Errorf("a committed attempt was rolled back")
			}
		} else {
			if f.rollbacks != 1 {
				t.Errorf("a declined attempt inside BEGIN: %d rollbacks, want 1", f.rollbacks)
			}
			if !strings.Contains(o.Err.Error(), "redeem.sql:6") || !strings.Contains(o.Err.Error(), "already used") {
				t.Errorf("decline reason %q", o.Err)
			}
		}
	}
}

func TestOutcomesFollowTheStoresErrors(t *testing.T) {
	s := mustParse(t, "BEGIN;\nINSERT INTO r VALUES ('{{.Token}}');\nCOMMIT;\n", SQL)
	for err, want := range map[error]runner.Class{errDup: runner.Declined, errDeadlock: runner.Conflict, errNoTable: runner.Error, context.DeadlineExceeded: runner.Unknown} {
		f := &fakeConn{answer: func(st Stmt) (Reply, error) {
			if strings.HasPrefix(st.Text, "INSERT") {
				return Reply{}, err
			}
			return Reply{}, nil
		}}
		o := s.Start(f, Data{Token: "t"}, nil).Run(context.Background(), nil)
		if o.Class != want {
			t.Errorf("%v: class %v, want %v", err, o.Class, want)
		}
		if f.rollbacks != 1 {
			t.Errorf("%v: %d rollbacks after a failure inside BEGIN, want 1", err, f.rollbacks)
		}
		if len(f.sent) != 2 {
			t.Errorf("%v: the script went on after the failure: %q", err, f.sent)
		}
		var se *StatementError
		if want != runner.Unknown && (!errors.As(o.Err, &se) || se.Pos.Line != 2) {
			t.Errorf("%v: error %v does not name line 2", err, o.Err)
		}
		if want == runner.Error && !IsScriptError(o.Err) {
			t.Errorf("a missing table is the statement's fault: %v", o.Err)
		}
	}
}

func TestConditionalRedeemReadsRowCount(t *testing.T) {
	s := mustParse(t, "UPDATE coupons SET used = 1 WHERE code = '{{.Token}}' AND used = 0;\n\\if :ROW_COUNT = 0\n\\decline\n\\endif\nINSERT INTO r VALUES (1);\n", SQL)
	for rows, want := range map[int64]runner.Class{0: runner.Declined, 1: runner.Executed} {
		f := &fakeConn{answer: func(Stmt) (Reply, error) { return Reply{Rows: rows}, nil }}
		if o := s.Start(f, Data{}, nil).Run(context.Background(), nil); o.Class != want {
			t.Errorf("rows %d: %v, want %v", rows, o.Class, want)
		}
	}
}

func TestElifElseChains(t *testing.T) {
	s := mustParse(t, `SELECT 1 AS v \gset
\if :v = 1
SELECT 'one';
\elif :v = 2
SELECT 'two';
\else
SELECT 'other';
\endif
\if :v >= 2
SELECT 'big';
\endif
SELECT 'end';
`, SQL)
	for v, want := range map[string]string{"1": "one end", "2": "two big end", "7": "other big end", "10": "other big end"} {
		f := &fakeConn{answer: func(st Stmt) (Reply, error) {
			return Reply{Columns: []string{"v"}, Values: []string{v}, Rows: 1}, nil
		}}
		s.Start(f, Data{}, nil).Run(context.Background(), nil)
		var got []string
		for _, q := range f.sent[1:] {
			got = append(got, strings.Trim(strings.TrimPrefix(q, "SELECT "), "';"))
		}
		if strings.Join(got, " ") != want {
			t.Errorf("v=%s: ran %q, want %q", v, got, want)
		}
	}
}

func TestInterpolation(t *testing.T) {
	e := &Exec{conn: &fakeConn{}, vars: map[string]string{"name": "O'Brien", "n": "5", "col": `we"ird`}}
	for in, want := range map[string]string{
		"SELECT :n, :'name', :\"col\"":  `SELECT 5, 'O''Brien', "we""ird"`,
		"SELECT ':n', x::int, :missing": "SELECT ':n', x::int, :missing",
		"SELECT 1 -- :n\n, :n":          "SELECT 1 -- :n\n, 5",
		"SELECT $$ :n $$, :n":           "SELECT $$ :n $$, 5",
		"SELECT a:n FROM t":             "SELECT a5 FROM t",
		"SELECT 'it''s :n', :n":         "SELECT 'it''s :n', 5",
	} {
		if got := e.interpolate(in); got != want {
			t.Errorf("interpolate(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRedisScript(t *testing.T) {
	s := mustParse(t, `# naive
GET coupon:{{.Token}}:used \gset used
\if :used = ''
  SET coupon:{{.Token}}:used {{.Attempt}}
  SADD "redeemed by:{{.Token}}" :used w{{.Attempt}}
\else
  \decline
\endif
`, Redis)
	f := &fakeConn{answer: func(st Stmt) (Reply, error) {
		if st.Args[0] == "GET" {
			return Reply{Values: []string{""}}, nil
		}
		return Reply{Values: []string{"OK"}, Rows: 1}, nil
	}}
	var marks []string
	o := s.Start(f, Data{Token: "t9", Attempt: 2}, nil).Run(context.Background(), func(l string) { marks = append(marks, l) })
	if o.Class != runner.Executed {
		t.Fatalf("outcome %v %v", o.Class, o.Err)
	}
	want := "GET|coupon:t9:used\nSET|coupon:t9:used|2\nSADD|redeemed by:t9||w2"
	if got := strings.Join(f.sent, "\n"); got != want {
		t.Errorf("sent\n%s\nwant\n%s", got, want)
	}
	if strings.Join(marks, " ") != "redeem.sql:2 redeem.sql:4 redeem.sql:5" {
		t.Errorf("marks %q", marks)
	}
}

func TestScriptErrorsAtRunTime(t *testing.T) {
	for name, tc := range map[string]struct {
		src   string
		reply Reply
		msg   string
	}{
		"unset variable":   {"\\if :nope = 1\n\\endif\n", Reply{}, "variable nope is not set"},
		"gset no row":      {"SELECT 1 AS a WHERE false \\gset\n", Reply{Columns: []string{"a"}}, "returned no row"},
		"gset two rows":    {"SELECT a FROM t \\gset\n", Reply{Columns: []string{"a"}, Values: []string{"1"}, Rows: 2}, "returned 2 rows"},
		"bad column name":  {"SELECT count(*) FROM t \\gset\n", Reply{Columns: []string{"count(*)"}, Values: []string{"1"}, Rows: 1}, "name it with AS"},
		"open transaction": {"BEGIN;\nSELECT 1;\n", Reply{Rows: 1}, "ended inside this transaction"},
		"not boolean":      {"SELECT 'x' AS v \\gset\n\\if :v\n\\endif\n", Reply{Columns: []string{"v"}, Values: []string{"x"}, Rows: 1}, "not a boolean"},
		"bad sleep":        {"SELECT 'x' AS v \\gset\n\\sleep :v ms\n", Reply{Columns: []string{"v"}, Values: []string{"x"}, Rows: 1}, "not a duration"},
	} {
		s := mustParse(t, tc.src, SQL)
		f := &fakeConn{answer: func(Stmt) (Reply, error) { return tc.reply, nil }}
		o := s.Start(f, Data{}, nil).Run(context.Background(), nil)
		var se *ScriptError
		if o.Class != runner.Error || !errors.As(o.Err, &se) || !strings.Contains(o.Err.Error(), tc.msg) {
			t.Errorf("%s: outcome %v %v, want a script error saying %q", name, o.Class, o.Err, tc.msg)
		}
	}
}

func TestStepByStep(t *testing.T) {
	s := mustParse(t, naive, SQL)
	f := &fakeConn{answer: func(Stmt) (Reply, error) {
		return Reply{Columns: []string{"used"}, Values: []string{"0"}, Rows: 1}, nil
	}}
	e := s.Start(f, Data{Token: "t"}, nil)
	var lines []int
	for st := e.Next(); st != nil; st = e.Next() {
		lines = append(lines, st.Pos.Line)
		before := len(f.sent)
		e.Step(context.Background())
		if st.Kind == Statement && len(f.sent) != before+1 {
			t.Fatalf("line %d: a statement step sent %d statements", st.Pos.Line, len(f.sent)-before)
		}
		if st.Kind != Statement && len(f.sent) != before {
			t.Fatalf("line %d: a meta step sent a statement", st.Pos.Line)
		}
	}
	if got := fmt.Sprint(lines); got != "[1 2 3 4 5 8]" {
		t.Errorf("steps at lines %s, want [1 2 3 4 5 8]", got)
	}
	if !e.Done() || e.Outcome().Class != runner.Executed {
		t.Errorf("done %v outcome %v", e.Done(), e.Outcome())
	}
}

func TestParseErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		src, where string
		d          Dialect
		scope      Scope
		pos, msg   string
	}{
		"unknown meta":       {"SELECT 1;\n  \\foo bar\n", "", SQL, ScopeAttempt, "redeem.sql:2:3", `unknown meta-command \foo — supported: \gset, \if`},
		"typo after a query": {"SELECT 1 AS n \\gsett\n", "", SQL, ScopeAttempt, "redeem.sql:1:15", `unknown meta-command \gsett (did you mean \gset?) — supported:`},
		"near miss":          {"SELECT 1;\n\\sleap 2\n", "", SQL, ScopeAttempt, "redeem.sql:2:1", `unknown meta-command \sleap (did you mean \sleep?)`},
		"unterminated":       {"SELECT 'abc;\n", "", SQL, ScopeAttempt, "redeem.sql:1:8", "unterminated ' quote"},
		"endif alone":        {"\\endif\n", "", SQL, ScopeAttempt, "redeem.sql:1:1", `\endif without \if`},
		"if open":            {"SELECT 1;\n\\if 1\nSELECT 2;\n", "", SQL, ScopeAttempt, "redeem.sql:2:1", `\if without \endif`},
		"else twice":         {"\\if 1\n\\else\n\\else\n\\endif\n", "", SQL, ScopeAttempt, "redeem.sql:3:1", `after \else`},
		"meta in statement":  {"SELECT 1\n\\if 1\n", "", SQL, ScopeAttempt, "redeem.sql:2:1", "unfinished statement"},
		"bad template":       {"SELECT '{{.Tokn}}';\n", "--attempt", SQL, ScopeAttempt, "redeem.sql:1:9", "Tokn"},
		"scope":              {"CREATE TABLE t{{.Token}} (a int);\n", "--setup", SQL, ScopeRun, "redeem.sql:1:15", "--setup knows {{.RunID}}"},
		"bad condition":      {"\\if :a = = 1\n\\endif\n", "", SQL, ScopeAttempt, "redeem.sql:1:1", "want one value"},
		"condition quote":    {"\\if :a = 'abc\n\\endif\n", "", SQL, ScopeAttempt, "redeem.sql:1:1", "unterminated ' quote"},
		"condition quote 2":  {"\\if :a = 'it''s\n\\endif\n", "", SQL, ScopeAttempt, "redeem.sql:1:1", "unterminated ' quote"},
		"bad sleep unit":     {"\\sleep 5 min\n", "", SQL, ScopeAttempt, "redeem.sql:1:1", "unknown unit"},
		"sleep quote":        {"\\sleep '\n", "", SQL, ScopeAttempt, "redeem.sql:1:1", "unterminated ' quote"},
		"sleep quote 2":      {"\\sleep '20 ms\n", "", SQL, ScopeAttempt, "redeem.sql:1:1", "unterminated ' quote"},
		"gset alone":         {"SELECT 1;\n\\gset\n", "", SQL, ScopeAttempt, "redeem.sql:2:1", `\gset must follow a query`},
		"redis quote":        {"SET a \"b\n", "", Redis, ScopeAttempt, "redeem.sql:1:7", "unterminated \" quote"},
		"redis gset name":    {"GET a \\gset\n", "", Redis, ScopeAttempt, "redeem.sql:1:7", "needs a variable name"},
		"redis meta":         {"GET a\n\\set x 1\n", "", Redis, ScopeAttempt, "redeem.sql:2:1", "unknown meta-command \\set"},
	} {
		_, err := Parse("redeem.sql", tc.src, tc.d, tc.scope, tc.where)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%s: error %v, want a syntax error", name, err)
			continue
		}
		if se.Pos.String() != tc.pos || !strings.Contains(se.Msg, tc.msg) {
			t.Errorf("%s: %v, want %s: …%s…", name, err, tc.pos, tc.msg)
		}
	}
}

func TestParseKeepsQuotedSemicolonsAndComments(t *testing.T) {
	s := mustParse(t, `-- a comment; with a semicolon
CREATE FUNCTION f() RETURNS int AS $$ SELECT 1; $$ LANGUAGE sql;
INSERT INTO t VALUES ('a;b', "c;d"); /* ; */ SELECT 1;
SELECT 2; \gset
`, SQL)
	if len(s.Steps) != 4 {
		t.Fatalf("%d steps, want 4: %+v", len(s.Steps), s.Steps)
	}
	if !strings.Contains(s.Steps[0].Text, "$$ SELECT 1; $$") || s.Steps[1].Text != `INSERT INTO t VALUES ('a;b', "c;d");` {
		t.Errorf("steps %q / %q", s.Steps[0].Text, s.Steps[1].Text)
	}
	if !s.Steps[3].Gset || s.Steps[2].Gset {
		t.Errorf("\\gset after ';' on the same line applies to that statement only")
	}
	if s.Steps[2].Pos.Line != 3 || s.Steps[2].Pos.Col != 46 {
		t.Errorf("position %v", s.Steps[2].Pos)
	}
}

// TestParseLastStatementWithoutSemicolon: the last statement may go
// without its ';', as psql takes `-c 'SELECT 1'` and a file's last line: an
// inline --effects is one statement. Only the last: a statement followed
// by a meta-command is still unfinished.
func TestParseLastStatementWithoutSemicolon(t *testing.T) {
	for src, want := range map[string][]string{
		"SELECT count(*) FROM redemptions WHERE code = '{{.Token}}'": {"SELECT count(*) FROM redemptions WHERE code = '{{.Token}}';"},
		"SELECT 1;\nSELECT 2\n":             {"SELECT 1;", "SELECT 2;"},
		"SELECT 1;\nSELECT 2 -- the last\n": {"SELECT 1;", "SELECT 2;"},
	} {
		s := mustParse(t, src, SQL)
		var got []string
		for _, st := range s.Steps {
			got = append(got, st.Text)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%q: steps %q, want %q", src, got, want)
		}
	}
	s := mustParse(t, "SELECT 1;\n  SELECT 2", SQL)
	if p := s.Steps[1].Pos; p.Line != 2 || p.Col != 3 {
		t.Errorf("the last statement's position is %v, want line 2, column 3", p)
	}
}

func TestSleep(t *testing.T) {
	s := mustParse(t, "\\sleep 2 ms\n\\sleep 0.001\n\\sleep 1ms\n", SQL)
	want := []string{"2ms", "1ms", "1ms"}
	for i, st := range s.Steps {
		d, err := st.Sleep.duration(st.Sleep.text)
		if err != nil || d.String() != want[i] {
			t.Errorf("step %d: %v %v, want %s", i, d, err, want[i])
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s = mustParse(t, "\\sleep 10\n", SQL)
	if o := s.Start(&fakeConn{}, Data{}, nil).Run(ctx, nil); o.Class != runner.Error {
		t.Errorf("a cancelled sleep: %v", o.Class)
	}
}

func TestMongoScript(t *testing.T) {
	s := mustParse(t, `# find, then insert
{"findAndModify": "coupons", "query": {"code": "{{.Token}}", "used": false},
 "update": {"$set": {"used": true}}} \gset fm_
\if :fm_lastErrorObject_n = 0
  \decline
\endif
{"insert": "r", "documents": [{"code": "{{.Token}}", "by": ":fm_value_code", "attempt": {{.Attempt}}}]}
`, Mongo)
	if len(s.Steps) != 4 || s.Steps[0].Pos.Line != 2 || !s.Steps[0].Gset || s.Steps[0].GsetName != "fm_" {
		t.Fatalf("steps %+v", s.Steps)
	}
	f := &fakeConn{answer: func(st Stmt) (Reply, error) {
		if strings.Contains(st.Text, "findAndModify") {
			return mongoReplyFor(t, `{"lastErrorObject": {"n": 1, "updatedExisting": true}, "value": {"code": "c1", "used": false}, "ok": 1}`), nil
		}
		return Reply{Rows: 1}, nil
	}}
	o := s.Start(f, Data{Token: "c1", Attempt: 4}, nil).Run(context.Background(), nil)
	if o.Class != runner.Executed || len(f.sent) != 2 {
		t.Fatalf("outcome %v %v, sent %q", o.Class, o.Err, f.sent)
	}
	if want := `{"insert": "r", "documents": [{"code": "c1", "by": "c1", "attempt": 4}]}`; f.sent[1] != want {
		t.Errorf("sent %s, want %s", f.sent[1], want)
	}
	for src, want := range map[string]string{
		"{\"find\": \"c\",\n \"filter\": {\"a\": 1}\n": "redeem.sql:1:1: the document does not close",
		"{\"find\": c}\n":             "redeem.sql:1:1: not a JSON document",
		"find c\n":                    "redeem.sql:1:1: a command is a JSON document",
		"{\"find\": \"c\"} \\gsett\n": `only \gset may follow`,
		"{\"find\": \"{{.Nope}}\"}\n": "Nope",
		"{}\n":                        "names no command",
	} {
		_, err := Parse("redeem.sql", src, Mongo, ScopeAttempt, "--attempt")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want …%s…", src, err, want)
		}
	}
}

func mongoReplyFor(t *testing.T, ext string) Reply {
	t.Helper()
	var raw bson.Raw
	if err := bson.UnmarshalExtJSON([]byte(ext), false, &raw); err != nil {
		t.Fatal(err)
	}
	return mongoReply(raw)
}

// Each marked step has a name of its own, so that an explorer's schedule
// names one statement: the column is added where a line holds several.
func TestStepLabelsAreUnique(t *testing.T) {
	s := mustParse(t, "BEGIN; SELECT 1; SELECT 2;\nCOMMIT;\n", SQL)
	seen := map[string]bool{}
	var labels []string
	for i := range s.Steps {
		if st := &s.Steps[i]; st.Marked() {
			l := s.StepLabel(st)
			if seen[l] {
				t.Errorf("label %q names two steps", l)
			}
			seen[l] = true
			labels = append(labels, l)
		}
	}
	if strings.Join(labels, " ") != "redeem.sql:1:8 redeem.sql:1:18 redeem.sql:2" {
		t.Errorf("labels %v, want the column only where a line holds two marked statements", labels)
	}
}

// A plain SELECT is a read an explorer may commute; a locking read, a
// write or a Redis write is not.
func TestReadOnlySteps(t *testing.T) {
	for _, c := range []struct {
		d    Dialect
		src  string
		want bool
	}{
		{SQL, "SELECT used FROM c WHERE code = 'x';", true},
		{SQL, "SELECT used FROM c WHERE code = 'x' FOR UPDATE;", false},
		{SQL, "SELECT used FROM c LOCK IN SHARE MODE;", false},
		{SQL, "UPDATE c SET used = 1;", false},
		{Redis, "GET coupon:x", true},
		{Redis, "SET coupon:x 1", false},
	} {
		s := mustParse(t, c.src, c.d)
		tg := &Target{sc: Scripts{Attempt: s}}
		label := s.StepLabel(&s.Steps[0])
		if got := tg.ReadOnly(0, label); got != c.want {
			t.Errorf("%q: read-only %v, want %v", c.src, got, c.want)
		}
		if d := tg.DescribeStep(label); !strings.HasSuffix(d, "("+label+")") {
			t.Errorf("%q described as %q: want the text and (%s)", c.src, d, label)
		}
	}
}
