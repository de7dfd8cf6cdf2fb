package suite_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	"github.com/racetest/racetest/suite"
)

// billionLaughs is issue 11's alias bomb: nine anchors, each a list of
// nine aliases to the one before, 9^9 strings once expanded, used as a
// case name.
func billionLaughs() string {
	var b strings.Builder
	b.WriteString(`a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]` + "\n")
	for c := 'b'; c <= 'i'; c++ {
		alias := "*" + string(c-1)
		fmt.Fprintf(&b, "%c: &%c [%s]\n", c, c, strings.Repeat(alias+",", 8)+alias)
	}
	b.WriteString("cases:\n  - name: *i\n")
	return b.String()
}

// hostile are files that once took the machine down, or would have.
func hostile() []struct {
	name, src string
	// line, col and msg are where and what the first error says (line -1:
	// any line; col 0: any column).
	line, col int
	msg       string
} {
	return []struct {
		name, src string
		line, col int
		msg       string
	}{
		{"billion laughs", billionLaughs(), 5, 0, "with its aliases expanded the file holds more than 10000 keys and values"},
		{"100,000 nested [", strings.Repeat("[", 100_000), 1, 65, "nested more than 64 levels deep"},
		{"100,000 nested - ", strings.Repeat("- ", 100_000), 1, 129, "nested more than 64 levels deep"},
		{"a staircase of keys", staircase(100), 65, 65, "nested more than 64 levels deep"},
		{"4 MiB of quoted text", strings.Repeat("k: \""+strings.Repeat("x", 200<<10)+"\"\n", 20), -1, 0, "the YAML library would need more than 80 MB of memory"},
		{"4 MiB of block text", strings.Repeat("k: |\n"+strings.Repeat("  "+strings.Repeat("x", 98)+"\n", 2000), 20), -1, 0, "the YAML library would need more than 80 MB of memory"},
		{"/dev/zero's bytes", string(make([]byte, 64<<10)), 1, 1, "control character (byte 0x00)"},
		{"a 20 MB scalar", "cases: " + strings.Repeat("x", 20<<20), 0, 0, "the file is 20.0 MiB (20971527 bytes); a suite file may be at most 4 MiB"},
		{"a 1 MiB scalar", "cases: " + strings.Repeat("x", 1<<20), 1, 8, "more than 256 KiB of one value"},
		{"a 1 MiB block scalar", "cases:\n  - name: |\n" + strings.Repeat("      a: *b [\n", 80_000), 2, 11, "more than 256 KiB of one value"},
		{"a 1 MiB quoted scalar", "cases: '" + strings.Repeat("it''s [\n", 130_000) + "'", 1, 8, "more than 256 KiB of one value"},
		{"a 1 MiB plain scalar over lines", "cases: x\n" + strings.Repeat("  "+strings.Repeat("more text ", 100)+"\n", 1000), 1, 8, "more than 256 KiB of one value"},
		{"4 MiB of spaces", "cases: x" + strings.Repeat(" ", 4<<20-8), 1, 8, "more than 256 KiB of one value"},
		{"a 1 MiB comment", "cases: # " + strings.Repeat("x", 1<<20), 1, 8, "more than 256 KiB of one value"},
		// cases, its mapping and the list are 3 values: the 9,998th a is
		// the 10,001st.
		{"100,000 values", "cases: [" + strings.Repeat("a, ", 100_000) + "]", 1, 9 + 3*9997, "more than 10000 keys and values"},
		// 3 values on the first line (k, the mapping, v), 2 on each next.
		{"100,000 keys", strings.Repeat("k: v\n", 100_000), 5000, 4, "more than 10000 keys and values"},
		{"a bidi override", "cases:\n  - name: \u202e\x01\n", 2, 12, "control character (byte 0x01)"},
		{"invalid UTF-8", "cases:\n  - name: \xff\n", 2, 11, "not valid UTF-8"},
	}
}

// staircase nests n mappings, one key per line, each indented by one more
// space.
func staircase(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(strings.Repeat(" ", i) + "k:\n")
	}
	return b.String()
}

