package httpfire

import (
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/racetest/racetest/runner"
)

// ArrivalHeader is the response header in which a server under test may put
// the instant (Unix nanoseconds) a request finished arriving; racetest serve
// does. With it, each burst's arrival spread is measured at the server.
const ArrivalHeader = "X-Racetest-Arrival"

// releaser is one thing the release loop writes: a connection's held tail
// (last-byte) or a connection's held final frames (single-packet).
type releaser interface {
	fire(at time.Time)
}

// burst is one burst's shared state: its template variables, its release,
// and what its attempts saw. It is the runner.Subject's Data.
type burst struct {
	vars Vars
	// baseline is what the effects check read before the burst; held is
	// each invariant's violations then, until the runner takes them.
	baseline int
	held     []int
	// watch watches the checked database for lock waits while the
	// burst's requests are in flight; nil when nothing watches.
	watch *burstWatch
	// hold is the burst's part of a database proxy (Config.Proxy); nil
	// without one.
	hold *holdBurst

	// The release of the first wave. Past the runner's gate each attempt
	// arrives and goes straight to waiting for its response; the last to
	// arrive runs the loop that writes every held tail, so no other attempt
	// of the burst competes for a CPU while the requests leave, and the
	// server has the machine to itself as they arrive. A straggler cannot
	// hold the burst: releaseWait after the first arrival, the loop runs
	// anyway.
	once      sync.Once
	releasers []releaser
	expected  int32 // attempts that will arrive
	arrivedN  atomic.Int32
	late      atomic.Bool // the loop ran before every attempt arrived
	// armed counts the attempts armed for this burst's first wave.
	armed int

	attempts atomic.Int32
	answered atomic.Int32
	executed atomic.Int32
	failed   atomic.Int32 // error or unknown: no claim either way

	sentFirst, sentLast atomic.Int64 // Unix ns; 0 until the first send

	mu          sync.Mutex
	arriveFirst int64
	arriveLast  int64
	arrivals    int
	// responses are the answered requests' response times, from leaving
	// the client to the response read: the server's parallelism is
	// estimated from them.
	responses      []time.Duration
	statuses       map[int]int
	firstErr       error
	server, proto  string
	notSynchronous int // attempts that could not be held back for the release
}

func newBurst(v Vars) *burst { return &burst{vars: v, statuses: map[int]int{}} }

func (b *burst) varsFor(attempt int) Vars {
	v := b.vars
	v.Attempt = attempt
	return v
}

// releaseWait bounds how long the first attempt to arrive waits for the
// others before the loop runs without them.
const releaseWait = 10 * time.Millisecond

// arrive says an attempt of the first wave is past the gate; the last one
// runs the release loop.
func (b *burst) arrive() {
	n := b.arrivedN.Add(1)
	if n == 1 && b.expected > 1 {
		time.AfterFunc(releaseWait, func() {
			if b.arrivedN.Load() < b.expected {
				b.late.Store(true)
			}
			b.release()
		})
	}
	if n >= b.expected {
		b.release()
	}
}

// release runs the release loop once.
func (b *burst) release() {
	b.once.Do(func() {
		for _, r := range b.releasers {
			r.fire(time.Now())
		}
	})
}

// sent records that a request (or a connection's held frames) started to
// leave at t. Lock-free: a worker calls it beside its write, and a lock
// here would delay the writes it measures.
func (b *burst) sent(t time.Time) {
	ns := t.UnixNano()
	for {
		cur := b.sentFirst.Load()
		if (cur != 0 && cur <= ns) || b.sentFirst.CompareAndSwap(cur, ns) {
			break
		}
	}
	for {
		cur := b.sentLast.Load()
		if cur >= ns || b.sentLast.CompareAndSwap(cur, ns) {
			break
		}
	}
}

// answer records one response, which took took from the request leaving
// the client to the response read (0: not known, and left out of the
// parallelism estimate).
func (b *burst) answer(status int, h http.Header, proto string, took time.Duration) {
	b.answered.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.statuses[status]++
	if took > 0 {
		b.responses = append(b.responses, took)
	}
	if b.server == "" {
		b.server, b.proto = h.Get("Server"), proto
	}
	if ns, err := strconv.ParseInt(h.Get(ArrivalHeader), 10, 64); err == nil && ns > 0 {
		if b.arrivals == 0 || ns < b.arriveFirst {
			b.arriveFirst = ns
		}
		if ns > b.arriveLast {
			b.arriveLast = ns
		}
		b.arrivals++
	}
}

// outcome counts an attempt's outcome in the burst.
func (b *burst) outcome(o runner.Outcome) runner.Outcome {
	b.hold.done()
	switch o.Class {
	case runner.Executed:
		b.executed.Add(1)
	case runner.Error, runner.Unknown:
		var rej *rejectedError
		if errors.As(o.Err, &rej) {
			// Answered, and refused: the response counts, not a failure.
			break
		}
		b.failed.Add(1)
		b.mu.Lock()
		if b.firstErr == nil {
			b.firstErr = o.Err
		}
		b.mu.Unlock()
	}
	return o
}

func (b *burst) clientSpread() (time.Duration, bool) {
	first := b.sentFirst.Load()
	return time.Duration(b.sentLast.Load() - first), first != 0
}

func (b *burst) serverSpread() (time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return time.Duration(b.arriveLast - b.arriveFirst), b.arrivals >= 2
}

// parallelism is the burst's estimate of how many requests the server
// handled at once (0: too few responses to tell).
func (b *burst) parallelism() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return parallelism(b.responses)
}
