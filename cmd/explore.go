package cmd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/racetest/racetest/explore"
	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/release"
	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/runplan"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/script"
)

// exploreOptions are the parsed flags of 'racetest explore' and 'racetest
// replay', for a built-in scenario or for the user's own script.
type exploreOptions struct {
	*factory
	Replay   bool
	Scenario string // a built-in scenario; "" with a script
	Dialect  script.Dialect
	Scripts  script.Spec
	Backend  string
	Shape    shapeFlags
	Explore  explore.Options
	Format   string
	Expect   string
	// ExpectGiven: --expect was given (finishFlags.ExpectGiven).
	ExpectGiven       bool
	Strict            bool
	AllowInconclusive bool
	Schedule          string
	Step              bool
	// Confirm is how many bursts of the same attempts follow a SAFE.
	Confirm int
	// replay is the command that replays one order, without --schedule;
	// connNote says which connection flags it leaves out, if any.
	replay, connNote string
}

const exploreLong = `Run two (or three) attempts step by step, in every order, on the real server.
Each attempt has its own connection; a controller holds every attempt at each
step boundary and lets exactly one step go at a time. The steps are a built-in
scenario's marks (check, act), a script's statements, or w.Step calls of the
race package. Each order runs at a fresh subject; its effects are counted in
the store. A step the server says waits on a lock (PostgreSQL's
pg_blocking_pids, InnoDB's lock waits) is recorded as blocked, and the next
step of the order goes ahead at once; where the server cannot say (Redis,
MongoDB), a step not back within --block-after counts as blocked, and the
output says which rule applied. Deadlocks and serialization failures the
server reports are outcomes of the order.

Two different transactions are one script each: --attempt repeated, attempt A
running the first, B the second (--attempts defaults to their number; with more
attempts than scripts they go round again). Orders are counted over each
attempt's own steps.

The verdict is RACE with the violating orders (each with the 'racetest replay'
command that runs it again), SAFE for every order at this step granularity, or
INCONCLUSIVE when orders were left unexplored.`

const replayLong = `Run exactly one order of the attempts' steps, named by --schedule ("A1 B1 A2 B2":
each attempt's steps numbered from 1), as 'racetest explore' runs each of its
orders: for a bug report, a CI regression test (--expect), or a training session
(--step waits for Enter before each step, on a terminal).`

// newCmdExplore builds 'racetest explore' and its script forms.
func newCmdExplore(f *factory, runF func(context.Context, *exploreOptions) error) *cobra.Command {
	return newExploreCmd(f, false, runF)
}

// newCmdReplay builds 'racetest replay': exactly one order.
func newCmdReplay(f *factory, runF func(context.Context, *exploreOptions) error) *cobra.Command {
	return newExploreCmd(f, true, runF)
}

