// Package bench measures how well each release mode exposes a race: on the
// same servers, in one run, with the modes interleaved chunk by chunk so that
// a noisy machine weighs on all of them alike.
//
// Two targets per backend:
//
//   - check-then-write, the shipped scenario with no injected gap, released
//     by the gate and by last-byte through the runner, and by a naive
//     launcher (a goroutine per attempt on a fresh pool with the driver's
//     defaults, no warm-up, no gate) running the same statements;
//   - a calibration target: each attempt is one request that reads the
//     server's clock as the server starts on it (MySQL SELECT NOW(6),
//     PostgreSQL SELECT statement_timestamp(), Redis TIME). It gives each mode's server-side
//     arrival spread, and its resolution: a check-then-write whose write
//     lands W µs after its check is exposed when the second attempt's check
//     arrives less than W after the first's. Applied to the server's own
//     stamps, the window is exact to the microsecond; the narrowest window
//     exposed in at least half of the bursts at N=2 is the mode's resolution.
package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/racetest/racetest/release"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/mysqlstore"
	"github.com/racetest/racetest/scenarios/pgstore"
	"github.com/racetest/racetest/scenarios/redisstore"
	"github.com/racetest/racetest/scenarios/runs"
)

// Modes, in the order the table shows them.
const (
	Naive    = "naive"
	Gate     = string(release.Gate)
	LastByte = string(release.LastByte)
)

// Modes lists the modes the bench compares on every backend; each backend
// adds its user-style launchers (LaunchersOf).
func Modes() []string { return []string{Naive, Gate, LastByte} }

// Backends are the servers bench can measure (see openStore); it measures
// the HTTP targets it serves itself too (HTTPBackends, AllBackends).
var Backends = []string{"redis", "mysql", "postgres"}

// AllBackends are the servers, then the HTTP targets.
func AllBackends() []string { return append(slices.Clone(Backends), HTTPBackends...) }

// Defaults of the default run (3 minutes at load 3-9, 20-30 at load 14-23, on a two-core
// machine).
var (
	DefaultBackends = AllBackends()
	DefaultAttempts = []int{2, 8, 16, 32}
	DefaultWindows  = []time.Duration{2 * time.Microsecond, 5 * time.Microsecond, 10 * time.Microsecond,
		20 * time.Microsecond, 50 * time.Microsecond, 100 * time.Microsecond, 200 * time.Microsecond,
		500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond}
)

// QuickBackends are the backends of the CI check (racetest bench
// --quick): every server, and every HTTP target but http-mysql. One
// database-backed target carries the proxy's figure (2-4 s more, at N=2
// and 20 over 40 bursts, on two loaded cores); a second would add as much
// again, and two checks to the family, for comparisons the first already
// makes.
var QuickBackends = append(slices.Clone(Backends), HTTPSpin, HTTPRedis, HTTPPostgres)

const (
	DefaultBursts = 200
	DefaultChunk  = 20
)

// Config is one bench run.
type Config struct {
	Backends []string
	// Attempts are the Ns measured on the servers, HTTPAttempts those
	// over HTTP (default DefaultHTTPAttempts).
	Attempts     []int
	HTTPAttempts []int
	// HTTPWindow is the http-spin target's window (default
	// DefaultHTTPWindow).
	HTTPWindow time.Duration
	// Bursts of check-then-write, and of the calibration target, per
	// backend, N and mode.
	Bursts int
	// Chunk is how many bursts one mode fires before the next mode's turn.
	Chunk int
	// Windows are the calibration windows the resolution is judged at.
	Windows  []time.Duration
	Conn     scenarios.Connections
	Registry *scenarios.Registry
	// Progress, when set, hears what the bench is doing.
	Progress func(string)
	// Modes, when set, are the modes to compare (a subset of Modes() and
	// of the backends' launchers).
	Modes []string
	// HTTPModes, when set, are the modes of the HTTP backends, whatever
	// Modes says (the quick run's: the default, the user's launcher and
	// the proxy); Proxy only on the database-backed ones.
	HTTPModes []string
	// NoCalibration skips the calibration target: no arrival spreads, no
	// resolution (the quick run).
	NoCalibration bool
	// variants, when set (by the experiment), replace Modes().
	variants []variant
	// TargetExecutable, when set, serves each HTTP target from a process
	// of its own: this program started with TargetEnv set, which must
	// call ServeTargetFromEnv first thing (racetest's main does). Unset,
	// the targets are served in process, on the client's Go runtime.
	TargetExecutable string
	// noWarmUp (tests) skips each cell's warm-up bursts.
	noWarmUp bool
	// inspect, when set (by tests), is called with each HTTP backend's
	// prefix once its cells have run, before its target stops and deletes
	// what it made.
	inspect func(backend, prefix string)
}

