package cmd

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/racetest/racetest/runner"
	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal of width×height: the progress writes to
// the terminal side (a real terminal to term.IsTerminal and to the size
// ioctl), the test reads what it wrote from the other.
func openPTY(t *testing.T, width, height int) (reader, terminal *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	ws := &unix.Winsize{Col: uint16(width), Row: uint16(height)}
	if err := unix.IoctlSetWinsize(int(s.Fd()), unix.TIOCSWINSZ, ws); err != nil {
		t.Fatal(err)
	}
	return m, s
}

// A run's bars, drawn on a terminal that keeps what a clear screen erased
// (tmux), leave nothing behind: not a frame in the scrollback, not a
// frame on the screen once the run is over, and no row wider than the
// terminal. mpb's own writer moved up over a frame and erased to the end
// of the screen; with the bar on the pane's first row, tmux took each
// erase for a clear screen and kept every frame (issue 47 item 5: 43 stale
// frames after 'demo --bursts 20').
func TestProgressLeavesNoStaleFrames(t *testing.T) {
	for _, tc := range []struct {
		name          string
		width, height int
		bars          []string
	}{
		{"one bar on a pane's first row", 100, 30, []string{"lease-pause (no fencing)"}},
		{"two bars named wider than the pane", 30, 10, []string{
			"reward-payout (external payment, response lost, retried)", "memory-set (1 replica)"}},
		{"more bars than the pane has rows", 40, 4, []string{"a", "b", "c", "d", "e", "f"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reader, terminal := openPTY(t, tc.width, tc.height)
			scr := newScreen(tc.width, tc.height)
			copied := make(chan error, 1)
			go func() {
				_, err := io.Copy(scr, reader)
				copied <- err
			}()

			streams := &ioStreams{ErrOut: terminal, ErrTTY: true}
			pr := newProgress(streams)
			const steps = 5
			var updates []func(runner.Progress)
			var dones []func()
			for _, name := range tc.bars {
				update, done := pr.track(name, steps)
				updates, dones = append(updates, update), append(dones, done)
			}
			for i := 1; i <= steps; i++ {
				for _, update := range updates {
					update(runner.Progress{Done: i, Total: steps})
				}
				time.Sleep(200 * time.Millisecond) // longer than a refresh: a frame a step
			}
			for _, done := range dones {
				done()
			}
			pr.wait()
			terminal.Close()
			<-copied // the reader ends (EIO) once the terminal side is closed

			if len(scr.unknown) > 0 {
				t.Errorf("the bars wrote sequences the test does not know: %q", scr.unknown)
			}
			if scr.wrapped > 0 {
				t.Errorf("%d characters wrapped past column %d: a row wider than the terminal throws the next move up off", scr.wrapped, tc.width)
			}
			var stale []string
			for _, line := range scr.lines() {
				if strings.Contains(line, "bursts") {
					stale = append(stale, line)
				}
			}
			if len(stale) > 0 {
				t.Errorf("%d progress lines left behind:\n%s\n\n%s", len(stale), strings.Join(stale, "\n"), scr)
			}
		})
	}
}

// In tmux itself, a run's bars leave no line in the pane or its
// scrollback. The test runs itself in a tmux pane as the child that draws
// the bars on its stderr; it skips where tmux is not installed.
func TestProgressInTmux(t *testing.T) {
	if os.Getenv("PROGRESS_TEST_TMUX_CHILD") == "1" {
		pr := newProgress(systemStreams())
		update, done := pr.track("lease-pause (no fencing)", 5)
		for i := 1; i <= 5; i++ {
			update(runner.Progress{Done: i})
			time.Sleep(200 * time.Millisecond)
		}
		done()
		pr.wait()
		fmt.Println("child done")
		return
	}
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux is not installed")
	}
	sock := filepath.Join(t.TempDir(), "tmux")
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(tmux, append([]string{"-S", sock, "-f", "/dev/null"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	child := fmt.Sprintf("PROGRESS_TEST_TMUX_CHILD=1 '%s' -test.run='^TestProgressInTmux$'; sleep 60", os.Args[0])
	run("new-session", "-d", "-x", "100", "-y", "30", child)
	t.Cleanup(func() { _ = exec.Command(tmux, "-S", sock, "kill-server").Run() })
	var pane string
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(pane, "child done"); {
		if time.Now().After(deadline) {
			t.Fatalf("the child did not finish in 30 s; the pane:\n%s", pane)
		}
		time.Sleep(100 * time.Millisecond)
		pane = run("capture-pane", "-p", "-S", "-")
	}
	if n := strings.Count(pane, "bursts"); n > 0 {
		t.Errorf("%d progress lines left in the pane and its scrollback:\n%s", n, pane)
	}
}
