package script

import (
	"context"
	"strings"
	"testing"
)

// branch runs `\if COND` with :v (and :w) read from the store, and says
// which branch the interpreter took: a slip in a condition's semantics
// turns a naive script's "already used" into "go ahead", and the verdict
// with it (issue 25 item 8, issue 27).
func branch(t *testing.T, cond, v, w string) string {
	t.Helper()
	return branchWith(t, cond, Data{}, v, w)
}

// branchWith is branch for a burst's data, which templates in cond read.
func branchWith(t *testing.T, cond string, d Data, v, w string) string {
	t.Helper()
	s := mustParse(t, "SELECT 1 AS v, 2 AS w \\gset\n\\if "+cond+"\nSELECT 'then';\n\\else\nSELECT 'else';\n\\endif\n", SQL)
	f := &fakeConn{answer: func(st Stmt) (Reply, error) {
		return Reply{Columns: []string{"v", "w"}, Values: []string{v, w}, Rows: 1}, nil
	}}
	o := s.Start(f, d, nil).Run(context.Background(), nil)
	if len(f.sent) != 2 {
		t.Fatalf(`\if %s with v=%q w=%q: %v, sent %q`, cond, v, w, o.Err, f.sent)
	}
	return strings.Trim(strings.TrimPrefix(f.sent[1], "SELECT "), "';")
}

// A value read as a boolean, as psql's \if reads it: 0 is false.
func TestIfReadsAValueAsPsqlDoes(t *testing.T) {
	for v, want := range map[string]string{
		"0": "else", "1": "then", "false": "else", "true": "then", "f": "else", "t": "then",
		"no": "else", "yes": "then", "off": "else", "on": "then", "OFF": "else", " 0 ": "else",
	} {
		if got := branch(t, ":v", v, ""); got != want {
			t.Errorf(`\if :v with v=%q took %s, want %s`, v, got, want)
		}
	}
	// Neither a boolean nor a number: an error, never a branch.
	s := mustParse(t, "SELECT 1 AS v \\gset\n\\if :v\nSELECT 'then';\n\\endif\n", SQL)
	for _, v := range []string{"o", "2", "maybe", ""} {
		f := &fakeConn{answer: func(Stmt) (Reply, error) { return Reply{Columns: []string{"v"}, Values: []string{v}, Rows: 1}, nil }}
		if o := s.Start(f, Data{}, nil).Run(context.Background(), nil); o.Err == nil || len(f.sent) != 1 {
			t.Errorf(`\if :v with v=%q: err %v, sent %q: want an error and no branch`, v, o.Err, f.sent)
		}
	}
}

// Two values compare as numbers only when both are numbers; otherwise as
// text (10 > 9 as numbers, '10' < '9' as text).
func TestIfComparesNumbersAsNumbersAndTextAsText(t *testing.T) {
	for _, tc := range []struct{ cond, v, w, want string }{
		{":v > :w", "10", "9", "then"},       // numbers
		{":v > :w", "10", "9x", "else"},      // text: "10" < "9x"
		{":v > :w", "10x", "9", "else"},      // text: "10x" < "9"
		{":v < :w", "abc", "abd", "then"},    // text
		{":v = :w", "1.0", "1", "then"},      // numbers: equal
		{":v = :w", "1.0", "1x", "else"},     // text: not equal
		{":v = :w", " 1", "1", "then"},       // numbers read past spaces
		{":v = abc", "abc", "", "then"},      // a bare word is text
		{":v != abc", "abd", "", "then"},     // text
		{":v != :w", "2", "2.0", "else"},     // numbers: equal
		{":v <= :w", "2", "2", "then"},       // equality is <=
		{":v <= :w", "2", "3", "then"},       //
		{":v <= :w", "3", "2", "else"},       //
		{":v >= :w", "2", "2", "then"},       // equality is >=
		{":v >= :w", "1", "2", "else"},       //
		{":v < :w", "2", "2", "else"},        // equality is not <
		{":v > :w", "2", "2", "else"},        // nor >
		{":v <= :w", "b", "b", "then"},       // text equality is <=
		{":v >= :w", "b", "b", "then"},       // and >=
		{":v < :w", "b", "b", "else"},        //
		{":v > :w", "b", "a", "then"},        //
		{":v <= :w", "b", "a", "else"},       //
		{":v = :w", "-1", "-1.0", "then"},    //
		{":'v' = :'w'", "7", "7", "then"},    // :'name' is the variable too
		{":'v'<:w", "7", "8", "then"},        //
		{":v < :w", "-2", "-1", "then"},      //
		{":v > :w", "-2", "-1", "else"},      //
		{":v >= :w", "-1", "-2", "then"},     //
		{":v = :w", "abc", "abc", "then"},    //
		{":v != :w", "abc", "abc", "else"},   //
		{":v < :w", "9", "10", "then"},       // numbers, not text ("9" > "10")
		{":v >= :w", "9", "10", "else"},      //
		{":v <> :w", "1", "2", "then"},       // <> is !=
		{":v == :w", "1", "1", "then"},       // == is =
		{":v = 'it''s'", "it's", "", "then"}, // '' is a quote inside quotes
		{":v = 'it''s'", "its", "", "else"},
		{"'a b' = :v", "a b", "", "then"}, // a quoted literal keeps its spaces
	} {
		if got := branch(t, tc.cond, tc.v, tc.w); got != tc.want {
			t.Errorf(`\if %s with v=%q w=%q took %s, want %s`, tc.cond, tc.v, tc.w, got, tc.want)
		}
	}
}

// A template is an operand too, with or without spaces around the
// operator: \if :v = {{.Token}} compares the value read with the burst's
// token.
func TestIfComparesWithATemplate(t *testing.T) {
	for _, tc := range []struct{ cond, v, want string }{
		{":v = {{.Token}}", "run-3", "then"},
		{":v = {{.Token}}", "run-4", "else"},
		{"{{.Token}}!=:v", "run-3", "else"},
		{"{{.Token}}!=:v", "run-4", "then"},
		{"{{.Burst}}<:v", "4", "then"},
		{"{{.Burst}}<:v", "3", "else"},
	} {
		d := Data{RunID: "run", Token: "run-3", Burst: 3, Attempt: 1}
		if got := branchWith(t, tc.cond, d, tc.v, ""); got != tc.want {
			t.Errorf(`\if %s with v=%q took %s, want %s`, tc.cond, tc.v, got, tc.want)
		}
	}
}

// A condition cut short (an unclosed template, an operator at its end) is
// a parse error that says so, never a panic or a branch.
func TestIfCutShortIsAParseError(t *testing.T) {
	for cond, want := range map[string]string{
		":v = {{.Token":  "unterminated template",
		":v = {{.Token}": "unterminated template",
		":v <":           "want one value",
		":v =":           "want one value",
		"<":              "want one value",
		":'v":            "unterminated ' quote",
		":'a b' = 1":     "a variable's name is letters",
		":v = :'a<b'":    "a variable's name is letters",
		":'a b c' = 1":   "a variable's name is letters",
		":'' = 1":        "a variable's name is letters",
	} {
		_, err := Parse("redeem.sql", "SELECT 1 AS v \\gset\n\\if "+cond+"\n\\endif\n", SQL, ScopeAttempt, "")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf(`\if %s: %v, want an error with %q`, cond, err, want)
		}
	}
}