// variant is one way of releasing a burst: naive, the gate, or a wire
// release tuned by wire.
type variant struct {
	name string
	// wire, when set, is a last-byte release with these options.
	wire *release.WireOptions
	// warm: the calibration attempt makes one round trip of its own just
	// before its held request.
	warm bool
	// user: a user-style launcher (LaunchersOf), not the runner.
	user bool
}

// modes are the modes measured on backend: the release modes, the naive
// launcher and the backend's user-style launchers.
func (c *Config) modes(backend string) []variant {
	if len(c.variants) > 0 {
		return c.variants
	}
	all := []variant{{name: Naive}, {name: Gate}, {name: LastByte, wire: &release.WireOptions{}}}
	for _, l := range LaunchersOf(backend) {
		all = append(all, variant{name: l.Name, user: true})
	}
	var out []variant
	for _, v := range all {
		if len(c.Modes) == 0 || slices.Contains(c.Modes, v.name) {
			out = append(out, v)
		}
	}
	return out
}

func (c *Config) defaults() {
	if len(c.Backends) == 0 {
		c.Backends = DefaultBackends
	}
	if len(c.Attempts) == 0 {
		c.Attempts = DefaultAttempts
	}
	if c.Bursts <= 0 {
		c.Bursts = DefaultBursts
	}
	if c.Chunk <= 0 {
		c.Chunk = DefaultChunk
	}
	if len(c.Windows) == 0 {
		c.Windows = DefaultWindows
	}
	if len(c.HTTPAttempts) == 0 {
		c.HTTPAttempts = DefaultHTTPAttempts
	}
	if c.HTTPWindow <= 0 {
		c.HTTPWindow = DefaultHTTPWindow
	}
}

func (c *Config) httpAttempts() []int {
	if len(c.HTTPAttempts) == 0 {
		return DefaultHTTPAttempts
	}
	return c.HTTPAttempts
}

// Row is one backend × scenario × N × mode of the table.
type Row struct {
	Backend, Server, Scenario string
	N                         int
	Mode                      string
	Bursts, Exposed           int
	// Spread and Overlap are medians over the bursts, client-side.
	Spread  time.Duration
	Overlap int
	// Arrival is the median server-side arrival spread, measured on the
	// calibration target at the same N; -1 when not measured.
	Arrival time.Duration
	// Wire sums how last-byte's attempts left the client.
	Wire runner.WireCounts
	// Errors counts attempts that failed.
	Errors int
	// Idiom, for a hand-written launcher, says how it fires (the naive
	// launcher's and each user-style launcher's); "" for a release mode.
	Idiom string
	// Met, in the proxy mode, counts the bursts whose requests all met at
	// the proxy's hold point (its account said so); 0 in the others.
	Met int
	// Chose, in auto's row over HTTP, is the mode auto settled on for
	// this target and N (single-packet on an h2c target, last-byte where
	// it falls back); "" in every other row. PickChecks holds auto to it.
	Chose string
	// Chunks are the exposed bursts of each chunk the mode fired, in order
	// (ChunkBursts the chunk's bursts): how much the share moved from one
	// turn to the next, which the check weighs (Report.Checks).
	Chunks, ChunkBursts []int
}

// Share is the exposed share of bursts.
func (r Row) Share() float64 { return share(r.Exposed, r.Bursts) }

func share(k, n int) float64 {
	if n == 0 {
		return 0
	}
	return float64(k) / float64(n)
}

// Resolution is one backend × mode at N=2 on the calibration target.
type Resolution struct {
	Backend, Mode string
	// Exposed and Bursts by window, in Config.Windows order.
	Exposed, Bursts []int
	// Narrowest is the narrowest window exposed in at least half of its
	// bursts; -1 when none was.
	Narrowest time.Duration
	// Gap is the median arrival gap of the two attempts.
	Gap time.Duration
}

