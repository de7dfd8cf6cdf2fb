package bounded

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

type endless struct{}

func (endless) Read(p []byte) (int, error) { return len(p), nil }

func TestReadFileRefusesWhatNeverEnds(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, what := range map[string]string{"/dev/zero": "a character device", fifo: "a named pipe (FIFO)", dir: "a directory"} {
		start := time.Now()
		_, err := ReadFile(name, 1<<20)
		var nr *NotRegularError
		if !errors.As(err, &nr) || nr.What != what {
			t.Errorf("%s: %v, want it refused as %s", name, err, what)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s took %s to refuse", name, d)
		}
	}
}

func TestReadFileCaps(t *testing.T) {
	dir := t.TempDir()
	small, big := filepath.Join(dir, "small"), filepath.Join(dir, "big")
	if err := os.WriteFile(small, []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, []byte("123456"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(small, 5); err != nil || string(b) != "12345" {
		t.Errorf("a file of exactly the cap: %q, %v", b, err)
	}
	var tb *TooBigError
	if _, err := ReadFile(big, 5); !errors.As(err, &tb) || tb.Max != 5 || tb.Size != 6 || !strings.Contains(err.Error(), "more than 5 bytes") {
		t.Errorf("a file one byte over the cap: %v", err)
	}
	if _, err := ReadFile(filepath.Join(dir, "none"), 5); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}

func TestReadStopsAtTheCap(t *testing.T) {
	if b, err := Read("stdin", strings.NewReader("abc"), 3); err != nil || string(b) != "abc" {
		t.Errorf("exactly the cap: %q, %v", b, err)
	}
	var tb *TooBigError
	if _, err := Read("stdin", endless{}, 1<<20); !errors.As(err, &tb) || !strings.Contains(err.Error(), "stdin holds more than 1 MiB") {
		t.Errorf("an endless stream: %v", err)
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{4 << 20: "4 MiB", 512 << 10: "512 KiB", 100: "100 bytes", 1<<20 + 1: "1048577 bytes"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}
