package cmd

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/racetest/racetest/release/bench"
	"github.com/racetest/racetest/scenarios"
	"github.com/spf13/cobra"
)

// benchOptions are the parsed flags of 'racetest bench'.
type benchOptions struct {
	*factory
	Config   bench.Config
	Backends []string
	Windows  []time.Duration
	Quick    bool
	Modes    []string
	// AttemptsSet: -n was given, and holds for every backend; else the
	// servers and HTTP take their own defaults.
	AttemptsSet bool
	// BackendsSet: --backends was given; else --quick measures
	// bench.QuickBackends.
	BackendsSet bool
}

// newCmdBench builds 'racetest bench': the release modes compared on the
// same servers, the detection table and the resolution.
func newCmdBench(f *factory, runF func(context.Context, *benchOptions) error) *cobra.Command {
	opts := &benchOptions{factory: f}
	c := &cobra.Command{
		Use:   "bench",
		Short: "Compare release modes with hand-written launchers on real servers and HTTP targets: races exposed and resolution",
		Long: `bench measures how well each way of releasing a burst exposes a race, on the same servers in
one run, with the modes interleaved chunk by chunk so that a noisy machine weighs on them alike:

  naive      a goroutine per attempt on a fresh pool, no warm-up, no gate (the same statements, sent the same way)
  gate       a pre-dialled connection per worker, one gate
  last-byte  racetest's default on these servers (--release auto): each attempt's first request
             held back by its last byte, all released in one loop
  user-pgx   (postgres) a fan-out as a user writes it with pgx: a connection per goroutine,
             conn.Begin in its own round trip, then SELECT and INSERT, all started by closing a channel
  user-sql   (postgres, mysql) the same with database/sql (pgx's stdlib, go-sql-driver), N idle connections
  user-redis (redis) the same with one go-redis client and its ordinary calls (Exists, then RPush)

Over HTTP (--backends http, or http-spin, http-redis, http-postgres, http-mysql), on check-then-write
endpoints bench serves itself over HTTP/1.1 and h2c, each from a process of its own (racetest started
again, as a service is never inside its tester): http-spin checks a flag in memory and spins 100µs
before writing it, http-redis runs EXISTS then RPUSH on the local Redis (keys under its own prefix,
deleted after), http-postgres and http-mysql run SELECT count(*) then INSERT through database/sql on
the local PostgreSQL and MySQL/MariaDB (a racetest_<id>_ table, dropped after).
Every release mode of 'racetest http' fires there as that command fires it: auto (the default:
single-packet, since the targets speak h2c), barrier, last-byte, single-packet, naive; beside them

  user-http  a fan-out as a user writes it: one net/http.Client on the default transport, a goroutine
             per request, all started by closing a channel
  proxy      (http-postgres, http-mysql) auto's release at the same endpoint on a second pool of the
             service whose database URL is a racetest proxy, which bench starts in its own process:
             the proxy holds each request's INSERT until both have reached it ('racetest http --proxy')

at N=2, 20 and 64 (unless --attempts says otherwise; the database-backed targets stop at 32, the
connections of their pools).

The output lists each hand-written launcher with its idiom.

It prints check-then-write (no injected gap) on each backend and N, with the client-side release
spread, the overlap, the server-side arrival spread and the share of bursts that exposed the race;
then the resolution: on a calibration target whose window is set in µs of the server's clock, the
narrowest window each mode exposes in at least half of the bursts at N=2. It creates and drops
its own racetest_<id>_ tables and keys. The default run, HTTP included, took 3 minutes on two shared cores at load 3-9 (20-30 at load 14-23).

It exits 3 when a compared mode exposed no race while half or more of its attempts failed (NOT JUDGED: nothing was
measured), and 1 when the default release (last-byte on these servers, auto over HTTP) exposes the race
in fewer bursts than any hand-written launcher (naive, user-*), or over HTTP than any other release
mode, beyond the noise: a one-sided permutation test on the chunks (the modes take turns chunk by
chunk, each following every other equally often, after a few uncounted warm-up bursts of each, so
load that hits one chunk is noise, not a loss) at 95% over the whole family of backend × N × rival
comparisons (Bonferroni). Over HTTP auto is also held to the mode it picks (single-packet on these
h2c targets) by the same test at 99% for that family: auto must be that mode, and were it so a run
would fail there in under 1 in 100. The proxy is in neither family: it changes when the service's
statements run rather than how the requests are fired, so it exposes the race by construction; its
share is printed with its 95% lower bound among the reference figures, which are printed, not
checked (they move with the load of a shared machine).
--quick runs only the checks against the naive launcher (over HTTP: auto against user-http and
single-packet, and the proxy's figure on http-postgres; http-mysql only when --backends names it),
fit for CI; --modes picks the modes of a run.`,
		Example: `  racetest bench
  racetest bench --backends redis --attempts 2,16 --bursts 200
  racetest bench --quick
  racetest bench --backends http --bursts 400
  racetest bench --backends postgres --attempts 2 --modes last-byte,user-pgx --bursts 400
  racetest bench --backends http-postgres --attempts 2 --modes proxy,single-packet,auto --bursts 400`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts.AttemptsSet = c.Flags().Changed("attempts")
			opts.BackendsSet = c.Flags().Changed("backends")
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runBench(c.Context(), opts)
		},
	}
	fs := c.Flags()
	cfg := &opts.Config
	fs.StringSliceVar(&opts.Backends, "backends", bench.DefaultBackends, "backends to measure: "+strings.Join(bench.AllBackends(), ", ")+" (http: every HTTP target)")
	fs.IntSliceVarP(&cfg.Attempts, "attempts", "n", bench.DefaultAttempts, "attempts per burst (N) to measure")
	fs.IntVar(&cfg.Bursts, "bursts", bench.DefaultBursts, "check-then-write bursts per backend, N and mode")
	fs.IntVar(&cfg.Chunk, "chunk", bench.DefaultChunk, "bursts one mode fires before the next mode's turn")
	fs.DurationSliceVar(&opts.Windows, "windows", bench.DefaultWindows, "calibration windows (server-side, set in µs)")
	fs.StringSliceVar(&opts.Modes, "modes", nil, "modes to compare (default: all): "+strings.Join(bench.AllModes(), ", ")+
		"; the check needs "+bench.DefaultMode+" and a launcher")
	fs.BoolVar(&opts.Quick, "quick", false, "the CI check: the default release against the naive launcher only (over HTTP: auto against user-http and single-packet, its pick, and the proxy beside them on http-postgres; http-mysql only when --backends names it), 40 bursts each, no calibration; exits 1 when the default loses, 3 when a mode measured nothing (half or more of its attempts failed)")
	// The servers bench measures, connected as every command connects them.
	onlyBench := scenarios.NewRegistry()
	for _, b := range f.Registry.Backends() {
		if slices.Contains(bench.Backends, b.Name) {
			b.ReadConn = nil // bench measures one server, never a replica
			onlyBench.AddBackend(b)
		}
	}
	registerConn(fs, onlyBench, &cfg.Conn)
	return c
}

