package cmd

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// execWidth runs racetest on a terminal of width columns (without colour).
func execWidth(t *testing.T, width int, args ...string) (string, int) {
	t.Helper()
	io, out, errOut := testStreams()
	io.OutTTY, io.TermWidth, io.NoColor = true, width, true
	code := execIO(t, io, memoryOnly(), args...)
	if code != exitOK {
		t.Logf("stderr: %s", errOut.String())
	}
	return out.String(), code
}

// The demo fits the terminal: every line at 80 columns, the table first,
// and with --details the table again at the end, after the timelines.
func TestDemoFitsTheTerminalWidth(t *testing.T) {
	for _, width := range []int{80, 120} {
		for _, details := range []bool{false, true} {
			args := []string{"demo", "--bursts", "10"}
			if details {
				args = append(args, "--details")
			}
			out, code := execWidth(t, width, args...)
			if code != 0 {
				t.Fatalf("%v: exit %d\n%s", args, code, out)
			}
			lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
			for i, l := range lines {
				if n := utf8.RuneCountInString(l); n > width {
					t.Errorf("%d columns, %v: line %d is %d wide: %s", width, args, i+1, n, l)
				}
			}
			headers := 0
			last := -1
			for i, l := range lines {
				if strings.HasPrefix(l, "CASE ") {
					headers++
					last = i
				}
			}
			timelines := strings.Count(out, "timeline of burst")
			switch {
			case details && (headers != 2 || timelines == 0):
				t.Errorf("%d columns, --details: %d tables and %d timelines, want the table twice around the timelines", width, headers, timelines)
			case details && len(lines)-last > 12:
				// The second table ends the output: its rows, and the note under it.
				t.Errorf("%d columns, --details: %d lines after the last table's header", width, len(lines)-last)
			case !details && (headers != 1 || timelines != 0):
				t.Errorf("%d columns: %d tables and %d timelines, want one table and no timeline without --details", width, headers, timelines)
			}
		}
	}
}

// In a pipe the table has a fixed width, whatever the terminal would have.
func TestPipeUsesAFixedWidth(t *testing.T) {
	t.Setenv("COLUMNS", "")
	io, _, _ := testStreams()
	io.TermWidth = 80
	if got := io.Width(); got != 120 {
		t.Errorf("a pipe's width is %d, want the fixed 120", got)
	}
	io.OutTTY = true
	if got := io.Width(); got != 80 {
		t.Errorf("a terminal of 80 columns gives width %d", got)
	}
}

// Explore's and replay's reports fit the terminal: at 80 and 120 columns
// every line fits, long orders fold under their indent, and a folded
// replay command still pastes into a shell as the same command.
func TestExploreFitsTheTerminalWidth(t *testing.T) {
	args := []string{"explore", "check-then-write", "--attempts", "3", "--block-after", "1s", "--expect", "race"}
	wide, code := execWidth(t, 1000, args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, wide)
	}
	replays := func(out string) []string {
		var cmds []string
		for _, c := range strings.Split(strings.ReplaceAll(out, " \\\n", " "), "\n") {
			if c = strings.TrimSpace(c); strings.HasPrefix(c, "racetest replay") {
				cmds = append(cmds, strings.Join(strings.Fields(c), " "))
			}
		}
		return cmds
	}
	for _, width := range []int{80, 120} {
		out, code := execWidth(t, width, args...)
		if code != 0 {
			t.Fatalf("%d columns: exit %d\n%s", width, code, out)
		}
		for i, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
			if n := utf8.RuneCountInString(l); n > width {
				t.Errorf("%d columns: line %d is %d wide: %s", width, i+1, n, l)
			}
		}
		if got, want := replays(out), replays(wide); strings.Join(got, "\n") != strings.Join(want, "\n") || len(got) == 0 {
			t.Errorf("%d columns: the folded replay commands are not the commands:\n%q\nwant\n%q", width, got, want)
		}
	}
}
