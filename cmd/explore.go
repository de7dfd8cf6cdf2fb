package cmd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/racetest/racetest/explore"
	"github.com/racetest/racetest/release"
	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/runplan"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/script"
)

// ExploreOptions are the parsed flags of 'racetest explore' and 'racetest
// replay', for a built-in scenario or for the user's own script.
type ExploreOptions struct {
	*Factory
	Replay   bool
	Scenario string // a built-in scenario; "" with a script
	Dialect  script.Dialect
	Scripts  script.Spec
	Allowed  int
	Backend  string
	Shape    shapeFlags
	Explore  explore.Options
	Format   string
	Expect   string
	Strict   bool
	Schedule string
	Step     bool
	// replay is the command that replays one order, without --schedule.
	replay string
	// runID names what the exploration creates, for Ctrl-C's message.
	runID string
}

const exploreLong = `Run two (or three) attempts step by step, in every order, on the real server.
Each attempt has its own connection; a controller holds every attempt at each
step boundary and lets exactly one step go at a time. The steps are a built-in
scenario's marks (check, act), a script's statements, or w.Step calls of the
race package. Each order runs at a fresh subject; its effects are counted in
the store. A step that has not returned within --block-after waits on a lock:
it is recorded as blocked and the next step of the order goes ahead. Deadlocks
and serialization failures the server reports are outcomes of the order.

The verdict is RACE with the violating orders (each with the 'racetest replay'
command that runs it again), SAFE for every order at this step granularity, or
INCONCLUSIVE when orders were left unexplored.`

const replayLong = `Run exactly one order of the attempts' steps, named by --schedule ("A1 B1 A2 B2":
each attempt's steps numbered from 1), as 'racetest explore' runs each of its
orders: for a bug report, a CI regression test (--expect), or a training session
(--step waits for Enter before each step, on a terminal).`

// NewCmdExplore builds 'racetest explore' and its script forms.
func NewCmdExplore(f *Factory, runF func(context.Context, *ExploreOptions) error) *cobra.Command {
	return newCmdExplore(f, false, runF)
}

// NewCmdReplay builds 'racetest replay': exactly one order.
func NewCmdReplay(f *Factory, runF func(context.Context, *ExploreOptions) error) *cobra.Command {
	return newCmdExplore(f, true, runF)
}

func newCmdExplore(f *Factory, replay bool, runF func(context.Context, *ExploreOptions) error) *cobra.Command {
	verb := "explore"
	if replay {
		verb = "replay"
	}
	run := func(c *cobra.Command, o *ExploreOptions) error {
		o.replay = replayCommand(c, o)
		if runF != nil {
			return runF(c.Context(), o)
		}
		return runExplore(c.Context(), o)
	}
	opts := &ExploreOptions{Factory: f, Replay: replay}
	c := &cobra.Command{
		Use:  verb + " SCENARIO -b BACKEND",
		Long: exploreLong,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("%s takes one scenario (see 'racetest list'), or sql, redis or mongo with your script; got %d arguments", verb, len(args))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			opts.Scenario = args[0]
			return run(c, opts)
		},
	}
	if replay {
		c.Long = replayLong + "\n\n" + exploreLong
		c.Short = "Run one order of the attempts' steps, for a bug report, a CI regression test or a training session"
		c.Example = `  racetest replay check-then-write -b postgres --schedule "A1 B1 A2 B2"
  racetest replay check-then-write -b mysql --isolation serializable --schedule "A1 B1 A2 B2" --step
  racetest replay sql -b postgres --setup @schema.sql --attempt @redeem.sql --effects @count.sql --schedule "A1 B1 A2 B2"`
	} else {
		c.Short = "Run two or three attempts step by step in every order, on the real server, and show the orders that break"
		c.Example = `  racetest explore check-then-write -b postgres
  racetest explore check-then-write -b mysql --isolation serializable
  racetest explore conditional-update -b redis --attempts 3
  racetest explore sql -b mysql --setup @schema.sql --subject @coupon.sql --attempt @redeem.sql --effects @count.sql`
	}
	exploreFlags(c.Flags(), opts, replay)
	opts.Shape.registerParams(c.Flags(), f.Registry)
	c.Flags().StringVarP(&opts.Backend, "backend", "b", "memory", "where the shared state lives (see 'racetest list')")
	c.Flags().IntVar(&opts.Shape.Replicas, "replicas", runner.DefaultReplicas, "application replicas; attempt i runs on replica i mod R")
	for _, d := range []script.Dialect{script.SQL, script.Redis, script.Mongo} {
		c.AddCommand(newCmdExploreScript(f, replay, d, run))
	}
	return c
}

