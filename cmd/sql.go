package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/racetest/racetest/release"
	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/script"
	"github.com/racetest/racetest/suite"
)

// scriptOptions are the parsed flags of 'racetest sql' and 'racetest redis'.
type scriptOptions struct {
	*factory
	// Command is the command line as given, for the Reproduce line.
	Command string
	Dialect script.Dialect
	Backend string
	Scripts script.Spec
	// Shape holds attempts, bursts, timeout, isolation, the connections,
	// --allowed and --solo-every.
	Shape   shapeFlags
	Release string
	finishFlags
	// Watch shapes --effects auto.
	Watch []string
}

// newCmdSQL builds 'racetest sql': the user's own statements on the user's
// own schema.
func newCmdSQL(f *factory, runF func(context.Context, *scriptOptions) error) *cobra.Command {
	c := newCmdScript(f, script.SQL, runF)
	c.Use = "sql -b postgres|mysql --attempt SQL|@FILE --effects SQL|@FILE"
	c.Short = "Fire bursts of your own SQL script at your own schema and count, with your query, what really ran"
	c.Example = `  racetest sql -b postgres --setup @examples/redeem/scripts/schema.sql \
    --subject "INSERT INTO coupons_{{.RunID}}(code) VALUES ('{{.Token}}')" \
    --attempt @examples/redeem/scripts/naive.sql \
    --effects "SELECT count(*) FROM redemptions_{{.RunID}} WHERE code = '{{.Token}}'" \
    --teardown @examples/redeem/scripts/drop.sql -n 16 --bursts 200 --expect race
  racetest sql -b mysql --setup @examples/redeem/scripts/schema.sql --subject @examples/redeem/scripts/coupon.sql \
    --attempt @examples/redeem/scripts/conditional.sql --effects @examples/redeem/scripts/count.sql \
    --teardown @examples/redeem/scripts/drop.sql`
	return c
}

// newCmdRedis builds 'racetest redis': the user's own commands.
func newCmdRedis(f *factory, runF func(context.Context, *scriptOptions) error) *cobra.Command {
	c := newCmdScript(f, script.Redis, runF)
	c.Use = "redis --attempt CMDS|@FILE --effects CMD|@FILE"
	c.Short = "Fire bursts of your own Redis commands and count, with your command, what really ran"
	c.Example = `  racetest redis --attempt @examples/redeem/scripts/naive.redis --effects "SCARD redeemed:{{.Token}}" \
    --teardown @examples/redeem/scripts/drop.redis --expect race`
	return c
}

// newCmdMongo builds 'racetest mongo': the user's own database commands.
func newCmdMongo(f *factory, runF func(context.Context, *scriptOptions) error) *cobra.Command {
	c := newCmdScript(f, script.Mongo, runF)
	c.Use = "mongo --attempt JSON|@FILE --effects JSON|@FILE"
	c.Short = "Fire bursts of your own MongoDB commands (JSON documents) and count, with your count, what really ran"
	c.Example = `  racetest mongo --setup @examples/redeem/scripts/schema.mongo --attempt @examples/redeem/scripts/naive.mongo \
    --effects '{"count": "redemptions_{{.RunID}}", "query": {"code": "{{.Token}}"}}' \
    --teardown @examples/redeem/scripts/drop.mongo --expect race`
	return c
}

