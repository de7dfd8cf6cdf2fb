package explore

import (
	"fmt"
	"testing"
)

func TestScanSpansAndStatements(t *testing.T) {
	text := "SELECT 'a;b' /* c; */, \"Q\" FROM t WHERE x = $1; INSERT INTO t VALUES (1)"
	toks, ok := Scan(text, Postgres)
	if !ok {
		t.Fatal("Scan: not certain")
	}
	var got []string
	for _, tk := range toks {
		got = append(got, tk.Text+"="+text[tk.Start:tk.End])
	}
	want := []string{"SELECT=SELECT", "'='a;b'", ",=,", `"q="Q"`, "FROM=FROM", "T=t", "WHERE=WHERE", "X=x", "===", "?=$1", ";=;",
		"INSERT=INSERT", "INTO=INTO", "T=t", "VALUES=VALUES", "(=(", "1=1", ")=)"}
	if len(got) != len(want) {
		t.Fatalf("tokens:\n got %q\nwant %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("token %d: got %q, want %q (all: %q)", i, got[i], want[i], got)
		}
	}
}

func TestScanNotCertain(t *testing.T) {
	for _, c := range []struct {
		text string
		d    Dialect
	}{
		{"SELECT 'open", Postgres},
		{"SELECT {{.Token}}", Postgres},
		{"SELECT /*! 1 */", MySQL},
		{`SELECT 'a\'b'`, MySQL}, // ends where NO_BACKSLASH_ESCAPES says
		{"SELECT $$a$$", AnyDialect},
	} {
		if toks, ok := Scan(c.text, c.d); ok {
			t.Errorf("Scan(%q, %q) = %v, certain; want not certain", c.text, c.d, toks)
		}
	}
	if _, ok := Scan("SELECT 1; SELECT 2", MySQL); !ok {
		t.Error("Scan: two statements should read")
	}
}

// The scanner at the edges its mutation run found untested: where the two
// dialects disagree (AnyDialect must be sure of both), templates at the
// start, the bytes of a name, comments that end at the text's end or
// begin with "--" and a letter, MySQL's empty comment, PostgreSQL's
// unterminated one.
func TestScannerEdges(t *testing.T) {
	for _, c := range []struct {
		sql  string
		d    Dialect
		want string // the tokens, or "uncertain"
	}{
		{"# only a comment", AnyDialect, "uncertain"}, // MySQL: nothing; PostgreSQL: '#' it does not know
		{"/*! x */", AnyDialect, "uncertain"},         // PostgreSQL: a comment; MySQL: executed
		{"# only a comment", MySQL, "[]"},
		{"/*! x */", Postgres, "[]"},
		{"SELECT 1 --x", Postgres, "[SELECT 1]"},
		{"SELECT 1 --x", MySQL, "[SELECT 1 - - X]"},
		{"SELECT 1 -- x\r", Postgres, "uncertain"},
		{"SELECT 1 -- x\r\n", Postgres, "[SELECT 1]"},
		{"SELECT /**/ 1", MySQL, "[SELECT 1]"},
		{"SELECT 1 /* x", Postgres, "uncertain"},
		{"SELECT 1 /* x", MySQL, "uncertain"},
		{"SELECT z9, Z_, a$ FROM t", Postgres, "[SELECT Z9 , Z_ , A$ FROM T]"},
	} {
		toks, ok := sqlTokens(c.sql, c.d)
		got := fmt.Sprint(toks)
		if toks == nil && ok {
			got = "[]"
		}
		if !ok {
			got = "uncertain"
		}
		if got != c.want {
			t.Errorf("%q (%v): %s, want %s", c.sql, c.d, got, c.want)
		}
	}
	for text, want := range map[string]string{
		"{{.Token}}":     "{{.RunID}}-0",
		"{{.Burst}} x":   "0 x",
		"x {{.Attempt}}": "x 0",
		"{{ .RunID }}_t": "{{.RunID}}_t",
		"no template":    "no template",
	} {
		if got, ok := plainTemplates(text); !ok || got != want {
			t.Errorf("plainTemplates(%q) = %q, %v; want %q, true", text, got, ok, want)
		}
	}
	for _, text := range []string{"{{.Other}}", "{{.Token", "{{printf \"'\"}}"} {
		if _, ok := plainTemplates(text); ok {
			t.Errorf("plainTemplates(%q) is sure of a template it does not know", text)
		}
	}
	for _, c := range []byte("azAZ09_$\x80\xff") {
		if !isIdentByte(c) {
			t.Errorf("isIdentByte(%q) = false", c)
		}
	}
	for _, c := range []byte("{[:@`/ \x7f") {
		if isIdentByte(c) {
			t.Errorf("isIdentByte(%q) = true", c)
		}
	}
}
