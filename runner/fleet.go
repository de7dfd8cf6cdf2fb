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
// 30% of the CPU at N=10,000 (issue 28; docs/measurements.md, "Engine").
//
// Each worker parks on a gate of its own, a channel with room for one
// token, and a wave opens every gate in turn. They used to park on one
// channel that the engine closed: one close woke them all, but each worker
// parked again on the next wave's shared channel, under its lock, while
// the other P's workers did the same. At N=1,000 that contention kept the
// release spread at 1.6-2.2× the bare reference's on an idle machine; with
// a gate each, and no lock shared between workers, it is 1.1-1.3×. A gate
// each also costs nothing per wave: the shared channel was two allocations
// a wave.
//
// The engine writes run, then sends a token to each gate: the send orders
// what the engine wrote before it (sessions, subject, the workers' reset
// marks, run) before the worker's attempt, as the go statement did; a
// worker's finish orders its marks and outcome before the engine reads
// them. A worker reads run only after its token, and takes one token a
// wave: the engine sends the next only after every worker finished.
type workers struct {
	gates   []chan struct{} // worker i parks on gates[i]
	run     func(i int)     // the wave's; nil: the workers return
	started atomic.Int64    // workers that took their index
	ready   sync.WaitGroup
	exited  sync.WaitGroup
}

// startWorkers starts n workers and returns once every one is about to
// park at its gate, so that the first burst's release is not the
// goroutines' start.
func startWorkers(n int) *workers {
	ws := &workers{gates: make([]chan struct{}, n)}
	for i := range ws.gates {
		ws.gates[i] = make(chan struct{}, 1)
	}
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
	gate := ws.gates[i]
	ws.ready.Done()
	for {
		<-gate
		run := ws.run
		if run == nil {
			return
		}
		run(i)
	}
}

// release starts run on every worker: their gates open one after another.
func (ws *workers) release(run func(i int)) {
	ws.run = run
	ws.open()
}

// open gives each gate its token. A gate has room for it: its worker took
// the last one before it finished the wave before.
func (ws *workers) open() {
	for _, g := range ws.gates {
		g <- struct{}{}
	}
}

// stop ends the workers: at once those that are parked, and the others
// when their attempt returns. wait waits for all of them; a run whose
// attempts hung (ErrHung) does not, and abandons them as it abandons their
// sessions.
func (ws *workers) stop(wait bool) {
	ws.run = nil
	ws.open()
	if wait {
		ws.exited.Wait()
	}
}

// waveDone counts a wave's attempts down: all is closed when the last
// returns, or when the hang watch ran out first. The engine waits on all
// alone: a select with a timer's channel puts the timer in the heap when
// the engine blocks and takes it out when it wakes, which cost about 0.5µs
// of a 2.8µs release spread at N=16 (issue 28), while the workers are being
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