func newCmdScript(f *factory, d script.Dialect, runF func(context.Context, *scriptOptions) error) *cobra.Command {
	opts := &scriptOptions{factory: f, Dialect: d}
	c := &cobra.Command{
		Args: cobra.NoArgs,
		Long: scriptHelp,
		RunE: func(c *cobra.Command, args []string) error {
			opts.Command = commandLine(c, args, f.Registry)
			opts.Shape.given(c.Flags())
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runScript(c.Context(), opts)
		},
	}
	fs := c.Flags()
	fires := firesScript
	if d == script.SQL {
		fs.StringVarP(&opts.Backend, "backend", "b", "", "the SQL server: postgres or mysql (MySQL and MariaDB)")
		fires |= onSQLServer
	} else {
		opts.Backend = d.String()
	}
	fs.StringVar(&opts.Scripts.Setup, "setup", "", "run once before the first burst (inline or @FILE; template {{.RunID}})")
	fs.StringVar(&opts.Scripts.Subject, "subject", "", "run before each burst, outside its timing: make the subject {{.Token}} names")
	fs.StringArrayVar(&opts.Scripts.Attempt, "attempt", nil, "what each attempt runs (required; templates {{.Token}} {{.Burst}} {{.Attempt}} {{.RunID}}); repeat it for one script per transaction: attempt i runs the i-th, round again past the last")
	fs.StringVar(&opts.Scripts.Effects, "effects", "", "before and after each burst: a query or command counting what the attempts do; the burst's effects are its change (required unless --invariant is given); or auto: compare each burst's change of the store with the same attempts run one at a time")
	fs.StringArrayVar(&opts.Scripts.Invariants, "invariant", nil, "before and after each burst: a query or command returning how many times a rule that must always hold is broken, or a boolean (repeatable)")
	what := "tables (TABLE.COLUMN: only that column's sum; -TABLE.COLUMN: set it aside)"
	if d == script.Redis {
		what = "key patterns"
	} else if d == script.Mongo {
		what = "collections"
	}
	fs.StringSliceVar(&opts.Watch, "watch", nil, "--effects auto: the "+what+" to measure, comma-separated ({{.RunID}} is the run's id; default: every one of the schema, on Redis required)")
	fs.StringVar(&opts.Scripts.Teardown, "teardown", "", "run once at the end, also after Ctrl-C (inline or @FILE)")
	fs.StringVar(&opts.Release, "release", string(release.Default), "how each burst's attempts are released: auto (last-byte: each attempt's first marked statement held back by its last byte, all released in one loop), gate, or last-byte")
	opts.finishFlags.register(fs, "what the run must show: safe, race, lost, max=N or range=MIN-MAX effects per burst",
		"draw the example burst of a RACE as a timeline, its steps named file:line")
	_ = c.RegisterFlagCompletionFunc("format", fixed(report.Formats()))
	opts.Shape.register(fs, f.Registry, verbShape{fires: fires, usage: map[string]string{
		"attempts":  "attempts released together in each burst, each on its own connection",
		"bursts":    "bursts to fire, each at a fresh {{.Token}}",
		"isolation": "read-uncommitted, read-committed, repeatable-read or serializable for every worker's session (default: the server's)",
	}})
	return c
}

const scriptHelp = `Each value is inline text or @FILE. The attempt script is a small subset of
pgbench/psql scripting:

  statements ending with ';'            (the last may omit it; Redis: one command per line)
  SELECT … \gset [prefix]               keep the row's columns as variables
  GET key \gset name                    (Redis) keep the reply as :name
  :name  :'name'  :"name"               a variable, as is / as a literal / as an identifier
  :ROW_COUNT                            rows returned or changed by the last statement
  \if :used = 0 … \elif … \else … \endif   comparisons = != < <= > >=, or one boolean
  \sleep 20 ms                          a deliberate gap (us, ms, s)
  \decline [reason]                     end the attempt as a deliberate "no"
  {{.Token}} {{.Burst}} {{.Attempt}} {{.RunID}}   racetest's templates

An attempt that reaches the end executed; a duplicate key (1062, 23505) declined;
a deadlock or serialization failure (1213, 1020, 40001, 40P01) is a conflict;
anything else is an error, shown with the script's file and line. The verdict
rests on --effects, read before and after each burst: it must count what the
attempt does (a row per redemption), per token or shared; a check that never
changes while attempts succeed makes the run INCONCLUSIVE. --invariant counts
what must never happen (SELECT count(*) FROM accounts WHERE balance < 0) and
can prove SAFE alone; --allowed successes requires every attempt that reported
success to have landed exactly once. racetest creates and drops nothing of its
own: it runs your statements only.

--effects auto writes no effects query: before each burst the same attempts
run one at a time on a fresh subject of their own (the solo twin), and each
burst's change of the store (rows and numeric sums per table; Redis: keys,
values and members per --watch pattern; MongoDB: documents and numeric sums
per collection) is compared with the twin's. More is RACE, less LOST, named
by table and column; twins that differ from each other, or a store that
changes while nothing runs, are INCONCLUSIVE.`

