package explore

import (
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
