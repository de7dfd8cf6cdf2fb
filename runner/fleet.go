package runner

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// workers are the run's attempt goroutines: one per worker for the whole
// run, parked between waves, rather than one per worker per wave. Starting
// and ending N goroutines each wave (newproc1, goexit0, gfget) was about
// 30% of the CPU at N=10,000 (docs/measurements.md, "Engine").
//
// A wave reaches them as a call: the engine fills in the call the workers
// are parked on (what to run, and the call to park on after it) and closes
// its gates. The close orders everything the engine wrote before it
// (sessions, subject, the workers' reset marks) before each worker's
// attempt, as the go statement did; a worker's finish orders its marks and
// outcome before the engine reads them. A worker never touches the
// engine's state between finishing one call and the next one's close.
//
// A call has a gate per block of gateWorkers workers (workers 0-63 wait on
// the first, 64-127 on the second, ...). With one gate for all of them,
// each worker parked again on the next call's one channel, under its lock,
// while the other P's workers did the same: at N=1,000 the release spread
// was then 1.3-1.5× the bare reference's (medians of ten runs, loads
// 0.6-4.6), against 1.15-1.40× now. A gate per worker, each given a token
// in turn, removed the contention but made the release N channel
// operations: at N=10,000 under load it was the slower of the two. A close
// per block wakes a block in one operation; a P that steals work takes the
// older half of the other's run queue, so the two mostly run different
// stretches of workers, and park on different blocks' gates
// (docs/measurements.md, "Stop 39").
type workers struct {
	next    *call        // the call the workers are parked on
	gates   int          // per call
	started atomic.Int64 // workers that took their index
	ready   sync.WaitGroup
	exited  sync.WaitGroup
}

// gateWorkers is how many workers share a gate. Up to it (N=16, say) a
// call is what it was with one gate: one channel.
const gateWorkers = 64

// call is one wave as the workers see it.
type call struct {
	first chan struct{}   // the first block's gate; closed: the wave starts
	rest  []chan struct{} // the other blocks'
	run   func(i int)     // worker i's part of the wave; nil: the workers return
	next  *call           // set before the gates are closed
}

func newCall(gates int) *call {
	// With one gate, rest is empty, and make allocates nothing for it.
	c := &call{first: make(chan struct{}), rest: make([]chan struct{}, gates-1)}
	for j := range c.rest {
		c.rest[j] = make(chan struct{})
	}
	return c
}

// gate is block b's gate.
func (c *call) gate(b int) chan struct{} {
	if b == 0 {
		return c.first
	}
	return c.rest[b-1]
}

// open closes every gate, the first block's first.
func (c *call) open() {
	close(c.first)
	for _, g := range c.rest {
		close(g)
	}
}

// startWorkers starts n workers and returns once every one is about to
// park at the first call, so that the first burst's release is not the
// goroutines' start.
func startWorkers(n int) *workers {
	gates := (n + gateWorkers - 1) / gateWorkers
	ws := &workers{next: newCall(gates), gates: gates}
	ws.ready.Add(n)
	ws.exited.Add(n)
	// One func value for all of them: a go statement with arguments, or
	// with a closure, allocates one per goroutine.
	work := ws.work
	for range n {
		go work()
	}
	ws.ready.Wait()
	return ws
}

func (ws *workers) work() {
	defer ws.exited.Done()
	i := int(ws.started.Add(1) - 1)
	block := i / gateWorkers
	c := ws.next
	ws.ready.Done()
	for {
		<-c.gate(block)
		if c.run == nil {
			return
		}
		c.run(i)
		c = c.next
	}
}

// release starts run on every worker at once: the gates open.
func (ws *workers) release(run func(i int)) {
	c := ws.next
	c.run = run
	c.next = newCall(ws.gates)
	ws.next = c.next
	c.open()
}

// stop ends the workers: at once those that are parked, and the others
// when their attempt returns. wait waits for all of them; a run whose
// attempts hung (ErrHung) does not, and abandons them as it abandons their
// sessions.
func (ws *workers) stop(wait bool) {
	ws.next.open()
	if wait {
		ws.exited.Wait()
	}
}