func runBench(ctx context.Context, o *benchOptions) error {
	cfg := o.Config
	cfg.Registry = o.Registry
	cfg.TargetExecutable = o.Executable
	cfg.Windows = o.Windows
	backends, err := benchBackends(o.Backends)
	if err != nil {
		return err
	}
	cfg.Backends = backends
	if !o.AttemptsSet {
		cfg.Attempts, cfg.HTTPAttempts = bench.DefaultAttempts, bench.DefaultHTTPAttempts
	} else {
		cfg.HTTPAttempts = cfg.Attempts
	}
	for _, m := range o.Modes {
		m = strings.TrimSpace(m)
		if !slices.Contains(bench.AllModes(), m) {
			return usageErrorf("--modes: no mode %q (known: %s)", m, strings.Join(bench.AllModes(), ", "))
		}
		cfg.Modes = append(cfg.Modes, m)
	}
	if o.Quick && len(o.Modes) > 0 {
		return usageErrorf("--quick compares its own modes (naive and %s; over HTTP %s, %s and %s); drop --modes or --quick", bench.DefaultMode, bench.Auto, bench.UserHTTP, bench.SinglePacket)
	}
	for _, n := range cfg.Attempts {
		if n < 2 {
			return usageErrorf("--attempts: a race needs at least 2 attempts (got %d)", n)
		}
	}
	if err := checkAtLeastOne(intFlag{"bursts", cfg.Bursts}, intFlag{"chunk", cfg.Chunk}); err != nil {
		return err
	}
	for _, w := range cfg.Windows {
		if w <= 0 {
			return usageErrorf("--windows must be positive (got %s)", w)
		}
	}
	if o.Quick {
		// The CI check: the default against the naive launcher only, on
		// check-then-write, no calibration.
		// Chunks of 5: eight turns each, so that a passing disturbance
		// (another job on the server) weighs on both modes.
		cfg.Bursts, cfg.Chunk = quickBursts, 5
		cfg.Modes = []string{bench.Naive, bench.DefaultMode}
		// Over HTTP: the default against the user's net/http fan-out and
		// against single-packet, the mode auto picks on these targets, at
		// 2, 20 and 64 (a few seconds in all); on http-postgres the proxy
		// beside them, a figure the check does not judge.
		cfg.HTTPModes = []string{bench.Auto, bench.UserHTTP, bench.SinglePacket, bench.Proxy}
		cfg.NoCalibration = true
		if !o.BackendsSet {
			cfg.Backends = bench.QuickBackends
		}
	}
	cfg.Progress = func(s string) { fmt.Fprintln(o.IO.ErrOut, "bench: "+s) }
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return context.Canceled
		}
		var bad *scenarios.ParamError
		if errors.As(err, &bad) {
			return usageError(err)
		}
		return setupError(err)
	}
	if len(rep.Rows) == 0 {
		var why strings.Builder
		for _, b := range slices.Sorted(maps.Keys(rep.Skipped)) {
			fmt.Fprintf(&why, "\n  %s: %s", b, rep.Skipped[b])
		}
		return setupError(fmt.Errorf("no server answered, nothing was measured:%s", why.String()))
	}
	rep.Print(o.IO.Out)
	return benchVerdict(rep)
}

