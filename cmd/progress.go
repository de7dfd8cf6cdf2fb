package cmd

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/mattn/go-runewidth"
	"github.com/racetest/racetest/runner"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"
)

// progress draws one bar per run on stderr, and only when stderr is a
// terminal: a pipe or a CI log gets no bars.
type progress struct {
	p *mpb.Progress
}

func newProgress(io *ioStreams) *progress {
	if !io.ErrTTY {
		return &progress{}
	}
	fw := &frameWriter{out: io.ErrOut}
	if f, ok := io.ErrOut.(*os.File); ok {
		fd := int(f.Fd())
		fw.size = func() (int, int, error) { return term.GetSize(fd) }
	}
	return &progress{p: mpb.New(mpb.WithConsoleWriter(fw), mpb.WithWidth(32))}
}

// frameWriter draws mpb's frames, each over the last, and leaves nothing
// behind. mpb's own writer moves up over the last frame and erases to the
// end of the screen (ESC[J); from the top-left corner that is a clear
// screen, and tmux (scroll-on-clear, on by default) keeps what a clear
// screen erased in the scrollback: a bar on a pane's first row left every
// frame there (issue 47 item 5). frameWriter blanks the last frame's rows
// one by one instead (ESC[2K), and counts the rows it draws itself, a line
// wider than the terminal as the rows it wraps to (the bars have no colour
// to miscount), so that the next move up covers them.
type frameWriter struct {
	bytes.Buffer // the frame mpb is writing
	out          io.Writer
	size         func() (width, height int, err error) // nil: the terminal's size is unknown
	width        int                                   // columns, at mpb's last question
	drawn        int                                   // rows of the frame on the screen
}

// IsTerminal is true: progress makes a frameWriter only for a terminal.
func (w *frameWriter) IsTerminal() bool { return true }

// GetTermSize is the terminal's size, less a column and a row: a line that
// ends in the last column leaves some terminals waiting to wrap, and a
// frame as tall as the screen scrolls its first row away with its last
// newline, out of reach of the next move up. An unknown size is 80×24.
func (w *frameWriter) GetTermSize() (width, height int, err error) {
	width, height = 80, 24
	if w.size != nil {
		if c, r, err := w.size(); err == nil && c > 1 && r > 1 {
			width, height = c, r
		}
	}
	w.width = width
	return width - 1, height - 1, nil
}

// Flush draws the buffered frame where the last one was. mpb's count of
// its lines is not used: the rows are counted as they are written.
func (w *frameWriter) Flush(int) error {
	var b bytes.Buffer
	if w.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", w.drawn)
		for range w.drawn {
			b.WriteString("\r\x1b[2K\n")
		}
		fmt.Fprintf(&b, "\x1b[%dA", w.drawn)
	}
	w.drawn = 0
	for line := range bytes.Lines(w.Bytes()) {
		line = bytes.TrimSuffix(line, []byte("\n"))
		b.Write(line)
		b.WriteByte('\n')
		w.drawn += rowsOf(runewidth.StringWidth(string(line)), w.width)
	}
	w.Reset()
	if b.Len() == 0 {
		return nil
	}
	_, err := w.out.Write(b.Bytes())
	return err
}

// rowsOf is the rows a line of cells columns takes on a terminal of width
// columns: one for an empty line, more for one that wraps.
func rowsOf(cells, width int) int {
	if width <= 0 || cells <= width {
		return 1
	}
	return (cells + width - 1) / width
}

// track returns the callback for one run and a func to call when it ends.
func (pr *progress) track(name string, total int) (func(runner.Progress), func()) {
	return pr.trackUnit(name, total, "bursts")
}

// trackUnit is track counting in unit ("bursts", "cells").
func (pr *progress) trackUnit(name string, total int, unit string) (func(runner.Progress), func()) {
	if pr.p == nil {
		return nil, func() {}
	}
	bar := pr.p.AddBar(int64(total),
		mpb.PrependDecorators(decor.Name(name, decor.WC{W: 28, C: decor.DindentRight})),
		mpb.AppendDecorators(
			decor.CountersNoUnit("%d/%d "+unit),
		),
		mpb.BarRemoveOnComplete(),
	)
	return func(p runner.Progress) {
			if p.Total > 0 {
				// A run that tops up its bursts (runner.TopUp) grows its total.
				bar.SetTotal(int64(p.Total), false)
			}
			bar.SetCurrent(int64(p.Done))
		},
		func() {
			if !bar.Completed() {
				bar.Abort(true)
			}
		}
}

// wait lets the bars finish drawing before the report is written.
func (pr *progress) wait() {
	if pr.p != nil {
		pr.p.Wait()
	}
}