// Report is what a bench run found.
type Report struct {
	Config      Config
	Rows        []Row
	Resolutions []Resolution
	Servers     map[string]string
	Elapsed     time.Duration
	// Skipped names backends whose server did not answer, with why.
	Skipped map[string]string
	// CPUs and the load average before and after: a loaded machine delays
	// the servers' own threads, whatever the release.
	CPUs                  int
	LoadBefore, LoadAfter string
	// Prefixes are the namespaces of everything the bench made, by backend:
	// all of it is dropped at the end.
	Prefixes map[string][]string
	// Notes are what a reader needs beside the table: what auto chose on
	// each HTTP target.
	Notes []string
}

func (r *Report) addNote(s string) {
	if !slices.Contains(r.Notes, s) {
		r.Notes = append(r.Notes, s)
	}
}

// Run carries out the bench. A backend whose server does not answer is
// skipped (and named); ctx ends the run between chunks.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	start := time.Now()
	rep := &Report{Config: cfg, Servers: map[string]string{}, Skipped: map[string]string{}, Prefixes: map[string][]string{},
		CPUs: runtime.NumCPU(), LoadBefore: loadAverage()}
	defer func() { rep.LoadAfter = loadAverage() }()
	for _, b := range cfg.Backends {
		run := runBackend
		if IsHTTP(b) {
			run = runHTTPBackend
		}
		if err := run(ctx, &cfg, rep, b); err != nil {
			if ctx.Err() != nil {
				return rep, context.Cause(ctx)
			}
			var skip *skipError
			if errors.As(err, &skip) {
				// Keyed and printed by backend: the store's error names
				// it already ("redis: 127.0.0.1:9 does not answer").
				rep.Skipped[b] = strings.TrimPrefix(skip.Error(), b+": ")
				continue
			}
			return rep, fmt.Errorf("%s: %w", b, err)
		}
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// skipError is a server that could not be reached.
type skipError struct{ err error }

func (e *skipError) Error() string { return e.err.Error() }
func (e *skipError) Unwrap() error { return e.err }

func openStore(ctx context.Context, backend string, conn scenarios.Connections, runID string) (store, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	switch backend {
	case "redis":
		return newRedisStore(cctx, conn.Get(redisstore.Name), runID)
	case "mysql":
		return newMySQLStore(cctx, conn.Get(mysqlstore.Name), runID)
	case "postgres":
		return newPGStore(cctx, conn.Get(pgstore.Name), runID)
	}
	return nil, fmt.Errorf("the bench runs on redis, mysql and postgres, not %q", backend)
}

// benchPrefix names what the bench's own store makes for run id: its
// tables and keys are the run's (racetest_<id>_…), and the run is
// registered as a scenario's is, so that 'racetest clean' can drop what a
// bench killed outright left.
func benchPrefix(runID string) string { return runs.Prefix(runID) + "bench_" }

// cell is one backend × N: its targets, pools and tallies.
type cell struct {
	cfg     *Config
	backend string
	n       int
	st      store
	wire    map[string]*release.Wire // the shipped scenario's wire releases, by mode
	calWire map[string]*release.Wire // the calibration target's
	ctw     map[string]*reused
	cal     map[string]*calTarget
	naive   naivePool
	naiveAt int             // bursts the naive launcher fired so far
	users   map[string]bool // the user-style launchers measured
	rows    map[string]*tally
	calRows map[string]*tally
}

// tally accumulates one mode's bursts.
type tally struct {
	bursts, exposed, errors int
	spreads                 []time.Duration
	overlaps                []int
	wire                    runner.WireCounts
	cal                     []calBurst
	// chunks and chunkBursts: exposed and fired bursts per chunk.
	chunks, chunkBursts []int
	// arrivals are server-side arrival spreads (the HTTP targets').
	arrivals []time.Duration
	// met counts the bursts whose requests all met at a proxy's hold point.
	met int
}

// endChunk closes the chunk that began when the tally had fired bursts0
// bursts, exposed0 of them exposing.
func (t *tally) endChunk(bursts0, exposed0 int) {
	if t.bursts > bursts0 {
		t.chunks = append(t.chunks, t.exposed-exposed0)
		t.chunkBursts = append(t.chunkBursts, t.bursts-bursts0)
	}
}

func runBackend(ctx context.Context, cfg *Config, rep *Report, backend string) error {
	id := scenarios.NewRunID()
	rep.Prefixes[backend] = append(rep.Prefixes[backend], benchPrefix(id))
	st, err := openStore(ctx, backend, cfg.Conn, id)
	var bad *scenarios.ParamError
	if errors.As(err, &bad) {
		return err // a server bench cannot use (a Redis Cluster) is not one that did not answer
	}
	if err != nil {
		return &skipError{err}
	}
	defer st.close()
	if err := st.prepare(ctx); err != nil {
		st.cleanup(context.WithoutCancel(ctx))
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := st.cleanup(cctx); err != nil && cfg.Progress != nil {
			cfg.Progress(err.Error())
		}
	}()
	for _, n := range cfg.Attempts {
		if cfg.Progress != nil {
			cfg.Progress(fmt.Sprintf("%s N=%d", backend, n))
		}
		c := &cell{cfg: cfg, backend: backend, n: n, st: st, rows: map[string]*tally{}, calRows: map[string]*tally{}}
		err := c.run(ctx, rep)
		for _, t := range c.ctw {
			rep.Prefixes[backend] = append(rep.Prefixes[backend], t.prefix)
		}
		c.close(ctx)
		if err != nil {
			return err
		}
		c.report(rep)
	}
	return nil
}

func (c *cell) close(ctx context.Context) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for _, t := range c.ctw {
		t.drop(cctx)
	}
	if c.naive != nil {
		c.naive.close()
	}
}

