package release

import (
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/racetest/racetest/runner"
)

// DefaultParkWait bounds how long a wave waits for its attempts to park
// before the held bytes are written anyway. Attempts reach their park point
// within a few milliseconds on a loaded machine; the bound only matters for an
// attempt that never parks (an error before its first request, a request the
// driver writes in pieces, a lock wait behind another worker's transaction).
const DefaultParkWait = 100 * time.Millisecond

// selfRelease is how long past the park wait a held request waits for the
// release before it sends its tail itself: a guard against a
// releaser that is never called, so that no connection can hang.
const selfRelease = 2 * time.Second

// Slot states: a worker's connection holds back one request per wave, the
// first one written once the attempt's first step began.
const (
	idle  uint32 = iota // requests pass through
	armed               // the next request is held back
	taken               // this wave's request was seen
)

// Wire is the last-byte release for one run: the dial hook that wraps every
// connection the backend opens, and the runner.WireRelease that parks and
// releases them. A connection belongs to the worker whose session dialled it
// (or first wrote on it); connections of no worker (racetest's own setup and
// counting, a driver's monitoring) are never held. Where a protocol's
// monitors dial in the background while a session is being opened (mongo's
// heartbeat), a connection is claimed by its first write that is not a
// monitor's (see anonymous), never by its dial.
type Wire struct {
	dialer    net.Dialer
	parkWait  time.Duration
	cut       framer
	anon      func(p []byte) bool // nil: every write claims
	writers   int                 // threads that write the held tails at once
	settleFor time.Duration       // see WireOptions.Settle
	occupy    []byte              // the PINGs of WireOptions.Occupy, or nil

	occMu sync.Mutex
	live  int                  // connections dialled and not closed
	occs  map[string]*occupier // the release's own connections, by destination
	// held, when set (by tests), sees every request held back.
	held func(worker int, request []byte)

	claiming atomic.Pointer[slot]

	mu      sync.Mutex
	slots   []*slot
	open    bool // the wave's requests may still park
	parked  []*park
	pending int // workers of the wave neither parked nor finished
	notify  chan struct{}
}

// NewWire returns a last-byte release for backend's protocol that waits at
// most parkWait for a wave's attempts to park (DefaultParkWait when 0).
func NewWire(backend string, parkWait time.Duration) *Wire {
	return NewWireWith(backend, WireOptions{ParkWait: parkWait})
}

// WireOptions tune how a Wire writes the held tails; the zero value is the
// default. They exist to measure the choices (release/bench's experiment,
// docs/measurements.md).
type WireOptions struct {
	// ParkWait bounds the wait for a wave's attempts to park
	// (DefaultParkWait when 0).
	ParkWait time.Duration
	// Writers is how many threads write the held tails at once (0: the
	// default, see writersFor).
	Writers int
	// Settle is how long the release leaves the CPUs to the server after
	// the last tail left, before it wakes the attempts whose requests were
	// held (they have nothing to do before the server answers). 0: at once.
	Settle time.Duration
	// Occupy, for Redis, is how many PINGs the release sends in one write on
	// a connection of its own to each server a wave's held requests go to,
	// just before it writes their tails (0: DefaultOccupy, below 0: none).
	Occupy int
}

// DefaultOccupy is how many PINGs a Redis last-byte release sends just
// before the held tails. Redis runs every client on one thread: woken by the
// first tail, it can read and run that request before the next has landed,
// sleep, and wake again for the next: the attempts then reach it a loop
// apart (a median 22-26 µs at load 5). Busy with the PINGs (tens of
// microseconds, a few kilobytes of replies), it finds every tail waiting
// when it next looks and runs them back to back. Measured with the server's
// own TIME stamps at N=2, modes interleaved (docs/measurements.md): the
// share of bursts whose two arrivals fall within 10 µs rose from 8-56% to
// 42-76% at load 5; 64 PINGs did less, 1,024 more (5-20 points) at 4 times
// the work every burst waits behind.
const DefaultOccupy = 256

// NewWireWith is NewWire tuned by o.
func NewWireWith(backend string, o WireOptions) *Wire {
	if o.ParkWait <= 0 {
		o.ParkWait = DefaultParkWait
	}
	cut := framers[backend]
	if cut == nil {
		cut = lastByteOnly
	}
	w := &Wire{parkWait: o.ParkWait, cut: cut, anon: anonymous[backend], writers: o.Writers, settleFor: o.Settle, notify: make(chan struct{}, 1)}
	if o.Occupy == 0 {
		o.Occupy = DefaultOccupy
	}
	if o.Occupy > 0 && backend == "redis" {
		w.occupy = []byte(strings.Repeat("PING\r\n", o.Occupy))
	}
	return w
}

