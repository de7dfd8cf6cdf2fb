// Package httpfiretest provides HTTP endpoints to fire at in tests and
// benchmarks: a check-then-write endpoint with a window of known width that
// timestamps every arrival, as racetest serve does.
package httpfiretest

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/racetest/racetest/httpfire"
)

// CheckThenWrite is an endpoint with the classic race. POST /?key=K checks
// whether K was written; if not, it writes it Window later (200); if so, it
// answers 409. GET /count?key=K returns how many times K was written: the
// effects.
//
// By default the window is that of a handler whose gap is I/O (a database
// round trip): after its check the handler parks, costing no CPU, and its
// write takes effect exactly Window after the check, by the server's clock
// (a parked goroutine wakes a millisecond late, so the instant is computed
// rather than slept to). With Spin the handler really waits, spinning: on a
// machine with few cores spinning handlers keep Go's network poller from
// noticing the next arrivals, and the figures measure the server's scheduler
// as much as the release.
//
// A request counts as arrived once its body is read in full, which is when a
// handler can act on it; the instant goes back in the X-Racetest-Arrival
// header, so a client can measure the arrival spread at the server.
type CheckThenWrite struct {
	Window time.Duration
	Spin   bool
	// Tail is how long after its window a handler answers: the rest of a
	// real endpoint's work. Without it the first answers of a burst compete
	// with its last arrivals for the CPU, on a small machine.
	Tail time.Duration

	mu       sync.Mutex
	writes   map[string][]time.Time // when each write takes effect
	arrivals map[string][]time.Time
}

// NewCheckThenWrite returns the endpoint with a check-then-write window.
func NewCheckThenWrite(window time.Duration) *CheckThenWrite {
	return &CheckThenWrite{Window: window, writes: map[string][]time.Time{}, arrivals: map[string][]time.Time{}}
}

func (c *CheckThenWrite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Query().Get("key")
	if r.URL.Path == "/count" {
		fmt.Fprintln(w, c.Writes(key))
		return
	}
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	now := time.Now()
	w.Header().Set(httpfire.ArrivalHeader, strconv.FormatInt(now.UnixNano(), 10))
	if c.Spin {
		c.spin(w, key, now)
		return
	}
	written := !c.check(key, now)
	time.Sleep(c.Window + c.Tail)
	if written {
		http.Error(w, "already written", http.StatusConflict)
		return
	}
	fmt.Fprintln(w, "written")
}

// check records key's arrival at now and reports whether the key was free
// then; if so, its write takes effect Window later.
func (c *CheckThenWrite) check(key string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.arrivals[key] = append(c.arrivals[key], now)
	for _, at := range c.writes[key] {
		if !at.After(now) {
			return false
		}
	}
	c.writes[key] = append(c.writes[key], now.Add(c.Window))
	return true
}

// spin is the handler with a CPU-bound window.
func (c *CheckThenWrite) spin(w http.ResponseWriter, key string, now time.Time) {
	c.mu.Lock()
	c.arrivals[key] = append(c.arrivals[key], now)
	written := false
	for _, at := range c.writes[key] {
		written = written || !at.After(now)
	}
	c.mu.Unlock()
	if written {
		http.Error(w, "already written", http.StatusConflict)
		return
	}
	Wait(c.Window)
	c.mu.Lock()
	c.writes[key] = append(c.writes[key], time.Now())
	c.mu.Unlock()
	time.Sleep(c.Tail)
	fmt.Fprintln(w, "written")
}

// Writes is how many times key was written.
func (c *CheckThenWrite) Writes(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.writes[key])
}

// ArrivalSpread is the time from the first to the last arrival for key.
func (c *CheckThenWrite) ArrivalSpread(key string) (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.arrivals[key]
	if len(a) < 2 {
		return 0, false
	}
	s := append([]time.Time(nil), a...)
	sort.Slice(s, func(i, j int) bool { return s[i].Before(s[j]) })
	return s[len(s)-1].Sub(s[0]), true
}

// Keys lists the keys that saw requests.
func (c *CheckThenWrite) Keys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]string, 0, len(c.arrivals))
	for k := range c.arrivals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Wait pauses for d without a timer: Go's timers wake about a millisecond
// late, far coarser than the windows measured here. It yields while it
// waits, so other handlers run.
func Wait(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
		runtime.Gosched()
	}
}