// exploreFlags registers the flags every form of explore and replay shares.
func exploreFlags(fs *pflag.FlagSet, o *ExploreOptions, replay bool) {
	fs.IntVar(&o.Explore.Attempts, "attempts", explore.DefaultAttempts, "attempts, each on its own connection: 2 or 3")
	fs.DurationVar(&o.Explore.BlockAfter, "block-after", explore.DefaultBlockAfter, "a step that has not returned by then waits on a lock: it is recorded as blocked and the next step goes")
	fs.DurationVar(&o.Explore.Timeout, "timeout", runner.DefaultTimeout, "the longest an attempt (and its transaction) may stay open; past it the attempt is abandoned, rolled back and reported")
	fs.StringVarP(&o.Format, "format", "o", "table", "output format: "+strings.Join(report.Formats(), ", "))
	fs.StringVar(&o.Expect, "expect", "safe", "what the exploration must show: safe, race, lost, or catalog (the catalog's expectation for a built-in scenario)")
	fs.BoolVar(&o.Strict, "strict", false, "fail (exit 4) when orders were left unexplored or abandoned")
	if replay {
		fs.StringVar(&o.Schedule, "schedule", "", `the order to run, each attempt's steps numbered from 1: "A1 B1 A2 B2" (required)`)
		fs.BoolVar(&o.Step, "step", false, "wait for Enter before each step (on a terminal): a trainer walks through the order")
	} else {
		fs.IntVar(&o.Explore.MaxSchedules, "max-schedules", explore.DefaultMaxSchedules, "the most orders to run; more are refused (exit 2) unless --cap")
		fs.BoolVar(&o.Explore.Cap, "cap", false, "past --max-schedules, run the first orders and report the rest unexplored (INCONCLUSIVE)")
	}
}

func newCmdExploreScript(f *Factory, replay bool, d script.Dialect, run func(*cobra.Command, *ExploreOptions) error) *cobra.Command {
	o := &ExploreOptions{Factory: f, Replay: replay, Dialect: d}
	name := d.String()
	c := &cobra.Command{
		Use:   name + " --attempt SCRIPT|@FILE --effects SCRIPT|@FILE",
		Short: "Your own " + name + " script, step by step: each statement is a step",
		Long:  exploreLong + "\n\n" + scriptHelp,
		Args:  cobra.NoArgs,
		RunE:  func(c *cobra.Command, _ []string) error { return run(c, o) },
	}
	fs := c.Flags()
	if d == script.SQL {
		fs.StringVarP(&o.Backend, "backend", "b", "", "the SQL server: postgres or mysql (MySQL and MariaDB)")
		fs.StringVar(&o.Shape.Isolation, "isolation", "", "read-uncommitted, read-committed, repeatable-read or serializable for every attempt's session (default: the server's)")
	} else {
		o.Backend = name
	}
	fs.StringVar(&o.Scripts.Setup, "setup", "", "run once before the first order (inline or @FILE; template {{.RunID}})")
	fs.StringVar(&o.Scripts.Subject, "subject", "", "run before each order: make the subject {{.Token}} names")
	fs.StringVar(&o.Scripts.Attempt, "attempt", "", "what each attempt runs, one step per statement (required)")
	fs.StringVar(&o.Scripts.Effects, "effects", "", "after each order: a query or command returning how many times the action took effect (required)")
	fs.StringVar(&o.Scripts.Teardown, "teardown", "", "run once at the end, also after Ctrl-C (inline or @FILE)")
	fs.IntVar(&o.Allowed, "allowed", runner.DefaultAllowed, "effects per order that are correct")
	exploreFlags(fs, o, replay)
	registerConn(fs, f.Registry, &o.Shape.Conn)
	return c
}