// waveDone counts a wave's attempts down: all is closed when the last
// returns, or when the hang watch ran out first. The engine waits on all
// alone: a select with a timer's channel puts the timer in the heap when
// the engine blocks and takes it out when it wakes, which cost about 0.5µs
// of a 2.8µs release spread at N=16, while the workers are being
// released; the watch's timer is armed once they all are instead (released
// counts them).
type waveDone struct {
	left     atomic.Int64
	released atomic.Int64
	state    atomic.Int32 // running, returned or hung
	all      chan struct{}
	// watch is nil with no attempt timeout. A gate wave's last worker
	// released sets it, while the engine may read it (a wave that hung).
	watch atomic.Pointer[time.Timer]
}

const (
	waveRunning = iota
	waveReturned
	waveHung
)

func (d *waveDone) finish() {
	if d.left.Add(-1) == 0 && d.state.CompareAndSwap(waveRunning, waveReturned) {
		close(d.all)
	}
}

func (d *waveDone) expire() {
	if d.state.CompareAndSwap(waveRunning, waveHung) {
		close(d.all)
	}
}

// edges holds inFlight's keys between waves, so that a wave allocates
// nothing to count its overlap.
type edges struct{ keys, tmp []uint64 }

// radixMin is the number of edges from which inFlight sorts them by radix
// (O(N)); below it pdqsort is faster, and N is bounded.
const radixMin = 256

// inFlight is the most attempts in flight at one instant: a sweep over the
// [released, done] intervals of the workers, in time order. Each edge is
// one key, its time since the earliest edge shifted left by one, with 1 for
// a start and 0 for an end, so that at the same instant ends come first:
// touching is not overlapping. The keys are sorted by an LSD radix sort,
// 8 bits a pass, as many passes as the widest key needs (3 for a burst of
// 10 ms): O(N), where a comparison sort was 8% of the CPU at N=10,000.
func inFlight(ws []*Worker, buf *edges) int {
	if len(ws) == 0 {
		return 0
	}
	lo := time.Duration(1<<63 - 1)
	for _, w := range ws {
		lo = min(lo, w.marks[0].At, w.marks[len(w.marks)-1].At)
	}
	keys := buf.keys[:0]
	var widest uint64
	for _, w := range ws {
		start := uint64(w.marks[0].At-lo)<<1 | 1
		end := uint64(w.marks[len(w.marks)-1].At-lo) << 1
		keys = append(keys, start, end)
		widest = max(widest, start, end)
	}
	if len(keys) < radixMin {
		slices.Sort(keys)
	} else {
		keys = radixSort(keys, buf, widest)
	}
	buf.keys = keys
	cur, most := 0, 0
	for _, k := range keys {
		if k&1 == 1 {
			cur++
			most = max(most, cur)
		} else {
			cur--
		}
	}
	return most
}

// radixSort sorts keys, none above widest, in O(len(keys)) per pass,
// using buf.tmp as the other half of each pass. It returns the sorted
// slice, which is keys or buf.tmp.
func radixSort(keys []uint64, buf *edges, widest uint64) []uint64 {
	buf.tmp = slices.Grow(buf.tmp[:0], len(keys))
	src, dst := keys, buf.tmp[:len(keys)]
	// A shift of 64 or more leaves nothing of widest: the passes end.
	for shift := uint(0); widest>>shift != 0; shift += 8 {
		var count [256]int
		for _, k := range src {
			count[k>>shift&0xff]++
		}
		pos := 0
		for d, c := range count {
			count[d] = pos
			pos += c
		}
		for _, k := range src {
			d := k >> shift & 0xff
			dst[count[d]] = k
			count[d]++
		}
		src, dst = dst, src
	}
	// The two halves swap roles: keep the one not returned for next time.
	if &src[0] == &keys[0] {
		return src
	}
	buf.tmp = keys[:cap(keys)]
	return src
}
