package httpfire

import (
	"strings"
	"testing"

	"github.com/racetest/racetest/runner"
)

// A 5xx names the body's first line, so that the report says why the
// server failed (issue 29: 170 HTTP 500s in 50 bursts said nothing more).
func TestServerErrorNamesItsBody(t *testing.T) {
	r, err := compileRules(Success{})
	if err != nil {
		t.Fatal(err)
	}
	for body, want := range map[string]string{
		"\n  pool exhausted: 16 of 16 connections busy\nTraceback…\n": "HTTP 500 Internal Server Error: pool exhausted: 16 of 16 connections busy",
		"":                       "HTTP 500 Internal Server Error",
		"bell\a here":            `HTTP 500 Internal Server Error: bell\x07 here`,
		strings.Repeat("é", 150): "HTTP 500 Internal Server Error: " + strings.Repeat("é", 100) + "…",
	} {
		o := r.classify(500, []byte(body))
		if o.Class != runner.Error || o.Err == nil || o.Err.Error() != want {
			t.Errorf("500 with body %q: %v %v, want error %q", body, o.Class, o.Err, want)
		}
	}
}