// replayCommand is the command line that replays one order of this
// exploration: the same command and flags, as 'replay', without the flags
// that only an exploration takes.
func replayCommand(c *cobra.Command, o *ExploreOptions) string {
	parts := []string{"racetest", "replay"}
	if o.Scenario == "" {
		parts = append(parts, o.Dialect.String())
	} else {
		parts = append(parts, shellQuote(o.Scenario))
	}
	skip := map[string]bool{"max-schedules": true, "cap": true, "format": true, "schedule": true, "step": true, "strict": true, "expect": true}
	var flags []string
	c.Flags().Visit(func(fl *pflag.Flag) {
		if !skip[fl.Name] {
			flags = append(flags, "--"+fl.Name+"="+shellQuote(fl.Value.String()))
		}
	})
	sort.Strings(flags)
	return strings.Join(append(parts, flags...), " ")
}

// shellQuote quotes s for a POSIX shell where it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./_-", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// explorePlan builds what one exploration runs: the target, the report's
// frame and the explorer's options. It is the one place an exploration
// is planned (the run plans of issue 19 can take it over).
func explorePlan(ctx context.Context, o *ExploreOptions) (runner.Target, report.Exploration, explore.Options, error) {
	ex := report.Exploration{Backend: o.Backend, Settings: map[string]string{}, Replay: o.replay, Replayed: o.Replay}
	opt := o.Explore
	if err := opt.Validate(); err != nil {
		return nil, ex, opt, usageError(err)
	}
	if err := checkDurations(durationFlag{"gap", o.Shape.Gap}, durationFlag{"latency", o.Shape.Latency}, durationFlag{"ttl", o.Shape.TTL}); err != nil {
		return nil, ex, opt, err
	}
	if o.Replay {
		seq, err := explore.ParseSchedule(o.Schedule, opt.Attempts)
		if err != nil {
			return nil, ex, opt, usageError(err)
		}
		opt.Schedule = seq
	}
	if o.Shape.Isolation != "" {
		ex.Settings["isolation"] = o.Shape.Isolation
	}
	ex.Settings["attempts"] = fmt.Sprint(opt.Attempts)
	p := o.Shape.params(max(o.Shape.Replicas, 1))
	p.Attempts = opt.Attempts
	o.runID = p.RunID
	opt.Keep = o.Shape.Keep
	if o.Scenario != "" {
		return builtinPlan(ctx, o, p, ex, opt)
	}
	return scriptPlan(ctx, o, p, ex, opt)
}