func runScript(ctx context.Context, o *scriptOptions) error {
	d, ok := script.DialectOf(o.Backend)
	if !ok || d != o.Dialect {
		if o.Backend == "" {
			return usageErrorf("racetest sql needs -b postgres or -b mysql")
		}
		return usageErrorf("racetest %s runs on %s, not %q", o.Dialect, strings.Join(script.Backends[o.Dialect], " or "), o.Backend)
	}
	// The run's own shape: the parsed flags stay as they were given.
	sh := o.Shape.Shape
	if err := checkAtLeastOne(intFlag{"attempts", sh.Attempts}, intFlag{"bursts", sh.Bursts}); err != nil {
		return err
	}
	// As run does: a burst too large for this machine is refused before
	// anything connects (it connected first, and failed 27 s later).
	if err := checkBurstMemory(sh.Attempts, o.Registry, o.Backend); err != nil {
		return err
	}
	allowed, err := runner.ParseAllowance(o.Shape.Allowed)
	if err != nil {
		return usageErrorf("--allowed: %v", err)
	}
	if o.Scripts.Effects == "" && len(o.Scripts.Invariants) > 0 && allowed != runner.DefaultAllowance {
		return usageErrorf("--allowed %s judges what --effects counts, and there is no --effects: the invariants alone judge this run (add --effects, or drop --allowed)", o.Shape.Allowed)
	}
	if script.IsAuto(o.Scripts.Effects) && allowed != runner.DefaultAllowance {
		return usageErrorf("--allowed %s judges what --effects counts, and --effects auto counts nothing: each burst must change the store as its solo twin did (drop --allowed, or count the effects with a query)", o.Shape.Allowed)
	}
	if err := attemptScripts(len(o.Scripts.Attempt), sh.Attempts); err != nil {
		return err
	}
	if err := checkDurations(durationFlag{"timeout", sh.Timeout}); err != nil {
		return err
	}
	if err := o.Shape.checkRows(sh); err != nil {
		return err
	}
	reporter, expect, err := o.finishFlags.parse()
	if err != nil {
		return err
	}
	scripts, err := o.Scripts.Load("", o.Dialect, func(n string) string { return "--" + n })
	if err != nil {
		return usageError(err)
	}
	if err := checkAuto(scripts.Auto, o.Dialect, o.Watch, o.Shape.soloEvery); err != nil {
		return err
	}
	what, advice := watchAdvice(o.Dialect)
	if err := o.Shape.checkAutoFlags(scripts.Auto, o.Watch, what, advice); err != nil {
		return err
	}
	scripts.Watch = o.Watch
	rel, err := release.New(o.Release, o.Backend)
	if err != nil {
		return usageError(fmt.Errorf("--release: %w", err))
	}
	if rel.Warning != "" {
		fmt.Fprintln(o.IO.ErrOut, "racetest: warning: "+rel.Warning)
	}
	p := scenarios.Params{RunID: scenarios.NewRunID(), Attempts: sh.Attempts, Replicas: 1,
		Isolation: sh.Isolation, Conn: sh.Conn, Dial: rel.Dial}
	if scripts.Auto {
		sh.SoloEvery = o.Shape.soloEvery
	}
	cfg := runner.NewConfig(append(append(allowed.Options(), sh.Options()...), rel.Options()...)...)
	pl := plan{
		Case: report.Case{
			Name: scripts.Attempt.Name, Scenario: suite.ScriptScenario, Backend: o.Backend, Expect: expect, Strict: o.Strict, ProveSafe: o.proveSafe(),
			Release: string(rel.Mode), Settings: map[string]string{}, Command: o.Command,
		},
		Params: p, Config: cfg, Shape: sh,
	}
	if sh.Isolation != "" {
		pl.Case.Settings["isolation"] = sh.Isolation
	}
	if scripts.Auto {
		pl.Case.Settings["effects"] = autoSetting(o.Shape.soloEvery)
	}
	if allowed != runner.DefaultAllowance {
		pl.Case.Settings["allowed"] = allowed.String()
	}
	// -q keeps the verdict line alone: what will run is not said.
	var say io.Writer = o.IO.ErrOut
	if o.IO.Quiet {
		say = io.Discard
	}
	build := scriptBuilder(say, "running your scripts", o.Backend, scripts)
	pl.Build = func(ctx context.Context, p scenarios.Params) (runner.Target, error) {
		t, err := build(ctx, p)
		if err == nil {
			// The run id is said before anything runs: a run killed
			// outright (SIGKILL) prints nothing more, and what its --setup
			// made is named with it.
			fmt.Fprintf(say, "  run id    {{.RunID}} = %s, {{.Token}} = %s-<burst>\n", p.RunID, p.RunID)
			fmt.Fprintf(say, "  %d attempts released together (%s), %d bursts; racetest creates and drops nothing of its own here\n",
				cfg.Attempts, cfg.ReleaseName(), cfg.Bursts)
		}
		return t, err
	}
	cases := execute(ctx, o.factory, []plan{pl}, nil)
	if err := scriptRunError(cases[0].Err); err != nil {
		return err
	}
	if err := nothingRan(o.Format, cases); err != nil {
		return err
	}
	return finish(ctx, o.IO, reporter, cases, reportOptions(o.IO, report.Options{Timeline: o.Timeline, Version: version()}))
}