func newExploreCmd(f *factory, replay bool, runF func(context.Context, *exploreOptions) error) *cobra.Command {
	verb := "explore"
	if replay {
		verb = "replay"
	}
	run := func(c *cobra.Command, o *exploreOptions) error {
		o.replay, o.connNote = replayCommand(c, o), leftOut(c, o)
		if runF != nil {
			return runF(c.Context(), o)
		}
		return runExplore(c.Context(), o)
	}
	opts := &exploreOptions{factory: f, Replay: replay}
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
  racetest replay sql -b postgres --setup @examples/redeem/scripts/schema.sql --subject @examples/redeem/scripts/coupon.sql \
      --attempt @examples/redeem/scripts/naive.sql --effects @examples/redeem/scripts/count.sql \
      --teardown @examples/redeem/scripts/drop.sql --schedule "A1 B1 A2 B2"`
	} else {
		c.Short = "Run two or three attempts step by step in every order, on the real server, and show the orders that break"
		c.Example = `  racetest explore check-then-write -b postgres
  racetest explore check-then-write -b mysql --isolation serializable
  racetest explore conditional-update -b redis --attempts 3
  racetest explore sql -b mysql --setup @examples/redeem/scripts/schema.sql --subject @examples/redeem/scripts/coupon.sql \
      --attempt @examples/redeem/scripts/naive.sql --effects @examples/redeem/scripts/count.sql \
      --teardown @examples/redeem/scripts/drop.sql`
	}
	exploreFlags(c.Flags(), opts, replay)
	opts.Shape.register(c.Flags(), f.Registry, exploreShape(firesExplore, map[string]string{
		"replicas": "application replicas; attempt i runs on replica i mod R"}))
	c.Flags().StringVarP(&opts.Backend, "backend", "b", "memory", "where the shared state lives (see 'racetest list')")
	for _, d := range []script.Dialect{script.SQL, script.Redis, script.Mongo} {
		c.AddCommand(newCmdExploreScript(f, replay, d, run))
	}
	return c
}

// exploreShape is what explore and replay take of the shape (fires, with
// the words of usage): two or three attempts, each held to a timeout.
func exploreShape(fires firing, usage map[string]string) verbShape {
	usage["attempts"] = "attempts, each on its own connection: 2 or 3"
	usage["timeout"] = "the longest an attempt (and its transaction) may stay open; past it the attempt is abandoned, rolled back and reported"
	return verbShape{fires: fires, attempts: explore.DefaultAttempts, noShort: true, usage: usage}
}

// options are the explorer's options: the flags of explore, and of the
// shape its attempts and their timeout.
func (o *exploreOptions) options() explore.Options {
	opt := o.Explore
	opt.Attempts, opt.Timeout = o.Shape.Attempts, o.Shape.Timeout
	return opt
}

// exploreFlags registers the flags every form of explore and replay shares
// besides the shape's.
func exploreFlags(fs *pflag.FlagSet, o *exploreOptions, replay bool) {
	fs.DurationVar(&o.Explore.BlockAfter, "block-after", explore.DefaultBlockAfter, "where the server cannot say whether a step waits on a lock (Redis, MongoDB, or a failed question), a step not back by then counts as blocked and the next step goes")
	fs.StringVarP(&o.Format, "format", "o", "table", "output format: "+strings.Join(report.Formats(), ", "))
	expectFlag(fs, &o.Expect, &o.ExpectGiven, "what the exploration must show: safe, race, lost, or catalog (the catalog's expectation for a built-in scenario)"+expectProof)
	fs.BoolVar(&o.Strict, "strict", false, "fail (exit 4) when orders were left unexplored or abandoned, whatever the expectation")
	fs.BoolVar(&o.AllowInconclusive, "allow-inconclusive", false, allowInconclusiveHelp)
	if replay {
		fs.StringVar(&o.Schedule, "schedule", "", `the order to run, each attempt's steps numbered from 1: "A1 B1 A2 B2" (required)`)
		fs.BoolVar(&o.Step, "step", false, "wait for Enter before each step (on a terminal): a trainer walks through the order")
	} else {
		fs.IntVar(&o.Explore.MaxSchedules, "max-schedules", explore.DefaultMaxSchedules, "the most orders to run; more are refused (exit 2) unless --cap")
		fs.IntVar(&o.Confirm, "confirm", defaultConfirm, "after a SAFE, fire this many bursts of the same attempts released together: bursts that break make the verdict their RACE or LOST (exit 1); 0 fires none")
		fs.BoolVar(&o.Explore.Cap, "cap", false, "past --max-schedules, run the first orders and report the rest unexplored (INCONCLUSIVE)")
	}
}

func newCmdExploreScript(f *factory, replay bool, d script.Dialect, run func(*cobra.Command, *exploreOptions) error) *cobra.Command {
	o := &exploreOptions{factory: f, Replay: replay, Dialect: d}
	name := d.String()
	c := &cobra.Command{
		Use:   name + " --attempt SCRIPT|@FILE --effects SCRIPT|@FILE",
		Short: "Your own " + name + " script, step by step: each statement is a step",
		Long:  exploreLong + "\n\n" + scriptHelp,
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if n := len(o.Scripts.Attempt); n > 1 && !c.Flags().Changed("attempts") {
				// One script per transaction: as many attempts as scripts.
				o.Shape.Attempts = n
			}
			return run(c, o)
		},
	}
	fs := c.Flags()
	fires := firesExploreScript
	if d == script.SQL {
		fs.StringVarP(&o.Backend, "backend", "b", "", "the SQL server: postgres or mysql (MySQL and MariaDB)")
		fires |= onSQLServer
	} else {
		o.Backend = name
	}
	fs.StringVar(&o.Scripts.Setup, "setup", "", "run once before the first order (inline or @FILE; template {{.RunID}})")
	fs.StringVar(&o.Scripts.Subject, "subject", "", "run before each order: make the subject {{.Token}} names")
	fs.StringArrayVar(&o.Scripts.Attempt, "attempt", nil, "what each attempt runs, one step per statement (required); repeat it for one script per transaction: attempt A runs the first, B the second (--attempts defaults to their number; with more attempts they go round again)")
	fs.StringVar(&o.Scripts.Effects, "effects", "", "after each order: a query or command returning how many times the action took effect (required)")
	fs.StringArrayVar(&o.Scripts.Invariants, "invariant", nil, "after each order: a query or command returning how many times a rule that must always hold is broken, or a boolean (repeatable); an order that breaks it is a violation")
	fs.StringVar(&o.Scripts.Teardown, "teardown", "", "run once at the end, also after Ctrl-C (inline or @FILE)")
	exploreFlags(fs, o, replay)
	o.Shape.register(fs, f.Registry, exploreShape(fires, map[string]string{
		"isolation": "read-uncommitted, read-committed, repeatable-read or serializable for every attempt's session (default: the server's)",
		"allowed":   "effects per order that are correct: N (exactly N, 0 included) or MIN-MAX (0-1: at most once)",
		"keep":      "do not run --teardown at the end: leave what --setup made for inspection",
	}))
	return c
}