// benchBackends are the backends named, "http" standing for every HTTP
// target, each once.
func benchBackends(names []string) ([]string, error) {
	var out []string
	for _, b := range names {
		b = strings.TrimSpace(b)
		expanded := []string{b}
		if b == "http" {
			expanded = bench.HTTPBackends
		} else if !slices.Contains(bench.AllBackends(), b) {
			return nil, usageErrorf("bench runs on %s (http: every HTTP target); not %q", strings.Join(bench.AllBackends(), ", "), b)
		}
		for _, name := range expanded {
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out, nil
}

// benchVerdict is bench's exit: 3 (setup) when a comparison measured
// nothing (a mode's attempts failed and exposed no race: two such rows at
// 0% would read as a pass), 1 when the default release lost to a rival
// (Report.Checks) beyond the noise.
func benchVerdict(rep *bench.Report) error {
	for _, c := range rep.Checks() {
		if c.Unjudged {
			return setupError(fmt.Errorf("bench: %s N=%d measured nothing: a mode's attempts failed and exposed no race (see NOT JUDGED and ERRORS above)", c.Backend, c.N))
		}
	}
	if rep.PickFailed() {
		var lost []string
		for _, c := range rep.PickChecks() {
			if c.Lost {
				lost = append(lost, fmt.Sprintf("%s N=%d (p = %.2g < %.2g)", c.Backend, c.N, c.P, c.Alpha))
			}
		}
		return &exitError{code: exitViolated, err: fmt.Errorf("bench: auto exposed fewer races than the mode it picks, beyond the noise, at %s: auto must be that mode (see the check above)", strings.Join(lost, ", "))}
	}
	if rep.Failed() {
		return &exitError{code: exitViolated, err: errors.New("bench: the default release exposed fewer races than a hand-written launcher or, over HTTP, another release mode, beyond the noise (see the check above)")}
	}
	return nil
}

// quickBursts is --quick's bursts per backend, N and mode.
const quickBursts = 40
