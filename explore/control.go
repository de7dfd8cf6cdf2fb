package explore

import (
	"context"
	"time"

	"github.com/racetest/racetest/runner"
)

// event is what an attempt tells the controller: it reached the boundary
// before step name, or it returned.
type event struct {
	worker int
	name   string
	done   bool
}

// controller is the runner.Scheduler of one order: every attempt waits at
// each step boundary until the controller lets it cross, one step at a
// time, in the order's sequence.
type controller struct {
	events chan event
	grant  []chan struct{}
	// stop is closed when the controller no longer listens (its order
	// ended or ran out of time): attempts still running tell no one.
	stop chan struct{}
}

var _ runner.Scheduler = (*controller)(nil)

func newController(n int) *controller {
	c := &controller{events: make(chan event, 4*n), grant: make([]chan struct{}, n), stop: make(chan struct{})}
	for i := range c.grant {
		c.grant[i] = make(chan struct{}, 1)
	}
	return c
}

// Step holds the attempt at the boundary until it is granted or its
// context ends (the attempt's --timeout).
func (c *controller) Step(ctx context.Context, worker int, name string) {
	select {
	case c.events <- event{worker: worker, name: name}:
	case <-c.stop:
		return
	}
	select {
	case <-c.grant[worker]:
	case <-ctx.Done():
	}
}

// Done tells the controller that the attempt returned.
func (c *controller) Done(worker int) {
	select {
	case c.events <- event{worker: worker, done: true}:
	case <-c.stop:
	}
}

// state is where one attempt is, as the controller last heard.
type state uint8

const (
	running  state = iota // crossing a step (or before its first boundary)
	waiting               // at a boundary, held
	finished              // returned
)

// forever, as wait's time limit, is none.
const forever time.Duration = -1

// probeEvery is how often the controller asks the server whether a step
// that has not come back waits on a lock.
const probeEvery = 250 * time.Microsecond

// drive carries out one order: it lets the attempts cross their steps in
// the order of seq (worker indexes), one at a time. A step the server says
// waits on a lock (probe; without one, a step that has not reached the
// next boundary within blockAfter) is recorded as blocked and the next
// entry goes ahead; a blocked attempt's later entries wait until it comes
// back. Entries of an attempt that already returned are void; steps beyond
// seq go to lead first, then in worker order. It returns when every
// attempt has returned, or when ctx ends (the caller's attempts end with
// it).
func (c *controller) drive(ctx context.Context, seq []int, lead int, blockAfter time.Duration,
	probe func(ctx context.Context, w int) (bool, error), pace func(Event)) []Event {
	defer close(c.stop)
	n := len(c.grant)
	st := make([]state, n)
	next := make([]string, n) // the step each waiting attempt is at
	count := make([]int, n)   // steps granted so far, per attempt
	left := n
	var ran []Event
	handle := func(e event) {
		if e.done {
			if st[e.worker] != finished {
				st[e.worker] = finished
				left--
			}
			return
		}
		st[e.worker], next[e.worker] = waiting, e.name
	}
	// wait takes events until cond holds, for at most d (forever: d < 0),
	// or until ctx ends; it reports whether cond held.
	wait := func(d time.Duration, cond func() bool) bool {
		var timeout <-chan time.Time
		if d >= 0 {
			t := time.NewTimer(d)
			defer t.Stop()
			timeout = t.C
		}
		for !cond() {
			select {
			case e := <-c.events:
				handle(e)
			case <-timeout:
				return cond()
			case <-ctx.Done():
				return false
			}
		}
		return true
	}
	settled := func(w int) func() bool { return func() bool { return st[w] != running } }
	// blocked waits until w reaches a boundary or returns (false), or is
	// blocked (true): the server says it waits on a lock, or, where it
	// cannot say, blockAfter passed first.
	blocked := func(w int) bool {
		if probe == nil {
			return !wait(blockAfter, settled(w)) && ctx.Err() == nil
		}
		start := time.Now()
		for {
			if wait(probeEvery, settled(w)) || ctx.Err() != nil {
				return false
			}
			waiting, err := probe(ctx, w)
			if err != nil {
				// The server did not answer: the timer decides this step.
				return !wait(max(blockAfter-time.Since(start), 0), settled(w)) && ctx.Err() == nil
			}
			if waiting {
				return true
			}
		}
	}
	// Every attempt first reaches its first boundary (or returns), or is
	// blocked before its first step.
	for w := range n {
		blocked(w)
	}
	pending := append([]int(nil), seq...)
	for left > 0 && ctx.Err() == nil {
		// The first pending entry whose attempt is at a boundary; entries
		// of returned attempts are dropped.
		pick := -1
		for i := 0; i < len(pending); i++ {
			w := pending[i]
			if st[w] == finished {
				pending = append(pending[:i], pending[i+1:]...)
				i--
				continue
			}
			if st[w] == waiting {
				pick = i
				break
			}
		}
		extra := false
		w := -1
		if pick >= 0 {
			w = pending[pick]
			pending = append(pending[:pick], pending[pick+1:]...)
		} else if len(pending) == 0 {
			// Past the order's steps: the lead, else the lowest attempt at
			// a boundary.
			for _, i := range append([]int{lead}, others(n, lead)...) {
				if st[i] == waiting {
					w, extra = i, true
					break
				}
			}
		}
		if w < 0 {
			// Every attempt with steps to go is blocked: wait for one.
			wait(forever, func() bool {
				for i := range n {
					if st[i] == waiting {
						return true
					}
				}
				return left == 0
			})
			continue
		}
		count[w]++
		ev := Event{Worker: w, Step: count[w], Name: next[w], Extra: extra}
		if pace != nil {
			pace(ev)
		}
		st[w] = running
		c.grant[w] <- struct{}{}
		ev.Blocked = blocked(w)
		ran = append(ran, ev)
	}
	return ran
}