// replayCommand is the command line that replays one order of this
// exploration: the same command and flags, as 'replay', without the flags
// that only an exploration takes, and without the connection flags, which
// may hold a password (as every Reproduce line: commandLine): the reader's
// own connection (flag or RACETEST_* variable) applies.
func replayCommand(c *cobra.Command, o *exploreOptions) string {
	parts := []string{"racetest", "replay"}
	if o.Scenario == "" {
		parts = append(parts, o.Dialect.String())
	} else {
		parts = append(parts, shellQuote(o.Scenario))
	}
	skip := map[string]bool{"max-schedules": true, "cap": true, "confirm": true, "format": true, "schedule": true, "step": true, "strict": true, "expect": true, "allow-inconclusive": true}
	var flags []string
	c.Flags().Visit(func(fl *pflag.Flag) {
		if skip[fl.Name] || envSkipped(fl, o.Registry) {
			return
		}
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			// A repeated flag (--attempt per transaction) stays repeated, in order.
			for _, v := range sv.GetSlice() {
				flags = append(flags, "--"+fl.Name+"="+shellQuote(v))
			}
			return
		}
		flags = append(flags, "--"+fl.Name+"="+shellQuote(fl.Value.String()))
	})
	// By name; a repeated flag's values keep their order (attempt A's script first).
	name := func(f string) string { return f[:strings.Index(f, "=")] }
	sort.SliceStable(flags, func(i, j int) bool { return name(flags[i]) < name(flags[j]) })
	return strings.Join(append(parts, flags...), " ")
}