// occupier is the release's own connection to one server, for
// WireOptions.Occupy; its replies are read and dropped.
type occupier struct {
	// c is nil until dialled, and for good once its dial or a write failed
	// (a server that wants TLS, say): no more tries.
	c net.Conn
}

// occupyWait bounds an occupier's write: the PINGs are a help, never a
// reason for a release to wait.
const occupyWait = 10 * time.Millisecond

// occupyDial bounds the dial of an occupier.
const occupyDial = 5 * time.Second

// occupyAll writes the PINGs to every server the parked requests go to
// whose occupier is connected.
func (w *Wire) occupyAll(parked []*park) {
	w.occMu.Lock()
	defer w.occMu.Unlock()
	for i, pk := range parked {
		if slices.ContainsFunc(parked[:i], func(q *park) bool { return q.c.dest == pk.c.dest }) {
			continue
		}
		o := w.occs[pk.c.dest]
		if o == nil || o.c == nil {
			continue
		}
		o.c.SetWriteDeadline(time.Now().Add(occupyWait))
		if _, err := o.c.Write(w.occupy); err != nil {
			o.c.Close()
			o.c = nil
		}
	}
}

// dialled counts a connection of the run's to dest, and dials dest's
// occupier in the background the first time: a release never waits for it.
// closed counts one closed. When the last is closed (the run's pools are
// closed), so are the occupiers.
func (w *Wire) dialled(dest string) {
	w.occMu.Lock()
	defer w.occMu.Unlock()
	w.live++
	if w.occs[dest] != nil {
		return
	}
	o := &occupier{}
	if w.occs == nil {
		w.occs = map[string]*occupier{}
	}
	w.occs[dest] = o
	go func() {
		network, addr, _ := strings.Cut(dest, " ")
		d := w.dialer
		d.Timeout = occupyDial
		c, err := d.Dial(network, addr)
		w.occMu.Lock()
		defer w.occMu.Unlock()
		if err != nil {
			return
		}
		if w.occs[dest] != o { // the run closed its connections meanwhile
			c.Close()
			return
		}
		o.c = c
		go io.Copy(io.Discard, c)
	}()
}

func (w *Wire) closed() {
	w.occMu.Lock()
	defer w.occMu.Unlock()
	w.live--
	if w.live > 0 {
		return
	}
	for _, o := range w.occs {
		if o.c != nil {
			o.c.Close()
		}
	}
	w.occs = nil
}

// writersFor is how many threads write a wave's n held tails: the Wire's
// own count when set, else one thread up to soloMax tails and one per CPU
// above.
func (w *Wire) writersFor(n int) int {
	if w.writers > 0 {
		return w.writers
	}
	if n <= soloMax {
		return 1
	}
	return runtime.GOMAXPROCS(0)
}

// soloMax is the most held tails one thread writes alone. Measured with
// the servers' arrival stamps (docs/measurements.md), at N=2 and 8 one
// writer put the attempts as close together at the server as one per CPU,
// or closer — threads spinning to write at once hold both CPUs of a small
// machine just when the server's processes are woken to read — and never
// exposed fewer races; at N=32 they tied.
const soloMax = 8

var _ runner.WireRelease = (*Wire)(nil)

// slot is one worker's standing in the run and in the current wave.
type slot struct {
	worker int
	state  atomic.Uint32
	conns  atomic.Int32 // open connections bound to the worker

	// The wave's outcome, under Wire.mu.
	counted bool // parked or finished: no longer awaited
	how     runner.Sending
	at      time.Time
}

// park is one held request's tail: from the last byte of its first message.
type park struct {
	c    *conn
	s    *slot
	tail []byte
	once atomic.Bool // who writes the byte: the loop, or the request itself
	n    int
	err  error
	at   time.Time
	wake chan struct{}
}

type workerKey struct{}

// Name is the mode's name, for the report.
func (w *Wire) Name() string { return string(LastByte) }

// Dial dials addr and wraps the connection; it is the run's Params.Dial.
func (w *Wire) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	nc, err := w.dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c := &conn{Conn: nc, w: w, dest: network + " " + addr}
	if w.occupy != nil {
		w.dialled(c.dest)
	}
	if s, ok := ctx.Value(workerKey{}).(*slot); ok {
		c.bind(s)
	} else if s := w.claiming.Load(); s != nil && w.anon == nil {
		c.bind(s)
	}
	return c, nil
}

