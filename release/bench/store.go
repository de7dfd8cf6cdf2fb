package bench

import (
	"context"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/racetest/racetest/runner"
)

// dialFunc is scenarios.DialFunc; nil dials with the driver's own dialer.
type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// store is one server's part of the benchmark: the naive launcher's
// check-then-write table (under the run's prefix), and the pools of the
// calibration target and of the naive launcher.
type store interface {
	// prepare creates the naive launcher's table.
	prepare(ctx context.Context) error
	// open is one replica's pool for the calibration target, dialling
	// through dial; each session holds one connection of it.
	open(ctx context.Context, dial dialFunc, workers int) (calApp, error)
	// naive opens a fresh pool, as a hand-written race test would, that
	// sends the scenario's statements the scenario's way: the bench
	// compares launchers on one target, not two clients.
	naive(ctx context.Context) (naivePool, error)
	// user opens the user-style launcher name (one of LaunchersOf) for n
	// workers: its connections opened and warmed, as a hand-written test
	// opens them before it fires.
	user(ctx context.Context, name string, n int) (userPool, error)
	// effects counts the naive check-then-write's rows for token.
	effects(ctx context.Context, token string) (int, error)
	cleanup(ctx context.Context) error
	close()
}

type calApp interface {
	session(ctx context.Context) (calSession, error)
	close()
}

// calSession is one worker's connection to the calibration target.
type calSession interface {
	// arrive is the calibration attempt: one request that reads the server's
	// clock when the server starts on it, in µs since the epoch.
	arrive(ctx context.Context) (int64, error)
	close()
}

// naivePool is a default pool, shared by a naive launcher's goroutines.
type naivePool interface {
	// checkThenWrite runs the scenario's statements: read token, and if
	// absent, write it.
	checkThenWrite(ctx context.Context, token string, worker int) error
	arrive(ctx context.Context) (int64, error)
	close()
}

// calTarget is the calibration target as the runner drives it: each attempt
// reads the server's clock as the server starts on it.
type calTarget struct {
	st   store
	dial dialFunc
	warm bool // a round trip of its own just before the held request
	mu   sync.Mutex
	cur  calBurst
	// seen collects each burst's arrival stamps.
	seen []calBurst
}

func (t *calTarget) stamp(at int64) {
	t.mu.Lock()
	t.cur = append(t.cur, at)
	t.mu.Unlock()
}

// calBurst is one burst's arrivals, in µs of the server's clock, sorted.
type calBurst []int64

// spread is first to last arrival.
func (b calBurst) spread() time.Duration {
	if len(b) == 0 {
		return 0
	}
	return time.Duration(b[len(b)-1]-b[0]) * time.Microsecond
}

// executed is how many attempts of a check-then-write whose write lands
// window after its check would have executed: the first, and every attempt
// whose check arrived before the first one's write. The window is applied to
// the server's own stamps, so it is exact to the microsecond.
func (b calBurst) executed(window time.Duration) int {
	if len(b) == 0 {
		return 0
	}
	n := 1
	for _, t := range b[1:] {
		if time.Duration(t-b[0])*time.Microsecond < window {
			n++
		}
	}
	return n
}

func (t *calTarget) Prepare(context.Context) error { return nil }
func (t *calTarget) Cleanup(context.Context) error { return nil }

func (t *calTarget) Reset(_ context.Context, burst int) (runner.Subject, error) {
	t.mu.Lock()
	t.cur = nil
	t.mu.Unlock()
	return runner.Subject{Burst: burst}, nil
}

// Effects records the burst's stamps; the count it returns is the arrivals,
// which the bench does not judge as effects.
func (t *calTarget) Effects(context.Context, runner.Subject) (int, error) {
	t.mu.Lock()
	b := t.cur
	t.cur = nil
	t.mu.Unlock()
	sort.Slice(b, func(i, j int) bool { return b[i] < b[j] })
	t.seen = append(t.seen, b)
	return len(b), nil
}

func (t *calTarget) Open(ctx context.Context, _ int, workers int) (runner.App, error) {
	a, err := t.st.open(ctx, t.dial, workers)
	if err != nil {
		return nil, err
	}
	return calRunnerApp{a, t}, nil
}

type calRunnerApp struct {
	a calApp
	t *calTarget
}

func (a calRunnerApp) Session(ctx context.Context, _ int) (runner.Session, error) {
	s, err := a.a.session(ctx)
	if err != nil {
		return nil, err
	}
	return calRunnerSession{s, a.t}, nil
}

func (a calRunnerApp) Close() error { a.a.close(); return nil }

type calRunnerSession struct {
	s calSession
	t *calTarget
}

func (s calRunnerSession) Attempt(ctx context.Context, _ runner.Subject, w *runner.Worker) runner.Outcome {
	if s.t.warm {
		if _, err := s.s.arrive(ctx); err != nil {
			return runner.Failed(err)
		}
	}
	w.Mark("check")
	at, err := s.s.arrive(ctx)
	if err != nil {
		return runner.Failed(err)
	}
	s.t.stamp(at)
	return runner.Done()
}

func (s calRunnerSession) Close() error { s.s.close(); return nil }

// reused lets one shipped scenario target serve every chunk of a cell:
// prepared once, its subjects numbered on from chunk to chunk, dropped by the
// bench at the end.
type reused struct {
	runner.Target
	prefix   string
	prepared bool
	offset   int
}

func (r *reused) Prepare(ctx context.Context) error {
	if r.prepared {
		return nil
	}
	if err := r.Target.Prepare(ctx); err != nil {
		return err
	}
	r.prepared = true
	return nil
}

func (r *reused) Reset(ctx context.Context, burst int) (runner.Subject, error) {
	return r.Target.Reset(ctx, r.offset+burst)
}

func (r *reused) Cleanup(context.Context) error { return nil }

// Server and Notes pass the scenario's own through.
func (r *reused) Server() string {
	if d, ok := r.Target.(runner.Describer); ok {
		return d.Server()
	}
	return ""
}

func (r *reused) Notes() []string {
	if n, ok := r.Target.(runner.Noter); ok {
		return n.Notes()
	}
	return nil
}

// Hold passes a database proxy's account of a burst through (the proxy
// mode's target is a Holder): the proxy mode's row counts the bursts whose
// requests met at its hold point.
func (r *reused) Hold(s runner.Subject) *runner.Hold {
	if h, ok := r.Target.(runner.Holder); ok {
		return h.Hold(s)
	}
	return nil
}

// drop cleans up what Prepare made, once, at the end of the bench.
func (r *reused) drop(ctx context.Context) error {
	var err error
	if r.prepared {
		err = r.Target.Cleanup(ctx)
	}
	if c, ok := r.Target.(runner.Closer); ok {
		c.Close()
	}
	return err
}