func TestParseRefusesHostileFiles(t *testing.T) {
	for _, h := range hostile() {
		t.Run(h.name, func(t *testing.T) {
			_, err := suite.Parse("s.yaml", []byte(h.src), env(nil), registry())
			e := firstError(t, err)
			if !strings.Contains(e.Msg, h.msg) || e.Line != h.line && (h.line != -1 || e.Line < 1) || (h.col != 0 && e.Column != h.col) {
				t.Fatalf("got %d:%d %q, want %d:%d %q", e.Line, e.Column, e.Msg, h.line, h.col, h.msg)
			}
			if x := e.Excerpt(); len(x) > 700 {
				t.Errorf("the excerpt is %d bytes long: %.200q…", len(x), x)
			}
			if m := err.Error(); len(m) > 1000 {
				t.Errorf("the error is %d bytes long: %.200q…", len(m), m)
			}
		})
	}
}

// TestParseRefusesWithinMemory measures what refusing each hostile file
// allocates: under 100 MB each (BenchmarkParseRefused gives the figures).
func TestParseRefusesWithinMemory(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("allocates tens of megabytes per file; memory is measured without -short and without -race")
	}
	for _, h := range hostile() {
		data := []byte(h.src)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := suite.Parse("s.yaml", data, env(nil), registry())
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Fatalf("%s: accepted", h.name)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 100<<20 {
			t.Errorf("%s: refusing it allocated %d MB, want under 100 MB", h.name, got>>20)
		}
	}
}

func BenchmarkParseRefused(b *testing.B) {
	for _, h := range hostile() {
		data := []byte(h.src)
		b.Run(strings.ReplaceAll(h.name, " ", "_"), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := suite.Parse("s.yaml", data, env(nil), registry()); err == nil {
					b.Fatal("accepted")
				}
			}
		})
	}
}

// The largest files the limits let through to the YAML library still parse
// within the same budget.
func TestParseAtTheLimitsWithinMemory(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("allocates tens of megabytes; memory is measured without -short and without -race")
	}
	for name, src := range atTheLimits() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		err := parseAndPlan(src)
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Fatalf("%s: accepted", name)
		}
		var es suite.Errors
		if errors.As(err, &es) && strings.Contains(es[0].Msg, "more than") {
			t.Fatalf("%s: refused by a limit, so it does not test the YAML library at the limit: %v", name, es[0])
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 100<<20 {
			t.Errorf("%s: parsing it allocated %d MB, want under 100 MB", name, got>>20)
		}
	}
}

// parseAndPlan checks src as 'racetest suite' does.
func parseAndPlan(src string) error {
	s, err := suite.Parse("s.yaml", []byte(src), env(nil), registry())
	if err != nil {
		return err
	}
	_, err = s.Plans(registry(), suite.Options{Dir: "."})
	return err
}

// atTheLimits are files just inside every limit, which the YAML library
// reads in full (and which are not suites).
func atTheLimits() map[string]string {
	return map[string]string{
		"15 plain values of 250 KiB": strings.Repeat("k: "+strings.Repeat("x", 250<<10)+"\n", 15),
		"2.4 MiB of quoted values":   strings.Repeat("k: \""+strings.Repeat("x", 200<<10)+"\"\n", 12),
		"1.2 MiB of block scalars":   strings.Repeat("k: |\n"+strings.Repeat("  "+strings.Repeat("x", 98)+"\n", 2000), 6),
		"9,990 values in a list":     "cases: [" + strings.Repeat("a,", 9_990) + "]",
		"1,900 cases":                "cases:\n" + strings.Repeat("  - {name: x, scenario: y}\n", 1_900),
		"900 cases and 1.2 MiB quoted": "cases:\n" + strings.Repeat("  - {name: x, scenario: y}\n", 900) +
			strings.Repeat("k: \""+strings.Repeat("x", 200<<10)+"\"\n", 6),
		"64 levels": strings.Repeat("[", 63) + strings.Repeat("]", 63),
		"aliases to 9,900 values": "a: &a [" + strings.Repeat("x,", 98) + "x]\n" +
			"cases: [" + strings.Repeat("*a,", 97) + "]\n",
		// Decoded in full, then refused by Plans: an unknown scenario.
		"900 cases from one alias": "cases:\n  - &c {name: n, scenario: nosuch, attempts: 2, bursts: 1}\n" +
			strings.Repeat("  - *c\n", 900),
	}
}

