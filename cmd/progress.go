package cmd

import (
	"github.com/racetest/racetest/runner"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// progress draws one bar per run on stderr, and only when stderr is a
// terminal: a pipe or a CI log gets no bars.
type progress struct {
	p *mpb.Progress
}

func newProgress(io *IOStreams) *progress {
	if !io.ErrTTY {
		return &progress{}
	}
	return &progress{p: mpb.New(mpb.WithOutput(io.ErrOut), mpb.WithWidth(32))}
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