// checkAuto validates --effects auto's flags before anything connects.
func checkAuto(auto bool, d script.Dialect, watch []string, every int) error {
	if !auto && len(watch) > 0 {
		return usageErrorf("--watch names what --effects auto measures: add --effects auto, or drop --watch")
	}
	if every < 1 {
		return usageErrorf("--solo-every must be at least 1 (got %d): 1 runs a solo twin before every burst", every)
	}
	if auto && d == script.Redis && len(watch) == 0 {
		return usageErrorf("--effects auto on Redis measures the keys --watch names: add --watch 'PATTERN,…' (e.g. --watch 'coupon:{{.RunID}}-*')")
	}
	return nil
}

// watchAdvice is what --watch names on a dialect's store, and what to
// give it: names scoped to the run with {{.RunID}}.
func watchAdvice(d script.Dialect) (what, advice string) {
	switch d {
	case script.Redis:
		return "key patterns", "name the keys the attempts write, e.g. --watch 'coupon:{{.RunID}}-*,redeemed:{{.RunID}}-*'"
	case script.Mongo:
		return "collections", "name the collections the attempts write, e.g. --watch 'redemptions_{{.RunID}}', or leave --watch out to measure every collection of the database"
	}
	return "tables", "name the tables the attempts write, e.g. --watch 'coupons_{{.RunID}},redemptions_{{.RunID}}', or leave --watch out to measure every table of the schema"
}

// autoSetting is how a report names --effects auto.
func autoSetting(every int) string {
	if every == 1 {
		return "auto (a solo twin before every burst)"
	}
	return fmt.Sprintf("auto (a solo twin before every %d bursts)", every)
}

// scriptRunError turns a script that cannot work (it does not parse, a
// statement the server refuses as written, a first burst that failed) into
// its exit code, with the script's own message: no verdict is given.
func scriptRunError(err error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return nil
	}
	var re *script.RunError
	if errors.As(err, &re) {
		if re.Script {
			return usageError(re)
		}
		return setupError(re)
	}
	var bad *scenarios.ParamError
	if errors.As(err, &bad) {
		return usageError(bad)
	}
	return nil
}

// scriptCaseError makes a script case that failed through its own fault a
// usage error (exit 2), as 'racetest sql' does.
func scriptCaseError(c report.Case) report.Case {
	var re *script.RunError
	if errors.As(c.Err, &re) && re.Script {
		c.Err = scenarios.BadParam(re)
	}
	return c
}