func (c *cell) run(ctx context.Context, rep *Report) error {
	c.wire, c.calWire = map[string]*release.Wire{}, map[string]*release.Wire{}
	c.ctw = map[string]*reused{}
	c.cal = map[string]*calTarget{}
	c.users = map[string]bool{}
	var modes []string
	for _, v := range c.cfg.modes(c.backend) {
		modes = append(modes, v.name)
		if v.user {
			c.cal[v.name] = &calTarget{st: c.st}
			c.users[v.name] = true
			continue
		}
		var dial, calDial dialFunc
		if v.wire != nil {
			c.wire[v.name] = release.NewWireWith(c.backend, *v.wire)
			c.calWire[v.name] = release.NewWireWith(c.backend, *v.wire)
			dial, calDial = c.wire[v.name].Dial, c.calWire[v.name].Dial
		}
		c.cal[v.name] = &calTarget{st: c.st, dial: calDial, warm: v.warm}
		if v.name == Naive {
			continue
		}
		p := scenarios.Params{RunID: scenarios.NewRunID(), Attempts: c.n, Replicas: 1, Conn: c.cfg.Conn, Dial: dial}
		t, err := c.cfg.Registry.Build(ctx, scenarios.CheckThenWrite, c.backend, p)
		if err != nil {
			return &skipError{err}
		}
		c.ctw[v.name] = &reused{Target: t, prefix: p.Prefix()}
	}
	var err error
	if c.naive, err = c.st.naive(ctx); err != nil {
		return err
	}
	for _, m := range modes {
		c.rows[m], c.calRows[m] = &tally{}, &tally{}
	}
	// The warm-up (see httpCell.warmUp): each mode's first bursts at this
	// N, fired and forgotten.
	for _, i := range turnOrder(len(modes), 0) {
		mode := modes[i]
		if warmUpBursts(c.cfg) == 0 {
			break
		}
		if err := c.checkThenWrite(ctx, mode, warmUpBursts(c.cfg), rep); err != nil {
			return fmt.Errorf("warm-up, N=%d, %s: %w", c.n, mode, err)
		}
		c.rows[mode] = &tally{}
	}
	rounds := (c.cfg.Bursts + c.cfg.Chunk - 1) / c.cfg.Chunk
	for r := range rounds {
		chunk := min(c.cfg.Chunk, c.cfg.Bursts-r*c.cfg.Chunk)
		for _, i := range turnOrder(len(modes), r) {
			mode := modes[i]
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			if err := c.checkThenWrite(ctx, mode, chunk, rep); err != nil {
				return fmt.Errorf("check-then-write, N=%d, %s: %w", c.n, mode, err)
			}
			if c.cfg.NoCalibration {
				continue
			}
			if err := c.calibrate(ctx, mode, chunk); err != nil {
				return fmt.Errorf("calibration target, N=%d, %s: %w", c.n, mode, err)
			}
		}
	}
	return nil
}

