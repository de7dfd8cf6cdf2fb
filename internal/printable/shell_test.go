package printable

import (
	"os/exec"
	"testing"
)

func TestShellQuotes(t *testing.T) {
	for in, want := range map[string]string{
		"check-then-write":    "check-then-write",
		"--postgres-url":      "--postgres-url",
		"":                    "''",
		"a b":                 "'a b'",
		"it's":                `'it'\''s'`,
		"{{.Token}}":          "'{{.Token}}'",
		"$HOME":               "'$HOME'",
		"200µs":               "200µs",
		"a\u00a0b":            "'a\u00a0b'",
		"line\n# heading":     `$'line\n# heading'`,
		"bell\a and 'q' \\ x": `$'bell\x07 and \'q\' \\ x'`,
	} {
		if got := Shell(in); got != want {
			t.Errorf("Shell(%q) = %s, want %s", in, got, want)
		}
	}
}

// What Shell prints, a shell reads back as the word it quoted.
func TestShellRoundTrips(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash here")
	}
	for _, w := range []string{"plain", "", "a b", "it's", "{{.Token}}", "$(rm -rf /)", "`x`", "line\n# heading", "tab\there", "bell\a", "back\\slash", "µs", "quote'\n'mix", "bad\xffbyte"} {
		out, err := exec.Command(bash, "-c", "printf %s "+Shell(w)).Output()
		if err != nil || string(out) != w {
			t.Errorf("bash read %s back as %q (%v), want %q", Shell(w), out, err, w)
		}
	}
}