func (w *Wire) slot(worker int) *slot {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.slots) <= worker {
		w.slots = append(w.slots, &slot{worker: len(w.slots)})
	}
	return w.slots[worker]
}

// Context tags ctx with worker, so that a connection dialled with it is the
// worker's.
func (w *Wire) Context(ctx context.Context, worker int) context.Context {
	return context.WithValue(ctx, workerKey{}, w.slot(worker))
}

// Claim opens worker's claim window; see runner.WireRelease.
func (w *Wire) Claim(worker int) (end func()) {
	s := w.slot(worker)
	w.claiming.Store(s)
	return func() { w.claiming.CompareAndSwap(s, nil) }
}

// Ready reports a worker that owns no connection: its requests could not be
// told from another worker's, so nothing can be held for it.
func (w *Wire) Ready(workers int) error {
	for i := range workers {
		if w.slot(i).conns.Load() == 0 {
			return fmt.Errorf("worker %d has no connection of its own (the backend shares its connections among workers, or dials them outside the worker's session)", i)
		}
	}
	return nil
}

// Begin starts a wave of n attempts.
func (w *Wire) Begin(n int) {
	w.slot(max(n-1, 0))
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.slots {
		s.state.Store(idle)
		s.counted, s.how, s.at = false, runner.SentNothing, time.Time{}
	}
	w.pending, w.open = n, true
	w.parked = w.parked[:0]
	select {
	case <-w.notify:
	default:
	}
}

// Arm holds back the next request worker writes.
func (w *Wire) Arm(worker int) {
	w.mu.Lock()
	s := w.slots[worker]
	w.mu.Unlock()
	s.state.Store(armed)
}

// Finished says worker's attempt returned: the wave no longer waits for it.
func (w *Wire) Finished(worker int) {
	w.mu.Lock()
	s := w.slots[worker]
	s.state.CompareAndSwap(armed, idle)
	if !s.counted {
		s.counted = true
		w.pending--
	}
	w.mu.Unlock()
	w.signal()
}

func (w *Wire) signal() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// Release waits until every attempt of the wave has parked or finished, at
// most the park wait (or until ctx ends), then writes every held tail (see
// writeAll), and only then wakes the parked writers.
func (w *Wire) Release(ctx context.Context) {
	t := time.NewTimer(w.parkWait)
	defer t.Stop()
wait:
	for {
		w.mu.Lock()
		pending := w.pending
		w.mu.Unlock()
		if pending <= 0 {
			break
		}
		select {
		case <-w.notify:
		case <-t.C:
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	w.mu.Lock()
	w.open = false
	parked := w.parked
	w.mu.Unlock()
	if w.occupy != nil {
		w.occupyAll(parked)
	}
	w.writeAll(parked)
	if w.settleFor > 0 && len(parked) > 0 {
		time.Sleep(w.settleFor)
	}
	w.mu.Lock()
	for _, pk := range parked {
		if !pk.at.IsZero() {
			pk.s.how, pk.s.at = runner.SentHeld, pk.at
		}
	}
	w.mu.Unlock()
	for _, pk := range parked {
		close(pk.wake)
	}
}

// writeAll writes every held tail. For a few tails one thread writes them
// (soloMax). For more, one thread writing them one after the other gives a
// server that starts on the first request time to finish it before the
// last lands, and a server thread woken by that thread waits for its CPU;
// so the tails are shared among up to GOMAXPROCS threads that spin on one
// flag and write at once (docs/measurements.md has the figures).
func (w *Wire) writeAll(parked []*park) {
	k := min(w.writersFor(len(parked)), len(parked))
	if k < 2 {
		for _, pk := range parked {
			w.write(pk)
		}
		return
	}
	share := func(g int) []*park { return parked[g*len(parked)/k : (g+1)*len(parked)/k] }
	var ready atomic.Int32
	var start atomic.Bool
	var wg sync.WaitGroup
	for g := 1; g < k; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ready.Add(1)
			if !spinUntil(&start, helperWait) {
				// The loop below lost its CPU: it writes this share
				// when it runs again, and a helper spinning on meanwhile
				// would hold a CPU the server needs.
				return
			}
			for _, pk := range share(g) {
				w.write(pk)
			}
		}()
	}
	// A helper the machine does not run in time leaves its share to this
	// loop: whoever comes first writes a tail, once.
	deadline := time.Now().Add(helperWait)
	for ready.Load() < int32(k-1) && time.Now().Before(deadline) {
	}
	start.Store(true)
	for _, pk := range share(0) {
		w.write(pk)
	}
	for _, pk := range parked {
		w.write(pk)
	}
	wg.Wait()
}