func (c *cell) checkThenWrite(ctx context.Context, mode string, bursts int, rep *Report) error {
	t := c.rows[mode]
	defer t.endChunk(t.bursts, t.exposed)
	fire, u, err := c.launcher(ctx, mode)
	if err != nil {
		return err
	}
	if fire != nil {
		defer u.close()
		for range bursts {
			token := fmt.Sprintf("%s-%d-%d", mode, c.n, c.naiveAt)
			c.naiveAt++
			spread, overlap, errs := fire(ctx, c.n, func(ctx context.Context, worker int) error {
				return u.checkThenWrite(ctx, token, worker)
			})
			effects, err := c.st.effects(ctx, token)
			if err != nil {
				return err
			}
			t.add(effects > 1, spread, overlap, errs)
		}
		return nil
	}
	tg := c.ctw[mode]
	opts := []runner.Option{runner.Attempts(c.n), runner.Bursts(bursts), runner.Keep(true)}
	if w := c.wire[mode]; w != nil {
		opts = append(opts, runner.Release(w))
	}
	res, err := runner.Run(ctx, tg, opts...)
	tg.offset += len(res.Bursts)
	if err != nil {
		return err
	}
	rep.Servers[c.backend] = res.Server
	for _, b := range res.Bursts {
		t.add(b.Violated(), b.Spread, b.Overlap, b.Outcomes[runner.Error]+b.Outcomes[runner.Unknown])
		t.wire.Held += b.Wire.Held
		t.wire.Late += b.Wire.Late
		t.wire.Silent += b.Wire.Silent
	}
	return nil
}

// burstFunc fires one burst of n attempts the way a launcher does.
type burstFunc func(ctx context.Context, n int, attempt func(ctx context.Context, worker int) error) (spread time.Duration, overlap int, errs int)

// launcher is mode's own launcher when it fires its bursts itself (a
// user-style one, or the naive one): how it fires, and its connections,
// which the caller closes; nil for a mode the runner fires.
func (c *cell) launcher(ctx context.Context, mode string) (burstFunc, userPool, error) {
	switch {
	case c.users[mode]:
		u, err := c.openUser(ctx, mode)
		if err != nil {
			return nil, nil, err
		}
		return userBurst, u, nil
	case mode == Naive:
		return naiveBurst, naiveLauncher{c.naive}, nil
	}
	return nil, nil, nil
}

// naiveLauncher is the naive launcher's pool as a userPool: its
// connections are the cell's, kept for the whole run, so close does
// nothing.
type naiveLauncher struct{ p naivePool }

func (n naiveLauncher) checkThenWrite(ctx context.Context, token string, worker int) error {
	return n.p.checkThenWrite(ctx, token, worker)
}
func (n naiveLauncher) arrive(ctx context.Context, _ int) (int64, error) { return n.p.arrive(ctx) }
func (naiveLauncher) close()                                             {}

// openUser opens a user-style launcher's connections for one chunk, as
// the runner opens its workers' for each run: a cell's launchers do not
// hold N connections each all along (N=32 on PostgreSQL would hold a
// hundred of the server's max_connections).
func (c *cell) openUser(ctx context.Context, mode string) (userPool, error) {
	u, err := c.st.user(ctx, mode, c.n)
	if err != nil {
		return nil, fmt.Errorf("opening its %d connections: %w", c.n, err)
	}
	return u, nil
}

func (c *cell) calibrate(ctx context.Context, mode string, bursts int) error {
	t := c.calRows[mode]
	ct := c.cal[mode]
	fire, u, err := c.launcher(ctx, mode)
	if err != nil {
		return err
	}
	if fire != nil {
		defer u.close()
		for range bursts {
			ct.Reset(ctx, 0)
			spread, overlap, errs := fire(ctx, c.n, func(ctx context.Context, worker int) error {
				at, err := u.arrive(ctx, worker)
				if err == nil {
					ct.stamp(at)
				}
				return err
			})
			ct.seen = ct.seen[:0]
			ct.Effects(ctx, runner.Subject{})
			t.add(false, spread, overlap, errs)
			t.cal = append(t.cal, ct.seen...)
		}
		return nil
	}
	opts := []runner.Option{runner.Attempts(c.n), runner.Bursts(bursts), runner.Keep(true)}
	if w := c.calWire[mode]; w != nil {
		opts = append(opts, runner.Release(w))
	}
	ct.seen = ct.seen[:0]
	res, err := runner.Run(ctx, ct, opts...)
	if err != nil {
		return err
	}
	for _, b := range res.Bursts {
		t.add(b.Violated(), b.Spread, b.Overlap, b.Outcomes[runner.Error]+b.Outcomes[runner.Unknown])
		t.wire.Held += b.Wire.Held
		t.wire.Late += b.Wire.Late
		t.wire.Silent += b.Wire.Silent
	}
	t.cal = append(t.cal, ct.seen...)
	return nil
}