func builtinPlan(ctx context.Context, o *ExploreOptions, p scenarios.Params, ex report.Exploration, opt explore.Options) (runner.Target, report.Exploration, explore.Options, error) {
	spec, err := scenarioOn(o.Registry, o.Scenario, o.Backend)
	if err != nil {
		return nil, ex, opt, err
	}
	if o.Shape.Replicas < 1 {
		return nil, ex, opt, usageErrorf("--replicas must be at least 1 (got %d)", o.Shape.Replicas)
	}
	sh := o.Shape.plan(p.Replicas)
	sh.Attempts, sh.Variant = p.Attempts, variantOf(spec, p.Variant)
	// The explorer runs one step at a time: nothing to release together.
	run, err := runplan.Build(o.Registry, runplan.Request{Scenario: spec.Name, Backend: o.Backend, Shape: sh, RunID: p.RunID,
		Release: string(release.Gate)})
	if err != nil {
		return nil, ex, opt, usageError(err)
	}
	p = run.Params
	for k, v := range map[string]string{"variant": p.Variant, "engine": p.Engine} {
		if v != "" {
			ex.Settings[k] = v
		}
	}
	if p.Replicas > 1 {
		ex.Settings["replicas"] = fmt.Sprint(p.Replicas)
	}
	if p.Gap > 0 && opt.BlockAfter <= p.Gap {
		// The gap is a deliberate pause inside the check step, not a lock:
		// a probe shorter than it would call every check blocked.
		opt.BlockAfter = p.Gap + explore.DefaultBlockAfter
		fmt.Fprintf(o.IO.ErrOut, "racetest: --gap %s lengthens the check step: --block-after raised to %s\n", p.Gap, opt.BlockAfter)
	}
	ex.Name = spec.Name
	opt.Replicas, opt.Allowed, opt.Required = p.Replicas, spec.Allowed, min(runner.DefaultRequired, spec.Allowed)
	t, err := run.Build(ctx, p)
	if err != nil {
		var bad *scenarios.ParamError
		if errors.As(err, &bad) {
			return nil, ex, opt, usageError(bad)
		}
		return nil, ex, opt, setupError(err)
	}
	return t, ex, opt, nil
}

func scriptPlan(ctx context.Context, o *ExploreOptions, p scenarios.Params, ex report.Exploration, opt explore.Options) (runner.Target, report.Exploration, explore.Options, error) {
	d, ok := script.DialectOf(o.Backend)
	if !ok || d != o.Dialect {
		if o.Backend == "" {
			return nil, ex, opt, usageErrorf("racetest %s sql needs -b postgres or -b mysql", map[bool]string{true: "replay", false: "explore"}[o.Replay])
		}
		return nil, ex, opt, usageErrorf("%s scripts run on %s, not %q", o.Dialect, strings.Join(script.Backends[o.Dialect], " or "), o.Backend)
	}
	if o.Allowed < 0 {
		return nil, ex, opt, usageErrorf("--allowed cannot be negative (got %d)", o.Allowed)
	}
	scripts, err := o.Scripts.Load("", o.Dialect, func(n string) string { return "--" + n })
	if err != nil {
		return nil, ex, opt, usageError(err)
	}
	store, err := script.Open(ctx, o.Backend, p)
	if err != nil {
		return nil, ex, opt, setupError(err)
	}
	t, err := script.New(store, scripts, p.RunID)
	if err != nil {
		store.Close()
		return nil, ex, opt, usageError(err)
	}
	fmt.Fprintf(o.IO.ErrOut, "racetest: exploring your scripts on %s\n", store.Where())
	for _, line := range scripts.Describe() {
		fmt.Fprintln(o.IO.ErrOut, "  "+line)
	}
	ex.Name = scripts.Attempt.Name
	ex.Describe = t.DescribeStep
	opt.Allowed, opt.Required = o.Allowed, min(runner.DefaultRequired, o.Allowed)
	return t, ex, opt, nil
}