// leftOut says which connection flags the command line gave that the
// replay commands leave out, and how the reader gives them again; "" when
// none was given.
func leftOut(c *cobra.Command, o *exploreOptions) string {
	var given, envs []string
	for _, b := range connBackends(o.Registry) {
		for _, cn := range []*scenarios.Connection{b.Conn, b.ReadConn} {
			if cn != nil && c.Flags().Lookup(cn.Flag) != nil && c.Flags().Changed(cn.Flag) {
				given, envs = append(given, "--"+cn.Flag), append(envs, cn.Env)
			}
		}
	}
	if len(given) == 0 {
		return ""
	}
	return fmt.Sprintf("the replay commands leave out %s, which may hold a password: give it again, or set %s",
		strings.Join(given, " and "), strings.Join(envs, " and "))
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
// frame and the explorer's options; runID names what it creates. It is the
// one place an exploration is planned. It reads o and never changes it.
func explorePlan(ctx context.Context, o *exploreOptions, runID string) (runner.Target, report.Exploration, explore.Options, error) {
	ex := report.Exploration{Backend: o.Backend, Settings: map[string]string{}, Replay: o.replay, Replayed: o.Replay, Width: o.IO.Width()}
	opt := o.options()
	if err := opt.Validate(); err != nil {
		return nil, ex, opt, usageError(err)
	}
	if err := checkDurations(durationFlag{"gap", o.Shape.Gap}, durationFlag{"latency", o.Shape.Latency}, durationFlag{"ttl", o.Shape.TTL}); err != nil {
		return nil, ex, opt, err
	}
	if err := o.Shape.checkRows(o.Shape.Shape); err != nil {
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
	p := o.Shape.plan(max(o.Shape.Replicas, 1)).Params(runID)
	p.Attempts = opt.Attempts
	opt.Keep = o.Shape.Keep
	if o.Scenario != "" {
		return builtinPlan(ctx, o, p, ex, opt)
	}
	return scriptPlan(ctx, o, p, ex, opt)
}

func builtinPlan(ctx context.Context, o *exploreOptions, p scenarios.Params, ex report.Exploration, opt explore.Options) (runner.Target, report.Exploration, explore.Options, error) {
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
	ex.Granularity = "the work between two of the scenario's marks"
	opt.Replicas, opt.Allowed, opt.Required = p.Replicas, spec.Allowed, min(runner.DefaultRequired, spec.Allowed)
	opt.AllowanceSet = true // the catalog's allowance, 0 included
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

func scriptPlan(ctx context.Context, o *exploreOptions, p scenarios.Params, ex report.Exploration, opt explore.Options) (runner.Target, report.Exploration, explore.Options, error) {
	d, ok := script.DialectOf(o.Backend)
	if !ok || d != o.Dialect {
		if o.Backend == "" {
			return nil, ex, opt, usageErrorf("racetest %s sql needs -b postgres or -b mysql", map[bool]string{true: "replay", false: "explore"}[o.Replay])
		}
		return nil, ex, opt, usageErrorf("%s scripts run on %s, not %q", o.Dialect, strings.Join(script.Backends[o.Dialect], " or "), o.Backend)
	}
	allowed, err := runner.ParseAllowance(o.Shape.Allowed)
	if err != nil {
		return nil, ex, opt, usageErrorf("--allowed: %v", err)
	}
	if o.Scripts.Effects == "" && len(o.Scripts.Invariants) > 0 && allowed != runner.DefaultAllowance {
		return nil, ex, opt, usageErrorf("--allowed %s judges what --effects counts, and there is no --effects: the invariants alone judge each order (add --effects, or drop --allowed)", o.Shape.Allowed)
	}
	if allowed.Successes {
		return nil, ex, opt, usageErrorf("--allowed %s: explore judges each order by N or MIN-MAX effects; accounting is for sql, redis, mongo and http", o.Shape.Allowed)
	}
	if script.IsAuto(o.Scripts.Effects) {
		// auto judges a burst beside a solo twin of its attempts; explore
		// counts each order's effects, and read a count of 0 from it:
		// every order LOST.
		return nil, ex, opt, usageErrorf("--effects auto judges a burst beside the same attempts run one at a time, which is 'racetest %s' (bursts); explore counts each order's effects: give a query that counts them, or --invariant", strings.ToLower(o.Dialect.String()))
	}
	if err := attemptScripts(len(o.Scripts.Attempt), opt.Attempts); err != nil {
		return nil, ex, opt, err
	}
	scripts, err := o.Scripts.Load("", o.Dialect, func(n string) string { return "--" + n })
	if err != nil {
		return nil, ex, opt, usageError(err)
	}
	doing := "exploring your scripts"
	if o.Replay {
		doing = "replaying your scripts"
	}
	target, err := scriptBuilder(o.IO.ErrOut, doing, o.Backend, scripts)(ctx, p)
	if err != nil {
		return nil, ex, opt, exploreScriptError(err)
	}
	t := target.(*script.Target)
	t.Unit = "order"
	ex.Name = scripts.Attempt.Name
	ex.Describe = t.DescribeStep
	ex.Granularity = map[script.Dialect]string{script.SQL: "one whole statement", script.Redis: "one whole command", script.Mongo: "one whole command"}[o.Dialect]
	// As written: --allowed 0 is no effect at all, not the default.
	opt.Allowed, opt.Required, opt.AllowanceSet = allowed.Max, allowed.Min, true
	if o.Dialect == script.SQL {
		opt.Independent, opt.Commute = sqlIndependence(ctx, t, scripts, opt.Attempts, o.Shape.Isolation, o.Backend, p.RunID)
		return t, ex, opt, nil
	}
	// Two plain reads of different attempts commute, each judged in the
	// script its own attempt runs.
	opt.Independent = func(a, b explore.StepRef) bool {
		return t.ReadOnly(a.Attempt, a.Name) && t.ReadOnly(b.Attempt, b.Name)
	}
	opt.Commute = "two plain reads"
	return t, ex, opt, nil
}

// exploreScriptError is the exit of an exploration whose scripts' target
// could not be built. Bad input is exit 2, as 'racetest sql' and explore
// of a built-in scenario say: a fault of the scripts' own (script.RunError's
// Script: --effects auto on a store it cannot measure), and an address or
// level the backend refused (scenarios.ParamError). Anything else (the
// server not there, a setup that failed on it) is exit 3.
func exploreScriptError(err error) error {
	var re *script.RunError
	var bad *scenarios.ParamError
	if errors.As(err, &re) && re.Script || errors.As(err, &bad) {
		return usageError(err)
	}
	return setupError(err)
}

// sqlIndependence wires the SQL reading of each attempt's statements
// into explore's reduction (explore.SQL says what each level lets
// commute, and why), and says it in a few words. A level a script sets
// itself is not known here: nothing commutes. Statements are read as
// backend's server reads them, and a table is known apart only when the
// setup made it and the server's catalog shows nothing that reaches past
// it (knownInCatalog).
func sqlIndependence(ctx context.Context, cat catalog, sc script.Scripts, attempts int, isolation, backend, runID string) (explore.Independent, string) {
	rules := explore.SQL{Snapshot: isolation != "read-uncommitted" && isolation != "read-committed", Serializable: isolation == "serializable",
		Dialect: sqlDialect(backend)}
	type stepKey struct {
		attempt int
		label   string
	}
	texts := map[stepKey]string{}
	for a := range attempts {
		s := sc.For(a)
		for i := range s.Steps {
			st := &s.Steps[i]
			if up := strings.ToUpper(st.Text); strings.Contains(up, "ISOLATION") || strings.Contains(up, "SNAPSHOT") {
				rules.Serializable = true
			}
			if st.Marked() {
				texts[stepKey{a, s.StepLabel(st)}] = st.Text
			}
		}
	}
	var setup []string
	if sc.Setup != nil {
		for _, st := range sc.Setup.Steps {
			setup = append(setup, st.Text)
		}
	}
	rules.Known = knownInCatalog(ctx, cat, explore.SetupTables(rules.Dialect, setup...), runID)
	return rules.Independent(func(a int, label string) (string, bool) {
		t, ok := texts[stepKey{a, label}]
		return t, ok
	}), rules.Commute()
}

// sqlDialect is the SQL backend's server reads: explore reads a statement
// by its quoting and comments.
func sqlDialect(backend string) explore.Dialect {
	if backend == "postgres" {
		return explore.Postgres
	}
	if backend == "mysql" {
		return explore.MySQL
	}
	return explore.AnyDialect
}

// catalog says which tables a statement may reach past its text
// (script.Target.HiddenReach, over sqldb.HiddenReach).
type catalog interface {
	HiddenReach(ctx context.Context, tables []string) (map[string]string, error)
}

// knownInCatalog is explore.SQL's Known: a table the setup made (tables,
// as explore.SetupTables names them) whose catalog entry shows nothing
// that reaches another table — no trigger, foreign key, rule, view,
// inheritance or partition. The catalog is read once, at the first
// question, which explore asks after the setup ran (a table it found
// already there, CREATE TABLE IF NOT EXISTS, is checked too). A catalog
// that cannot be read knows no table.
func knownInCatalog(ctx context.Context, cat catalog, tables []string, runID string) func(string) bool {
	var once sync.Once
	known := map[string]bool{}
	return func(table string) bool {
		once.Do(func() {
			names := make([]string, len(tables))
			for i, t := range tables {
				names[i] = strings.ReplaceAll(t, "{{.runid}}", strings.ToLower(runID))
			}
			hidden, err := cat.HiddenReach(ctx, names)
			if err != nil {
				return
			}
			for i, t := range tables {
				if _, reaches := hidden[names[i]]; !reaches {
					known[t] = true
				}
			}
		})
		return known[table]
	}
}

// attemptScripts refuses more --attempt scripts than attempts: a
// transaction no attempt runs would be silently left out.
func attemptScripts(scripts, attempts int) error {
	if scripts > attempts {
		return usageErrorf("%d --attempt scripts but --attempts %d: each script is one attempt's transaction, so give --attempts %d or more (with more attempts than scripts they go round again: attempt %d runs the first)",
			scripts, attempts, scripts, scripts+1)
	}
	return nil
}

func runExplore(ctx context.Context, o *exploreOptions) error {
	reporter, err := report.LookupExplore(o.Format)
	if err != nil {
		return usageError(err)
	}
	if o.Expect != "catalog" {
		if _, err := report.ParseExpect(o.Expect); err != nil || !strings.Contains("safe race lost", o.Expect) {
			return usageErrorf("--expect must be safe, race, lost or catalog (got %q)", o.Expect)
		}
	}
	if o.Confirm < 0 {
		return usageErrorf("--confirm is how many bursts follow a SAFE: 0 (none) or more (got %d)", o.Confirm)
	}
	if o.Step && !o.IO.InTTY {
		return usageErrorf("--step waits for Enter before each step: run it on a terminal (stdin is not one)")
	}
	if o.Expect == "catalog" && o.Scenario == "" {
		return usageErrorf("--expect catalog needs a built-in scenario; for a script say --expect safe or race")
	}
	// The run's own id, not the options': they stay as parsed.
	runID := scenarios.NewRunID()
	t, ex, opt, err := explorePlan(ctx, o, runID)
	if err != nil {
		return err
	}
	if cl, ok := t.(runner.Closer); ok {
		defer cl.Close()
	}
	opt.Deadlock = sqldb.IsDeadlock
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
	end := inFlight.begin(o.Registry, o.Backend, runID)
	res, runErr := explore.Run(ctx, t, opt)
	end()
	if res != nil && o.connNote != "" {
		res.Notes = append(res.Notes, o.connNote)
	}
	if b, err := o.Registry.Backend(o.Backend); err == nil && opt.Keep && res != nil && o.Scenario != "" {
		res.Notes = append(res.Notes, keptNote(b, runID))
	}
	if res != nil && runErr == nil && res.Verdict() == explore.Safe {
		if o.Scenario != "" {
			p := o.Shape.params(max(o.Shape.Replicas, 1))
			if want, why, ok := scenarios.BelowSteps(o.Scenario, o.Backend, p, res.Server); ok {
				res.Notes = append(res.Notes, fmt.Sprintf("bursts of this case show %s, which no order of whole steps can: %s (see docs/verdicts.md)",
					strings.ToUpper(string(want)), why))
			}
		}
		if o.Confirm > 0 && opt.Keep {
			ex.Confirm = &report.Confirmation{Skipped: "--keep: bursts would make the setup again over what it kept"}
		} else if o.Confirm > 0 {
			line, c := confirmSafe(ctx, o, t, opt, o.Confirm)
			res.Notes = append(res.Notes, line)
			ex.Confirm = c
		}
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
	var noStep *explore.StepError
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
	case errors.As(runErr, &noStep):
		return usageError(noStep)
	case errors.As(runErr, &noSteps):
		return usageErrorf("%s on %s: %v", ex.Name, o.Backend, noSteps)
	case errors.As(runErr, &re) && re.Script:
		return usageError(re)
	case runErr != nil && (res == nil || len(res.Orders) == 0):
		return setupError(runErr)
	}
	if err := reporter(o.IO.Out, ex); err != nil {
		return outputError("report", err)
	}
	if runErr != nil {
		return setupError(runErr)
	}
	ok, unproven := ex.Met()
	switch {
	case !ok:
		return &exitError{code: exitViolated, quiet: true, err: fmt.Errorf("%s, expected %s", ex.Verdict(), ex.Expect)}
	case unproven && o.Strict:
		return &exitError{code: exitInconclusive, err: errors.New("INCONCLUSIVE: orders were left unexplored or abandoned, and --strict fails that")}
	case unproven && o.ExpectGiven && !o.AllowInconclusive && ex.Expect == report.ExpectSafe:
		return &exitError{code: exitInconclusive, err: errors.New("INCONCLUSIVE: orders were left unexplored or abandoned, and --expect safe asks for proof (--allow-inconclusive lets it pass)")}
	}
	return nil
}

// countedLine says on stderr, before the orders run, how many there are.
func countedLine(o *exploreOptions) func(*explore.Result) error {
	return func(r *explore.Result) error {
		line := fmt.Sprintf("racetest: %s: %s = %s orders", r.Shape(), ordersFormula(r.AttemptSteps), r.Total)
		if r.Replanned > 0 {
			// An attempt took more steps than planned: the orders again.
			line = fmt.Sprintf("racetest: planned again, each attempt with the longest path it took: %s: %s = %s orders", r.Shape(), ordersFormula(r.AttemptSteps), r.Total)
		}
		if r.Pruned > 0 {
			line += fmt.Sprintf("; %d only swap steps that commute and are spared (each is equivalent to one that runs: see docs/verdicts.md)", r.Pruned)
		}
		if r.Unexplored != "" {
			line += fmt.Sprintf("; --cap: the first %d run, %s left unexplored", r.Planned, r.Unexplored)
		}
		fmt.Fprintf(o.IO.ErrOut, "%s; running %d, each at a fresh subject\n", line, r.Planned)
		return nil
	}
}

// ordersFormula writes how the orders of attempts of these steps are
// counted: C(7,2) for 2 and 5 steps, (6)!/(2!)^3 or (9)!/(2!·3!·4!) for three.
func ordersFormula(steps [][]string) string {
	ks := make([]string, len(steps))
	total, same := 0, true
	for i, s := range steps {
		ks[i] = fmt.Sprintf("%d!", len(s))
		total += len(s)
		same = same && len(s) == len(steps[0])
	}
	switch {
	case len(steps) == 2:
		return fmt.Sprintf("C(%d,%d)", total, min(len(steps[0]), len(steps[1])))
	case same:
		return fmt.Sprintf("(%d)!/(%d!)^%d", total, len(steps[0]), len(steps))
	}
	return fmt.Sprintf("(%d)!/(%s)", total, strings.Join(ks, "·"))
}

// defaultConfirm is how many bursts of the same attempts follow an
// exploration's SAFE unless --confirm says otherwise: a race inside one
// step shows in them (INSERT … WHERE NOT EXISTS raced in 187 of 200
// bursts). 100 bursts of two attempts take about a second on the
// local PostgreSQL and MariaDB (docs/measurements.md).
const defaultConfirm = 100

// confirmSafe fires n bursts of the exploration's attempts released
// together, as 'racetest run' does, after a SAFE: a race below the step
// granularity (inside one step, or two statements in flight at once in the
// server) shows there. It returns the line the report notes, and what the
// bursts showed (a RACE or LOST contradicts the SAFE).
func confirmSafe(ctx context.Context, o *exploreOptions, t runner.Target, opt explore.Options, n int) (string, *report.Confirmation) {
	sh := o.Shape.Shape
	sh.Attempts, sh.Bursts, sh.Replicas, sh.Timeout = opt.Attempts, n, max(opt.Replicas, 1), opt.Timeout
	cfg := runner.NewConfig(append(sh.Options(), runner.Allowed(opt.Allowed), runner.Required(opt.Required))...)
	var r *runner.Result
	var err error
	if o.Scenario != "" {
		// A built-in scenario's target is spent once the exploration has
		// cleaned up (it closes its connection as it drops its tables): the
		// bursts get their own, under their own run id. A script's target
		// runs its setup again.
		runID := scenarios.NewRunID()
		p := o.Shape.plan(max(o.Shape.Replicas, 1)).Params(runID)
		p.Attempts = opt.Attempts
		t, _, _, err = builtinPlan(ctx, o, p, report.Exploration{Settings: map[string]string{}}, o.options())
		if err == nil {
			if cl, ok := t.(runner.Closer); ok {
				defer cl.Close()
			}
			end := inFlight.begin(o.Registry, o.Backend, runID)
			r, err = runner.RunConfig(ctx, t, cfg)
			end()
		}
	} else {
		r, err = runner.RunConfig(ctx, t, cfg)
	}
	if err != nil && (r == nil || len(r.Bursts) == 0) {
		return fmt.Sprintf("--confirm: the bursts could not run: %v", err), &report.Confirmation{Skipped: fmt.Sprintf("the bursts could not run: %v", err)}
	}
	a := report.Assess(report.Case{Result: r})
	c := &report.Confirmation{Bursts: a.Bursts, Violations: a.Violations, Tested: a.Tested, Verdict: a.Verdict}
	line := fmt.Sprintf("--confirm: %d bursts of the same %d attempts released together: %s", a.Bursts, opt.Attempts, a.Verdict)
	if a.Verdict == report.Race || a.Verdict == report.Lost {
		return fmt.Sprintf("%s in %d — they contradict the exploration's SAFE: what they show is below this step granularity (inside one step, or two statements in flight at once)", line, a.Violations), c
	}
	if a.Verdict == report.Safe {
		return line + fmt.Sprintf(" (%d tested): they agree", a.Tested), c
	}
	return line + ": " + a.Why + " — they neither agree nor disagree", c
}
