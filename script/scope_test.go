package script

import (
	"slices"
	"testing"
)

// An invariant that names {{.Token}} reads the burst's own subject, wherever
// the template names it; one that reads the whole table does not, nor does
// a text that only spells "Token" outside a template.
func TestScopedInvariants(t *testing.T) {
	parse := func(src string) *Script {
		t.Helper()
		s, err := Parse("inv", src, SQL, ScopeBurst, "--invariant")
		if err != nil {
			t.Fatalf("parse %q: %v", src, err)
		}
		return s
	}
	tg := &Target{sc: Scripts{Invariants: []*Script{
		parse("SELECT bool_and(balance >= 0) FROM acct_{{.RunID}}"),
		parse("SELECT bool_and(balance >= 0) FROM acct_{{.RunID}} WHERE id = '{{.Token}}'"),
		parse("SELECT count(*) FROM acct_{{.RunID}} WHERE {{if .Token}}id = '{{printf \"%s\" .Token}}'{{end}} AND balance < 0"),
		parse("SELECT count(*) FROM acct WHERE note = '.Token' AND balance < 0"),
		parse("SELECT count(*) FROM acct_{{.RunID}} WHERE id = '{{(.).Token}}' AND balance < 0"),
		// with and range: the Token in their pipeline, their body or
		// their else.
		parse("SELECT count(*) FROM acct_{{.RunID}} WHERE {{with .Token}}id = '{{.}}' AND{{end}} balance < 0"),
		parse("SELECT count(*) FROM acct_{{.RunID}} WHERE {{with $}}id = '{{.Token}}' AND{{end}} balance < 0"),
		parse("SELECT count(*) FROM acct_{{.RunID}} WHERE {{with .Burst}}1 = 1{{else}}id = '{{.Token}}'{{end}} AND balance < 0"),
		parse("SELECT count(*) FROM acct_{{.RunID}} WHERE {{range (len .Token)}}x{{end}} balance < 0"),
		parse("SELECT count(*) FROM acct_{{.RunID}} WHERE {{range $i := .Burst}}{{$.Token}}{{end}} balance < 0"),
		parse("SELECT count(*) FROM acct_{{.RunID}} WHERE {{range .Burst}}x{{else}}{{.Token}}{{end}} balance < 0"),
		parse("SELECT count(*) FROM acct_{{.RunID}} WHERE {{with .Burst}}x{{else}}y{{end}} balance < 0"),
		parse("SELECT count(*) FROM acct_{{.RunID}} WHERE '{{$}}' <> '' AND balance < 0"),
		parse("SELECT count(*) FROM acct_{{.RunID}} WHERE {{if .Token}}1 = 1 AND{{end}} balance < 0"),
	}}}
	if got, want := tg.ScopedInvariants(), []bool{false, true, true, false, true, true, true, true, true, true, true, false, false, true}; !slices.Equal(got, want) {
		t.Errorf("scoped %v, want %v", got, want)
	}
}
