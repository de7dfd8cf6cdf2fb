package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/serve"
	"github.com/spf13/cobra"
)

// serveOptions are the parsed flags of 'racetest serve'.
type serveOptions struct {
	*factory
	Scenario string
	Backend  string
	Addr     string
	Workers  int
	Timeout  time.Duration
	Shape    shapeFlags
	// Set by 'racetest run --processes' for the replicas it starts.
	RunID    string
	Attached bool
	Replica  int
	Replicas int
}

// newCmdServe builds 'racetest serve': one replica of the application as an
// HTTP server. Tests pass runF to capture the options.
func newCmdServe(f *factory, runF func(context.Context, *serveOptions) error) *cobra.Command {
	opts := &serveOptions{factory: f}
	c := &cobra.Command{
		Use:   "serve SCENARIO",
		Short: "Serve a scenario over HTTP: each POST /attempt is one attempt (the API server of the incident stories)",
		Long: `serve runs one replica of the application under test as a small HTTP API: every
POST /attempt performs the scenario's attempt once and answers 200 (executed), 409
(declined), 503 (conflict), 500 (error) or 504 (unknown), with the outcome as JSON and
the instant the request arrived in the X-Racetest-Arrival header. GET /effects counts
what really happened, GET /arrivals lists when each attempt arrived. It speaks HTTP/1.1
and HTTP/2 over cleartext (h2c), and stops cleanly on SIGTERM or Ctrl-C, dropping the
tables or keys it made.`,
		Example: `  racetest serve check-then-write --addr 127.0.0.1:8080
  racetest http POST 'http://127.0.0.1:8080/attempt?key={{.Token}}' \
      --effects 'http:http://127.0.0.1:8080/effects?key={{.Token}}' -n 16 --release last-byte
  racetest serve conditional-update --backend postgres --addr :9000`,
		Args:              oneScenario("serve"),
		ValidArgsFunction: completeScenario(f.Registry),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Scenario = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runServe(c.Context(), opts)
		},
	}
	fs := c.Flags()
	fs.StringVarP(&opts.Backend, "backend", "b", "memory", backendHelp(f.Registry))
	fs.StringVar(&opts.Addr, "addr", "127.0.0.1:8080", "address to listen on (HOST:PORT; port 0 picks a free one)")
	fs.IntVar(&opts.Workers, "workers", runner.DefaultAttempts, "store connections to open up front (more open when more attempts arrive at once)")
	fs.DurationVar(&opts.Timeout, "timeout", runner.DefaultTimeout, "per-attempt timeout; an attempt past it answers 504 (unknown)")
	opts.Shape.register(fs, f.Registry, verbShape{fires: servesScenario})
	fs.StringVar(&opts.RunID, "run-id", "", "run id that names the store's objects (set by 'run --processes')")
	fs.BoolVar(&opts.Attached, "attached", false, "started by 'run --processes': the parent owns the store and the subjects; stop when stdin closes")
	fs.IntVar(&opts.Replica, "replica", 0, "this replica's number")
	fs.IntVar(&opts.Replicas, "replicas", 1, "replicas in the run")
	for _, name := range []string{"run-id", "attached", "replica", "replicas"} {
		fs.MarkHidden(name)
	}
	completeEnums(c, f.Registry)
	return c
}