// helperWait bounds how long the release waits for its helper threads to
// spin up before it writes their tails itself, and how long a helper spins
// for the start before it leaves its share to the release's loop. Without
// the second bound a helper spun for as long as the loop's thread waited
// for a CPU: on 2 shared cores at load 9-12, 72% of a `racetest sql` run's
// CPU, 1.6 ms a burst at N=16 (docs/measurements.md, "Stop 52").
const helperWait = 200 * time.Microsecond

// spinUntil spins until flag is set, at most about d: whether it was.
func spinUntil(flag *atomic.Bool, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for i := 1; !flag.Load(); i++ {
		// The clock every 64 turns: a read of it costs more than a load.
		if i%64 == 0 && time.Now().After(deadline) {
			return flag.Load()
		}
	}
	return true
}

func (w *Wire) write(pk *park) {
	if pk.once.CompareAndSwap(false, true) {
		pk.n, pk.err = pk.c.Conn.Write(pk.tail)
		pk.at = time.Now()
	}
}

// Sent says how worker's first step left the client in the last wave.
func (w *Wire) Sent(worker int) (time.Time, runner.Sending) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.slots[worker]
	return s.at, s.how
}

// hold writes p up to the last byte of its first message, parks the rest
// until the release loop writes it, and returns as a Write of p would. A
// request that comes after the wave's release goes out at once and is
// counted late.
func (w *Wire) hold(c *conn, s *slot, p []byte) (int, error) {
	cut, hidden := w.cut(p)
	if hidden {
		s.state.CompareAndSwap(taken, armed)
		return c.Conn.Write(p)
	}
	head := p[:cut]
	if w.held != nil {
		w.held(s.worker, p)
	}
	if len(head) > 0 {
		if n, err := c.Conn.Write(head); err != nil {
			// Nothing complete went out: the attempt fails on its own.
			w.settle(s, runner.SentNothing, time.Time{})
			return n, err
		}
	}
	// The driver may reuse p once Write returns; it does not return before
	// the tail is written, but the loop writes from its own copy anyway.
	pk := &park{c: c, s: s, tail: append([]byte(nil), p[len(head):]...), wake: make(chan struct{})}
	w.mu.Lock()
	if !w.open {
		w.mu.Unlock()
		n, err := c.Conn.Write(pk.tail)
		w.settle(s, runner.SentLate, time.Now())
		return len(head) + n, err
	}
	w.parked = append(w.parked, pk)
	s.counted = true
	w.pending--
	w.mu.Unlock()
	w.signal()

	t := time.NewTimer(w.parkWait + selfRelease)
	defer t.Stop()
	select {
	case <-pk.wake:
	case <-t.C:
		if pk.once.CompareAndSwap(false, true) {
			pk.n, pk.err = c.Conn.Write(pk.tail)
			w.settle(s, runner.SentLate, time.Now())
			return len(head) + pk.n, pk.err
		}
		<-pk.wake
	}
	return len(head) + pk.n, pk.err
}

// settle records how s's request left, and stops the wave waiting for it.
func (w *Wire) settle(s *slot, how runner.Sending, at time.Time) {
	w.mu.Lock()
	s.how, s.at = how, at
	if !s.counted {
		s.counted = true
		w.pending--
	}
	w.mu.Unlock()
	w.signal()
}

// conn is a connection of the run. Its writes pass through, except the one
// request per wave that its worker's first step writes.
type conn struct {
	net.Conn
	w      *Wire
	dest   string // the network and address dialled
	slot   atomic.Pointer[slot]
	closed atomic.Bool
}

func (c *conn) bind(s *slot) {
	old := c.slot.Swap(s)
	if old == s {
		return
	}
	if c.closed.Load() {
		c.slot.Store(nil)
		return
	}
	s.conns.Add(1)
	if old != nil {
		old.conns.Add(-1)
	}
}

func (c *conn) Write(p []byte) (int, error) {
	if s := c.w.claiming.Load(); s != nil && (c.w.anon == nil || !c.w.anon(p)) {
		// A session's handshake or ping: the connection is that worker's.
		c.bind(s)
	}
	s := c.slot.Load()
	if s == nil || len(p) == 0 || s.state.Load() != armed || !s.state.CompareAndSwap(armed, taken) {
		return c.Conn.Write(p)
	}
	return c.w.hold(c, s, p)
}

func (c *conn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		if s := c.slot.Swap(nil); s != nil {
			s.conns.Add(-1)
		}
		if c.w.occupy != nil {
			c.w.closed()
		}
	}
	return c.Conn.Close()
}
