package printable

import "testing"

func TestEscapes(t *testing.T) {
	for in, want := range map[string][2]string{
		"plain name":          {"plain name", "plain name"},
		"a\x00b":              {`a\x00b`, `a\x00b`},
		"evil\u202eexe.txt":   {`evil\u202eexe.txt`, `evil\u202eexe.txt`},
		"iso\u2066late\u2069": {`iso\u2066late\u2069`, `iso\u2066late\u2069`},
		"two\nlines\tand tab": {`two\x0alines\x09and tab`, "two\nlines\tand tab"},
		"bell\a esc\x1b[31m":  {`bell\x07 esc\x1b[31m`, `bell\x07 esc\x1b[31m`},
		"c1 \u0085 \u009b":    {`c1 \u0085 \u009b`, `c1 \u0085 \u009b`},
		"bad \xff utf8":       {`bad \xff utf8`, `bad \xff utf8`},
		"del \x7f":            {`del \x7f`, `del \x7f`},
		"ünïcødé 😀 👩‍💻":       {"ünïcødé 😀 👩‍💻", "ünïcødé 😀 👩‍💻"},
		"ls\u2028ps\u2029":    {`ls\u2028ps\u2029`, `ls\u2028ps\u2029`},
	} {
		if got := Line(in); got != want[0] {
			t.Errorf("Line(%q) = %q, want %q", in, got, want[0])
		}
		if got := Text(in); got != want[1] {
			t.Errorf("Text(%q) = %q, want %q", in, got, want[1])
		}
	}
}