func runServe(ctx context.Context, o *serveOptions) error {
	if _, err := o.Registry.Factory(o.Scenario, o.Backend); err != nil {
		return usageError(err)
	}
	if o.Workers < 1 {
		return usageErrorf("--workers must be at least 1 (got %d)", o.Workers)
	}
	// A malformed address is the user's to fix (exit 2); one that is
	// well formed but taken or not ours is the machine's (exit 3, below).
	if _, port, err := net.SplitHostPort(o.Addr); err != nil {
		return usageErrorf("--addr %q is not HOST:PORT (%v): write it as 127.0.0.1:8080, or :0 for a free port", o.Addr, err)
	} else if _, err := net.LookupPort("tcp", port); err != nil {
		return usageErrorf("--addr %q: %q is not a port (%v): write it as 127.0.0.1:8080, or :0 for a free port", o.Addr, port, err)
	}
	if err := checkDurations(durationFlag{"gap", o.Shape.Gap}, durationFlag{"latency", o.Shape.Latency}, durationFlag{"ttl", o.Shape.TTL}, durationFlag{"timeout", o.Timeout}); err != nil {
		return err
	}
	sh := o.Shape
	sh.Attempts = o.Workers
	p := sh.params(max(o.Replicas, 1))
	if o.RunID != "" {
		p.RunID = o.RunID
	}
	if err := p.Validate(); err != nil {
		return usageError(err)
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return setupError(fmt.Errorf("cannot listen on %s: %w — is another server on that port? choose one with --addr", o.Addr, err))
	}
	defer ln.Close()
	target, err := o.Registry.Build(ctx, o.Scenario, o.Backend, p)
	if err != nil {
		return setupError(err)
	}
	name := o.Scenario + " on " + o.Backend
	srv, err := serve.New(ctx, serve.Options{Target: target, Name: name, Replica: o.Replica, Workers: o.Workers, Attached: o.Attached, Timeout: o.Timeout})
	if err != nil {
		return setupError(fmt.Errorf("%s: %w", name, err))
	}
	// The first line says where: 'run --processes' reads it.
	fmt.Fprintf(o.IO.Out, "listening on http://%s\n", ln.Addr())
	if !o.Attached {
		printServeHelp(o.IO.Out, name, ln.Addr().String(), p, o.Workers)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: time.Minute}
	hs.Protocols = new(http.Protocols)
	hs.Protocols.SetHTTP1(true)
	hs.Protocols.SetUnencryptedHTTP2(true)
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	orphaned := make(chan struct{})
	if o.Attached {
		// The parent holds our stdin: when it closes, the parent is gone.
		go func() { io.Copy(io.Discard, o.IO.In); close(orphaned) }()
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case <-orphaned:
	case serveErr = <-served:
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	hs.Shutdown(sctx)
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer ccancel()
	if err := srv.Close(cctx); err != nil {
		fmt.Fprintf(o.IO.ErrOut, "racetest serve: cleanup failed, drop the run's objects (%s*) by hand: %v\n", p.Prefix(), err)
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return setupError(fmt.Errorf("serving on %s: %w", ln.Addr(), serveErr))
	}
	// A stop asked for (SIGTERM, Ctrl-C) is this command's normal end.
	return nil
}

// printServeHelp says what the server serves, and the http command to
// try: with as many attempts as it opened connections for (--workers),
// since more at once wait for connections of their own.
func printServeHelp(w io.Writer, name, addr string, p scenarios.Params, workers int) {
	fmt.Fprintf(w, `racetest serve: %s (pid %d); the store's objects are named %s*
  POST /attempt?key=K     one attempt at subject K: 200 executed, 409 declined, 5xx error
  GET  /effects?key=K     what really happened to K, counted in the store
  GET  /arrivals?key=K    when each attempt at K arrived (Unix ns) and their spread
try:
  racetest http POST 'http://%s/attempt?key={{.Token}}' --effects 'http:http://%s/effects?key={{.Token}}' -n %d --release last-byte
`, name, os.Getpid(), p.Prefix(), addr, addr, workers)
}

// serveExecutable is the racetest binary that replicas run: this one (a
// test points it at a built racetest).
var serveExecutable = os.Executable

// processPlan makes pl a run whose target is a fleet of 'racetest serve'
// processes, one per replica, over pl's own target.
func processPlan(o *runOptions, spec scenarios.Spec, shape shapeFlags, pl plan) (plan, error) {
	if b, err := o.Registry.Backend(o.Backend); err == nil && !b.Server && pl.Config.Replicas > 1 && spec.Name != scenarios.MemorySet {
		// Each process would hold a store of its own: R effects would be R
		// stores saying yes once each, not a race.
		return pl, usageErrorf("%s on %s with --processes and %d replicas: each process would keep its own private store, "+
			"so %d effects would not be a race; run it on a server backend (--backend redis, mysql, postgres or mongo), "+
			"or drop --processes (memory-set is the scenario whose state is private to each replica by design)",
			spec.Name, b.Name, pl.Config.Replicas, pl.Config.Replicas)
	}
	exe, err := serveExecutable()
	if err != nil {
		return pl, setupError(fmt.Errorf("--processes starts racetest itself, and its path is unknown: %w", err))
	}
	backend, err := o.Registry.Backend(o.Backend)
	if err != nil {
		return pl, usageError(err)
	}
	reg, replicas, allowed := o.Registry, pl.Config.Replicas, pl.Config.Allowed
	// The embedded backend lives inside each process: there is no shared
	// store for this process to count in.
	perProcess := !backend.Server
	control := pl.Build
	pl.Build = func(ctx context.Context, p scenarios.Params) (runner.Target, error) {
		var ctl runner.Target
		if !perProcess {
			var err error
			if ctl, err = control(ctx, p); err != nil {
				return nil, err
			}
		}
		return serve.NewFleet(serve.FleetOptions{
			Executable: exe,
			Args: func(replica, workers int) []string {
				return serveArgs(spec.Name, backend.Name, p, shape, replica, replicas, workers)
			},
			Env:             connEnv(reg, p.Conn),
			Control:         ctl,
			PerProcessStore: perProcess,
			Timeout:         shape.Timeout,
			Allowed:         allowed,
		})
	}
	pl.Case.Name = fmt.Sprintf("%s (%d %s)", spec.Name, replicas, map[bool]string{true: "processes", false: "process"}[replicas > 1])
	pl.Case.Settings = maps.Clone(pl.Case.Settings)
	if pl.Case.Settings == nil {
		pl.Case.Settings = map[string]string{}
	}
	pl.Case.Settings["processes"] = strconv.Itoa(replicas)
	return pl, nil
}

// serveArgs are the arguments of one replica process: the run's scenario
// parameters, but no connection string (those go in the environment).
func serveArgs(scenario, backend string, p scenarios.Params, s shapeFlags, replica, replicas, workers int) []string {
	return []string{"serve", scenario, "--backend", backend, "--addr", "127.0.0.1:0",
		"--attached", "--run-id", p.RunID, "--replica", strconv.Itoa(replica), "--replicas", strconv.Itoa(replicas),
		"--workers", strconv.Itoa(max(workers, 1)), "--timeout", s.Timeout.String(),
		"--gap", p.Gap.String(), "--latency", p.Latency.String(), "--ttl", p.TTL.String(),
		"--seed", strconv.FormatInt(p.Seed, 10), "--isolation", p.Isolation, "--engine", p.Engine, "--variant", p.Variant,
	}
}
