package script

import (
	"errors"
	"strings"
	"testing"
)

// Edges of the parser that a whole mutation run of parse.go found
// untested (issue 27): positions, the template reason, the near-miss
// suggestion, \sleep's bounds and what a \gset prefix may be.
func TestParseEdges(t *testing.T) {
	if got := (Pos{File: "a.sql", Line: 3}).String(); got != "a.sql:3" {
		t.Errorf("a position without a column: %q, want a.sql:3", got)
	}
	if got := (Pos{File: "a.sql", Line: 3, Col: 1}).String(); got != "a.sql:3:1" {
		t.Errorf("column 1: %q, want a.sql:3:1", got)
	}
	// A template's error points at its "{{", on its own line.
	for src, pos := range map[string]string{
		"SELECT {{.Tokn}};\n":          "r.sql:1:8",
		"SELECT 1,\n  '{{.Tokn}}';\n":  "r.sql:2:4",
		"SELECT 1,\n{{.Tokn}};\n":      "r.sql:2:1",
		"SELECT 1,\n\n   {{.Tokn}};\n": "r.sql:3:4",
		"SELECT '\n{{.Tokn}}';\n":      "r.sql:2:1",
	} {
		_, err := Parse("r.sql", src, SQL, ScopeAttempt, "--attempt")
		var se *SyntaxError
		if !errors.As(err, &se) || se.Pos.String() != pos || !strings.HasPrefix(se.Msg, `template: map has no entry for key "Tokn" — --attempt knows`) {
			t.Errorf("%q: %v, want %s: template: map has no entry for key \"Tokn\" — …", src, err, pos)
		}
	}
	for src, want := range map[string]string{
		"\\el\n":        `unknown meta-command \el (did you mean \elif?)`,
		"\\x\n":         `unknown meta-command \x — supported`,
		"\\sleep abc\n": `"abc" is not a duration`,
		"\\sleep -1s\n": `"-1s" is not a duration`,
		"\\sleep -1\n":  "a sleep cannot be negative",
	} {
		if _, err := Parse("r.sql", src, SQL, ScopeAttempt, ""); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want …%s…", src, err, want)
		}
	}
	for _, src := range []string{"\\sleep 0\n", "\\sleep 0s\n", "\\sleep 20ms\n", "\\sleep 1.5\n"} {
		if _, err := Parse("r.sql", src, SQL, ScopeAttempt, ""); err != nil {
			t.Errorf("%q: %v, want it read", src, err)
		}
	}
	for s, ok := range map[string]bool{"a": true, "z": true, "A": true, "Z": true, "_": true, "a0": true, "x9": true, "_9": true,
		"": false, "0a": false, "9": false, "a-b": false, "a b": false, "@": false, "[": false, "`": false, "{": false, "é": false} {
		if isIdent(s) != ok {
			t.Errorf("isIdent(%q) = %v, want %v", s, !ok, ok)
		}
	}
}
