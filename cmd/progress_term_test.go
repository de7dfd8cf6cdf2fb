package cmd

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// screen is a small terminal emulator, enough to tell what a run of
// progress frames leaves behind: the visible rows and the scrollback. It
// keeps tmux's rules where terminals differ:
//
//   - erasing to the end of the screen (ESC[J) from the top-left corner
//     is a clear screen, and tmux (scroll-on-clear, on by default) moves
//     what it clears into the scrollback;
//   - a character in the last column leaves the cursor there until the
//     next character, which wraps to the next row (xterm's pending wrap).
//
// It knows only the sequences a frame should need and lists any other in
// unknown, so that a new one is a decision, not an accident.
type screen struct {
	width, height int
	rows          [][]rune
	history       []string
	x, y          int
	pending       bool // a character sits in the last column: the next one wraps
	wrapped       int  // characters that wrapped: a line wider than the screen
	esc           []byte
	partial       []byte   // an incomplete UTF-8 sequence
	unknown       []string // what the emulator does not know
}

func newScreen(width, height int) *screen {
	s := &screen{width: width, height: height}
	for range height {
		s.rows = append(s.rows, s.blank())
	}
	return s
}

func (s *screen) blank() []rune { return []rune(strings.Repeat(" ", s.width)) }

func (s *screen) Write(p []byte) (int, error) {
	for _, b := range p {
		s.feed(b)
	}
	return len(p), nil
}

func (s *screen) feed(b byte) {
	if s.esc != nil {
		s.esc = append(s.esc, b)
		if len(s.esc) == 2 && b != '[' {
			s.unknown = append(s.unknown, fmt.Sprintf("escape %q", s.esc))
			s.esc = nil
		}
		if len(s.esc) > 2 && b >= 0x40 && b <= 0x7e {
			s.csi(string(s.esc[2:len(s.esc)-1]), b)
			s.esc = nil
		}
		return
	}
	switch {
	case b == 0x1b:
		s.esc = []byte{b}
	case b == '\r':
		s.x, s.pending = 0, false
	case b == '\n':
		s.down()
	case b < 0x20:
		s.unknown = append(s.unknown, fmt.Sprintf("control byte %#x", b))
	default:
		s.partial = append(s.partial, b)
		if !utf8.FullRune(s.partial) {
			return
		}
		r, _ := utf8.DecodeRune(s.partial)
		s.partial = s.partial[:0]
		s.put(r)
	}
}

func (s *screen) put(r rune) {
	if s.pending {
		s.wrapped++
		s.x = 0
		s.down()
	}
	s.rows[s.y][s.x] = r
	if s.x == s.width-1 {
		s.pending = true
	} else {
		s.x++
	}
}

// down is a line feed: the next row, or a scroll at the bottom row.
func (s *screen) down() {
	s.pending = false
	if s.y < s.height-1 {
		s.y++
		return
	}
	s.history = append(s.history, strings.TrimRight(string(s.rows[0]), " "))
	s.rows = append(s.rows[1:], s.blank())
}

func (s *screen) csi(param string, final byte) {
	n := 0
	if param != "" {
		var err error
		if n, err = strconv.Atoi(param); err != nil {
			s.unknown = append(s.unknown, fmt.Sprintf("CSI %q%c", param, final))
			return
		}
	}
	s.pending = false
	switch {
	case final == 'A': // cursor up n (1 when n is 0 or absent), stopping at the top
		s.y = max(s.y-max(n, 1), 0)
	case final == 'J' && n == 0: // erase from the cursor to the end of the screen
		if s.x == 0 && s.y == 0 {
			for _, row := range s.rows {
				if line := strings.TrimRight(string(row), " "); line != "" {
					s.history = append(s.history, line)
				}
			}
		}
		copy(s.rows[s.y][s.x:], s.blank())
		for y := s.y + 1; y < s.height; y++ {
			s.rows[y] = s.blank()
		}
	case final == 'K' && n == 0: // erase from the cursor to the end of the line
		copy(s.rows[s.y][s.x:], s.blank())
	case final == 'K' && n == 2: // erase the line
		s.rows[s.y] = s.blank()
	default:
		s.unknown = append(s.unknown, fmt.Sprintf("CSI %q%c", param, final))
	}
}