func BenchmarkParseAtTheLimits(b *testing.B) {
	for name, src := range atTheLimits() {
		data := []byte(src)
		b.Run(strings.ReplaceAll(name, " ", "_"), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				parseAndPlan(string(data))
			}
		})
	}
}

func TestReadFileRefusesWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, make([]byte, suite.MaxFileSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"/dev/zero": "/dev/zero is a character device, not a suite file",
		fifo:        "is a named pipe (FIFO), not a suite file",
		dir:         "is a directory, not a suite file",
		big:         "the file is 4.0 MiB (4194305 bytes); a suite file may be at most 4 MiB",
	} {
		if name == "/dev/zero" {
			if _, err := os.Stat(name); err != nil {
				t.Log("no /dev/zero here")
				continue
			}
		}
		// A FIFO with no writer blocks an open: ReadFile must refuse it
		// without opening it.
		_, err := suite.ReadFile(name)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ReadFile(%s) = %v, want %q", name, err, want)
		}
	}
	ok := filepath.Join(dir, "ok.yaml")
	if err := os.WriteFile(ok, []byte("cases: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := suite.ReadFile(ok); err != nil || string(b) != "cases: []\n" {
		t.Errorf("ReadFile(ok.yaml) = %q, %v", b, err)
	}
}

// Standard input is read up to the cap and no further: /dev/zero on
// standard input ends with an error, not with the machine's memory.
func TestReadStopsAtTheCap(t *testing.T) {
	zeros := &countingReader{}
	_, err := suite.Read("<stdin>", zeros)
	if err == nil || !strings.Contains(err.Error(), "<stdin> holds more than 4 MiB") {
		t.Fatalf("Read(zeros) = %v", err)
	}
	if zeros.n > suite.MaxFileSize+64<<10 {
		t.Errorf("read %d bytes to refuse a file past %d", zeros.n, suite.MaxFileSize)
	}
	b, err := suite.Read("<stdin>", bytes.NewReader(make([]byte, suite.MaxFileSize)))
	if err != nil || len(b) != suite.MaxFileSize {
		t.Errorf("a file of exactly the cap: %d bytes, %v", len(b), err)
	}
}

// countingReader is an endless source of zeros, like /dev/zero.
type countingReader struct{ n int }

func (r *countingReader) Read(p []byte) (int, error) {
	clear(p)
	r.n += len(p)
	return len(p), nil
}

// An excerpt shows a window of a long line with the caret still under the
// column, never a password written in the file, and no character that
// could reorder or hide the line.
func TestExcerptIsShortRedactedAndPrintable(t *testing.T) {
	for name, c := range map[string]struct {
		src, under string
	}{
		"passwords on the line": {
			"defaults:\n  connections: {mysql: 'root:hunter2@tcp(db:3306)/test', redis: 'redis://u:hunter2@h:6379/0', postgres: 'host=h password=hunter2', bogus: 1}\ncases: []\n",
			"bogus",
		},
		"a long line": {
			"cases: [{name: '" + strings.Repeat("x", 5000) + "', atempts: 3}]\n",
			"atempts",
		},
		"a bidi override before the column": {
			"cases: [{name: \"\u202eabc\u2066\", atempts: 3}]\n",
			"atempts",
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parse(t, c.src, nil)
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			for _, bad := range []string{"hunter2", "\u202e", "\u2066"} {
				if strings.Contains(msg, bad) {
					t.Errorf("the error shows %q:\n%s", bad, msg)
				}
			}
			if len(msg) > 700 {
				t.Errorf("the error is %d bytes", len(msg))
			}
			lines := strings.Split(firstError(t, err).Excerpt(), "\n")
			if len(lines) != 2 {
				t.Fatalf("excerpt %q", lines)
			}
			caret := strings.IndexByte(lines[1], '^')
			if caret < 0 || !strings.HasPrefix(string([]rune(lines[0])[utf8.RuneCountInString(lines[1][:caret]):]), c.under) {
				t.Errorf("the caret is not under %q:\n%s\n%s", c.under, lines[0], lines[1])
			}
		})
	}
}