func (t *tally) add(exposed bool, spread time.Duration, overlap, errs int) {
	t.bursts++
	if exposed {
		t.exposed++
	}
	t.spreads = append(t.spreads, spread)
	t.overlaps = append(t.overlaps, overlap)
	t.errors += errs
}

// arrival is the median server-side spread of the bursts in which every
// attempt arrived.
func (t *tally) arrival(n int) time.Duration {
	var xs []time.Duration
	for _, b := range t.cal {
		if len(b) == n {
			xs = append(xs, b.spread())
		}
	}
	if len(xs) == 0 {
		return -1
	}
	return median(xs)
}

func (c *cell) report(rep *Report) {
	var modes []string
	for _, v := range c.cfg.modes(c.backend) {
		modes = append(modes, v.name)
	}
	for _, m := range modes {
		t := c.rows[m]
		rep.Rows = append(rep.Rows, Row{Idiom: idiomOf(c.backend, m),
			Backend: c.backend, Server: rep.Servers[c.backend], Scenario: scenarios.CheckThenWrite, N: c.n, Mode: m,
			Bursts: t.bursts, Exposed: t.exposed, Spread: median(t.spreads), Overlap: median(t.overlaps),
			Arrival: c.calRows[m].arrival(c.n), Wire: t.wire, Errors: t.errors,
			Chunks: t.chunks, ChunkBursts: t.chunkBursts,
		})
	}
	if c.n != 2 || c.cfg.NoCalibration {
		return
	}
	for _, m := range modes {
		t := c.calRows[m]
		res := Resolution{Backend: c.backend, Mode: m, Narrowest: -1, Gap: t.arrival(2),
			Exposed: make([]int, len(c.cfg.Windows)), Bursts: make([]int, len(c.cfg.Windows))}
		for _, b := range t.cal {
			if len(b) != 2 {
				continue // an attempt failed: no pair to judge
			}
			for i, w := range c.cfg.Windows {
				res.Bursts[i]++
				if b.executed(w) > 1 {
					res.Exposed[i]++
				}
			}
		}
		for i, w := range c.cfg.Windows {
			if res.Bursts[i] > 0 && 2*res.Exposed[i] >= res.Bursts[i] {
				res.Narrowest = w
				break
			}
		}
		rep.Resolutions = append(rep.Resolutions, res)
	}
}

// warmUpBursts is how many bursts each mode fires, uncounted, before a
// cell's first round: a chunk's worth, at most 5 (none when a test asks
// for none, to match the store's counts with the report's).
func warmUpBursts(cfg *Config) int {
	if cfg.noWarmUp {
		return 0
	}
	return min(cfg.Chunk, 5)
}

// turnOrder is the order in which k modes take their turns in round r:
// the rows of a Williams design, so that over k rounds (2k when k is odd)
// each mode follows every other mode equally often within a round.
//
// Rotating one order (round r starting at mode r) kept each mode's
// predecessor: over HTTP auto always came right after user-http or naive,
// the two modes that open a fresh connection per request (64 per burst at
// N=64, 62 of them closed after it), and took the teardown of theirs in the
// server process on its first bursts, while single-packet, the same
// release, always came after last-byte or barrier.
func turnOrder(k, r int) []int {
	// Row 0: 0, 1, k-1, 2, k-2, …; row r adds r (mod k).
	base := make([]int, 0, k)
	for j, lo, hi := 0, 0, k; j < k; j++ {
		if j%2 == 0 {
			base = append(base, lo)
			lo++
		} else {
			hi--
			base = append(base, hi)
		}
	}
	out := make([]int, k)
	for j, m := range base {
		out[j] = (m + r) % k
	}
	if k%2 == 1 && (r/k)%2 == 1 {
		// k odd: a row and its mirror together balance the pairs.
		slices.Reverse(out)
	}
	return out
}

// loadAverage is the 1-minute load average, or "" where /proc/loadavg is
// not there.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// NaiveIdiom is how the naive launcher fires.
const NaiveIdiom = "a goroutine per attempt started one after another, no gate, on a fresh pool " +
	"(connections opened on demand, two kept idle); the scenario's statements sent the scenario's way"

// idiomOf is mode's Idiom on backend: "" for a release mode.
func idiomOf(backend, mode string) string {
	if mode == Naive {
		return NaiveIdiom
	}
	for _, l := range LaunchersOf(backend) {
		if l.Name == mode {
			return l.Idiom
		}
	}
	return ""
}
