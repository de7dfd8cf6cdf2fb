package runner

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// WireRelease releases a wave's attempts at the wire rather than at the
// gate: each worker starts its attempt at once, its connection holds back the
// last byte of the first request of the attempt's first step, and when every
// attempt has parked (or a bounded wait ran out) one loop writes every held
// byte. The release package implements it for the backends whose drivers dial
// through scenarios.Params.Dial; the runner never sees a connection.
//
// The first step begins at the attempt's first w.Mark: requests written
// before it (a driver's BEGIN, say) go out unheld.
type WireRelease interface {
	// Name is the mode's name, as the report shows it ("last-byte").
	Name() string
	// Context returns ctx tagged with worker: a connection dialled with it
	// belongs to worker. The runner passes it to App.Session and Attempt.
	Context(ctx context.Context, worker int) context.Context
	// Claim opens worker's claim window around App.Session: a connection
	// dialled, or first written on, before end is called belongs to worker
	// (drivers that dial in the background never see the session's context).
	Claim(worker int) (end func())
	// Ready reports, once the fleet is open, why attempts cannot be released
	// at the wire (a worker that owns no connection), or nil.
	Ready(workers int) error
	// Begin starts a wave of n attempts.
	Begin(n int)
	// Arm holds back the next request worker writes: its first step began.
	Arm(worker int)
	// Finished says worker's attempt returned.
	Finished(worker int)
	// Release waits, bounded, until every attempt of the wave has parked its
	// request or finished, then writes every held byte in one loop.
	Release(ctx context.Context)
	// Sent says how worker's first step left the client, and when its
	// request was complete on the wire.
	Sent(worker int) (at time.Time, how Sending)
}

// Sending is how an attempt's first step left the client in a wire release.
type Sending uint8

const (
	// SentNothing: the attempt wrote nothing once its first step began
	// (refused in memory, an error before the first request).
	SentNothing Sending = iota
	// SentHeld: its request was held back and released with the others.
	SentHeld
	// SentLate: its request went out on its own, after the others were
	// released (it had not parked within the bounded wait).
	SentLate
)

// WireCounts are a wave's attempts by how they left the client, summed over
// a burst's waves. All zero for a gate release.
type WireCounts struct {
	Held, Late, Silent int
}

// Synchronized reports whether every attempt that sent a request was
// released together with the others.
func (c WireCounts) Synchronized() bool { return c.Late == 0 }

// Release releases every wave at the wire through r instead of the gate.
func Release(r WireRelease) Option { return func(c *Config) { c.Release = r } }

// Note adds a line to the report of the run (a release mode that fell back,
// say).
func Note(line string) Option { return func(c *Config) { c.Notes = append(c.Notes, line) } }

// ReleaseName is the name of the release a config uses.
func (c *Config) ReleaseName() string {
	if c.Release == nil {
		return GateRelease
	}
	return c.Release.Name()
}

// GateRelease is the name of the default release: every worker parks on one
// gate, which opens once.
const GateRelease = "gate"

// wireNote sums a run's wire counts into one line for the report.
func wireNote(name string, bursts []Burst, fellBack error) string {
	if fellBack != nil {
		return fmt.Sprintf("release: %s was asked for, but %v — every burst was released through the gate instead", name, fellBack)
	}
	var sum WireCounts
	late := 0
	for _, b := range bursts {
		sum.Held += b.Wire.Held
		sum.Late += b.Wire.Late
		sum.Silent += b.Wire.Silent
		if b.Wire.Late > 0 {
			late++
		}
	}
	total := sum.Held + sum.Late + sum.Silent
	line := fmt.Sprintf("release: %s — %d of %d attempts held back the last byte of their first request and were released together",
		name, sum.Held, total)
	if sum.Late > 0 {
		line += fmt.Sprintf("; %d were not synchronized: their request went out late, on its own (in %d of %d bursts)", sum.Late, late, len(bursts))
	}
	if sum.Silent > 0 {
		line += fmt.Sprintf("; %d sent no request once their first step began", sum.Silent)
	}
	return line
}

// wireWave is wave for a wire release: every worker starts its attempt at
// once, and the release decides when their first requests are complete on
// the wire. A worker's "released" mark is that instant.
func (e *engine) wireWave(ctx context.Context, s Subject, wave int) (spread time.Duration, overlap int, err error) {
	n := len(e.workers)
	rel := e.rel
	if len(e.arm) != n {
		e.arm = make([]func(), n)
		for i := range e.arm {
			e.arm[i] = func() { rel.Arm(i) }
		}
	}
	ws := e.startWorkers()
	rel.Begin(n)
	// One timeout for the wave (see wave): each attempt's context is the
	// wave's, tagged with its worker.
	wctx, wc := e.waveContext(ctx)
	defer wc.release()
	done := newWave(n)
	base := time.Now()
	for i, w := range e.workers {
		w.Wave = wave
		w.base = base
		w.marks = w.marks[:0]
		w.onFirstMark = e.arm[i]
	}
	sessions := e.sessions // see wave
	ws.release(func(i int) {
		w := e.workers[i]
		actx := rel.Context(wctx, i)
		o := e.attempt(actx, i, sessions[i], s, w)
		if o.Class == Error && errors.Is(context.Cause(actx), ErrTimeout) {
			o = Outcome{Class: Unknown, Err: o.Err}
		}
		w.onFirstMark = nil
		if w.sched != nil {
			w.sched.Done(i)
		}
		rel.Finished(i)
		w.Mark("done")
		e.outs[i] = o
		done.finish()
	})
	rel.Release(ctx)
	wc.arm()
	e.watch(done)
	if err := e.await(done); err != nil {
		return 0, 0, err
	}
	e.wire = WireCounts{}
	first, last := time.Duration(1<<62), time.Duration(-1<<62)
	for i, w := range e.workers {
		at, how := rel.Sent(i)
		var r time.Duration
		switch how {
		case SentHeld, SentLate:
			r = at.Sub(base)
			first, last = min(first, r), max(last, r)
			if how == SentHeld {
				e.wire.Held++
			} else {
				e.wire.Late++
			}
		default:
			// Nothing went out: the attempt ran from its first step (or
			// from its start) without the wire.
			e.wire.Silent++
			if len(w.marks) > 1 {
				r = w.marks[0].At
			}
		}
		w.marks = append(w.marks, Mark{})
		copy(w.marks[1:], w.marks)
		w.marks[0] = Mark{Name: "released", At: r}
	}
	if e.wire.Held+e.wire.Late == 0 {
		for _, w := range e.workers {
			first, last = min(first, w.marks[0].At), max(last, w.marks[0].At)
		}
	}
	overlap = inFlight(e.workers, &e.edges)
	e.trace(wave)
	return last - first, overlap, nil
}