func runExplore(ctx context.Context, o *ExploreOptions) error {
	reporter, err := report.LookupExplore(o.Format)
	if err != nil {
		return usageError(err)
	}
	if o.Expect != "catalog" {
		if _, err := report.ParseExpect(o.Expect); err != nil || !strings.Contains("safe race lost", o.Expect) {
			return usageErrorf("--expect must be safe, race, lost or catalog (got %q)", o.Expect)
		}
	}
	if o.Step && !o.IO.InTTY {
		return usageErrorf("--step waits for Enter before each step: run it on a terminal (stdin is not one)")
	}
	if o.Expect == "catalog" && o.Scenario == "" {
		return usageErrorf("--expect catalog needs a built-in scenario; for a script say --expect safe or race")
	}
	t, ex, opt, err := explorePlan(ctx, o)
	if err != nil {
		return err
	}
	if cl, ok := t.(runner.Closer); ok {
		defer cl.Close()
	}
	if sc, ok := t.(interface{ ReadOnly(string) bool }); ok {
		// Two plain reads of different attempts commute: run one order of
		// each pair that differs only by swapping them.
		opt.Independent = func(a, b string) bool { return sc.ReadOnly(a) && sc.ReadOnly(b) }
	}
	opt.Counted = countedLine(o)
	if o.Step {
		in := bufio.NewReader(o.IO.In)
		opt.Pace = func(ev explore.Event) {
			d := ev.Name
			if ex.Describe != nil {
				d = ex.Describe(ev.Name)
			}
			fmt.Fprintf(o.IO.ErrOut, "next: %s: %s — press Enter", ev.Label(), d)
			_, _ = in.ReadString('\n')
		}
	}
	end := inFlight.begin(o.Backend, connFlag(o.Registry, o.Backend), o.runID)
	res, runErr := explore.Run(ctx, t, opt)
	end()
	if opt.Keep && res != nil && o.Scenario != "" && (o.Backend == "memory" || keptObjects[o.Backend] != "") {
		res.Notes = append(res.Notes, keptNote(o.Backend, o.runID))
	}
	ex.Result, ex.Err = res, runErr
	ex.Expect = report.ExpectKind(o.Expect)
	if o.Expect == "catalog" {
		server := ""
		if res != nil {
			server = res.Server
		}
		p := o.Shape.params(max(o.Shape.Replicas, 1))
		e, _ := o.Registry.Expect(o.Scenario, o.Backend, p, server)
		ex.Expect = report.ExpectKind(e)
	}
	var tooMany *explore.TooManyError
	var noSteps explore.NoStepsError
	var re *script.RunError
	switch {
	case errors.Is(runErr, context.Canceled) || ctx.Err() != nil:
		if res != nil && len(res.Orders) > 0 {
			_ = reporter(o.IO.Out, ex)
		}
		return context.Canceled
	case errors.As(runErr, &tooMany):
		return usageError(tooMany)
	case errors.As(runErr, &noSteps):
		return usageErrorf("%s on %s: %v", ex.Name, o.Backend, noSteps)
	case errors.As(runErr, &re) && re.Script:
		return usageError(re)
	case runErr != nil && (res == nil || len(res.Orders) == 0):
		return setupError(runErr)
	}
	if err := reporter(o.IO.Out, ex); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	if runErr != nil {
		return setupError(runErr)
	}
	ok, unproven := ex.Met()
	switch {
	case !ok:
		return &exitError{code: ExitViolated, quiet: true, err: fmt.Errorf("%s, expected %s", ex.Verdict(), ex.Expect)}
	case unproven && o.Strict:
		return &exitError{code: ExitInconclusive, err: errors.New("INCONCLUSIVE: orders were left unexplored or abandoned, and --strict fails that")}
	}
	return nil
}

// countedLine says on stderr, before the orders run, how many there are.
func countedLine(o *ExploreOptions) func(*explore.Result) error {
	return func(r *explore.Result) error {
		n, k := r.Attempts, len(r.Steps)
		formula := fmt.Sprintf("C(%d,%d)", 2*k, k)
		if n == 3 {
			formula = fmt.Sprintf("(%d)!/(%d!)^3", 3*k, k)
		}
		line := fmt.Sprintf("racetest: %d attempts × %d steps (%s): %s = %s orders", n, k, strings.Join(r.Steps, ", "), formula, r.Total)
		if r.Pruned > 0 {
			line += fmt.Sprintf("; %d only swap independent reads and are skipped", r.Pruned)
		}
		if r.Unexplored != "" {
			line += fmt.Sprintf("; --cap: the first %d run, %s left unexplored", r.Planned, r.Unexplored)
		}
		fmt.Fprintf(o.IO.ErrOut, "%s; running %d, each at a fresh subject\n", line, r.Planned)
		return nil
	}
}