// lines are the scrollback and then the visible rows, without trailing
// blanks.
func (s *screen) lines() []string {
	all := append([]string(nil), s.history...)
	for _, row := range s.rows {
		all = append(all, strings.TrimRight(string(row), " "))
	}
	return all
}

func (s *screen) String() string {
	return fmt.Sprintf("scrollback:\n%s\nscreen:\n%s",
		strings.Join(s.history, "\n"), strings.Join(s.lines()[len(s.history):], "\n"))
}

// The emulator keeps what matters to the tests: tmux's clear from the
// corner goes to the scrollback, a clear lower down does not, and a
// character past the last column wraps.
func TestScreenEmulatesTmux(t *testing.T) {
	s := newScreen(10, 4)
	fmt.Fprint(s, "one\r\ntwo\r\n\x1b[1A\x1b[Jtwo'\r\n")
	if len(s.history) != 0 || s.lines()[1] != "two'" {
		t.Fatalf("a clear below the top row touched the scrollback or missed its row:\n%s", s)
	}
	fmt.Fprint(s, "\x1b[2A\x1b[Jnew\r\n")
	if strings.Join(s.history, "|") != "one|two'" || s.lines()[2] != "new" {
		t.Fatalf("a clear from the corner should move the screen to the scrollback:\n%s", s)
	}
	fmt.Fprint(s, "0123456789\r\n")
	if s.wrapped != 0 {
		t.Fatalf("a line of exactly the width wrapped")
	}
	fmt.Fprint(s, "0123456789x\r\n")
	if s.wrapped != 1 {
		t.Fatalf("a line one wider than the screen did not wrap")
	}
	fmt.Fprint(s, "\x1b[1;1H\x1b]0;title\a")
	if len(s.unknown) < 2 {
		t.Fatalf("unknown sequences went unnoticed: %q", s.unknown)
	}
}

// onlcr is a terminal's output processing: a newline starts its row at the
// first column.
type onlcr struct{ w io.Writer }

func (o onlcr) Write(p []byte) (int, error) {
	_, err := o.w.Write(bytes.ReplaceAll(p, []byte("\n"), []byte("\r\n")))
	return len(p), err
}

// A frame line wider than the terminal wraps, and the next frame still
// starts on the first frame's first row and blanks every row it took:
// the move up counts the rows drawn, not the lines.
func TestFrameWriterCoversWrappedRows(t *testing.T) {
	scr := newScreen(20, 10)
	fmt.Fprint(scr, "above\r\n")
	w := &frameWriter{out: onlcr{scr}, size: func() (int, int, error) { return 20, 10, nil }}
	frames := []string{
		"first " + strings.Repeat("x", 40) + "\nsecond\n", // 3 rows and 1
		"third\n",
		"",
	}
	for _, frame := range frames {
		if _, _, err := w.GetTermSize(); err != nil {
			t.Fatal(err)
		}
		w.WriteString(frame)
		if err := w.Flush(strings.Count(frame, "\n")); err != nil {
			t.Fatal(err)
		}
		if frame == "third\n" && scr.lines()[1] != "third" {
			t.Fatalf("the second frame did not start where the first did:\n%s", scr)
		}
	}
	if got := strings.Join(scr.lines(), "|"); strings.TrimRight(got, "|") != "above" {
		t.Errorf("the frames left rows behind:\n%s", scr)
	}
	if len(scr.unknown) > 0 {
		t.Errorf("unknown sequences: %q", scr.unknown)
	}
}

// mpb lays the bars out one column short of the terminal and one row short
// of the screen, and an unknown size is 80×24.
func TestFrameWriterSize(t *testing.T) {
	w := &frameWriter{size: func() (int, int, error) { return 100, 30, nil }}
	if c, r, _ := w.GetTermSize(); c != 99 || r != 29 {
		t.Errorf("100×30 terminal: mpb got %d×%d, want 99×29", c, r)
	}
	w = &frameWriter{size: func() (int, int, error) { return 0, 0, errors.New("no terminal") }}
	if c, r, _ := w.GetTermSize(); c != 79 || r != 23 {
		t.Errorf("unknown size: mpb got %d×%d, want 79×23", c, r)
	}
}
