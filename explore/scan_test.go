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

// The scanner's reading at the edges a mutation run of sqlscan.go and
// sql.go found untested: parameters $0 to $10 (every digit starts one),
// dollar quotes with and without a tag, a dotted name cut short, a quote
// right after a name, numbers with dots, E” strings (PostgreSQL's
// backslash escapes; MySQL reads E as a name), and what a setup creates.
func TestScannerEdgesOfDollarsNamesAndNumbers(t *testing.T) {
	for _, c := range []struct {
		sql  string
		d    Dialect
		want string
	}{
		{"SELECT $0", Postgres, "[SELECT ?]"},
		{"SELECT $9", Postgres, "[SELECT ?]"},
		{"SELECT $10, $1", Postgres, "[SELECT ? , ?]"},
		{"SELECT $1a", Postgres, "[SELECT ? A]"},
		{"SELECT $a$x$a$", Postgres, "[SELECT ']"},
		{"SELECT $_$x$_$ FROM t", Postgres, "[SELECT ' FROM T]"},
		{"SELECT $$x$$ FROM t", Postgres, "[SELECT ' FROM T]"},
		{"SELECT $a", Postgres, "uncertain"},
		{"SELECT $a$x", Postgres, "uncertain"},
		{"SELECT 1$ FROM t", Postgres, "uncertain"},
		{"SELECT t.", Postgres, "uncertain"},
		{"SELECT t.", MySQL, "uncertain"},
		{"SELECT a. b FROM t", Postgres, "uncertain"},
		{"SELECT a.)", Postgres, "uncertain"},
		{"SELECT .x FROM t", Postgres, "uncertain"},
		{`SELECT a"b" FROM t`, Postgres, `[SELECT A "b FROM T]`},
		{`SELECT s.t FROM s."T"`, Postgres, `[SELECT S.T FROM "t]`},
		{"SELECT t.* FROM t", Postgres, "[SELECT T. * FROM T]"},
		{"SELECT 0.5, 9.5, .5 FROM t", Postgres, "[SELECT 0.5 , 9.5 , .5 FROM T]"},
		{"SELECT 1.e3 FROM t", Postgres, "[SELECT 1.E3 FROM T]"},
		{"SELECT 0x FROM t", Postgres, "[SELECT 0X FROM T]"},
		{"SELECT 9a FROM t", MySQL, "[SELECT 9A FROM T]"},
		{"SELECT /9 FROM t", Postgres, "[SELECT / 9 FROM T]"},
		{`SELECT E'a\'b' FROM t`, Postgres, "[SELECT ' FROM T]"},
		{"SELECT e'x' FROM t", Postgres, "[SELECT ' FROM T]"},
		{"SELECT E FROM t", Postgres, "[SELECT E FROM T]"},
		{"SELECT E", Postgres, "[SELECT E]"},
		{"SELECT E'x'", MySQL, "[SELECT E ']"},
	} {
		toks, ok := sqlTokens(c.sql, c.d)
		got := fmt.Sprint(toks)
		if !ok {
			got = "uncertain"
		}
		if got != c.want {
			t.Errorf("%s on %s: %s, want %s", c.sql, c.d, got, c.want)
		}
	}
	for _, c := range []struct {
		setup string
		want  string
	}{
		{"CREATE TABLE a (x INT)", "[a]"},
		{"CREATE TABLE IF NOT EXISTS b (x INT)", "[b]"},
		{"CREATE TABLE IF NOT EXISTS", "[]"},
		{"CREATE TABLE", "[]"},
		{"TABLE t", "[]"},
		{"DROP TABLE c", "[]"},
		{"CREATE TABLE IF NOT EXISTS 'x'", "[]"},
	} {
		if got := fmt.Sprint(SetupTables(Postgres, c.setup)); got != c.want {
			t.Errorf("SetupTables(%q) = %s, want %s", c.setup, got, c.want)
		}
	}
	for run, want := range map[string]string{"a.b": "b", "a": "a", "{{.runid}}x": "{{.runid}}x", "s.{{.runid}}x": "{{.runid}}x", ".b": "b", "a.": ""} {
		if got := lastPart(run); got != want {
			t.Errorf("lastPart(%q) = %q, want %q", run, got, want)
		}
	}
	// Nothing to read, or a statement the scanner is not sure of: all.
	for _, text := range []string{"", "  ", "/* only a comment */"} {
		if f := (SQL{Dialect: Postgres}).Footprint(text); !f.All {
			t.Errorf("Footprint(%q) = %+v, want all", text, f)
		}
	}
}
