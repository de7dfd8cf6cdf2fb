package script

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A script named @/dev/zero, @FIFO or a file past MaxScriptSize is refused
// at once, before anything connects (issue 29: it was read without end).
func TestLoadRefusesUnboundedFiles(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.sql")
	if err := os.WriteFile(big, make([]byte, MaxScriptSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{"/dev/zero": "a character device", big: "more than 16 MiB"} {
		_, err := Spec{Attempt: []string{"@" + file}, Effects: "SELECT 1;"}.Load("", SQL, func(n string) string { return "--" + n })
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--attempt") {
			t.Errorf("@%s: %v, want an error naming --attempt and %q", file, err, want)
		}
	}
}
