package cmd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/racetest/racetest/release"
	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/script"
	"github.com/racetest/racetest/suite"
)

// ScriptOptions are the parsed flags of 'racetest sql' and 'racetest redis'.
type ScriptOptions struct {
	*Factory
	Dialect   script.Dialect
	Backend   string
	Scripts   script.Spec
	Attempts  int
	Bursts    int
	Allowed   int
	Timeout   time.Duration
	Release   string
	Expect    string
	Strict    bool
	Format    string
	Timeline  bool
	Isolation string
	Conn      scenarios.Connections
}

// NewCmdSQL builds 'racetest sql': the user's own statements on the user's
// own schema.
func NewCmdSQL(f *Factory, runF func(context.Context, *ScriptOptions) error) *cobra.Command {
	c := newCmdScript(f, script.SQL, runF)
	c.Use = "sql -b postgres|mysql --attempt SQL|@FILE --effects SQL|@FILE"
	c.Short = "Fire bursts of your own SQL script at your own schema and count, with your query, what really ran"
	c.Example = `  racetest sql -b postgres --setup @schema.sql \
    --subject "INSERT INTO coupons(code) VALUES ('{{.Token}}')" \
    --attempt @redeem.sql \
    --effects "SELECT count(*) FROM redemptions WHERE code = '{{.Token}}'" \
    --teardown @drop.sql -n 16 --bursts 200
  racetest sql -b mysql --attempt @redeem.sql --effects @count.sql --expect race`
	return c
}

// NewCmdRedis builds 'racetest redis': the user's own commands.
func NewCmdRedis(f *Factory, runF func(context.Context, *ScriptOptions) error) *cobra.Command {
	c := newCmdScript(f, script.Redis, runF)
	c.Use = "redis --attempt CMDS|@FILE --effects CMD|@FILE"
	c.Short = "Fire bursts of your own Redis commands and count, with your command, what really ran"
	c.Example = `  racetest redis --attempt @redeem.redis --effects "SCARD redeemed:{{.Token}}" \
    --teardown "EVAL \"for _,k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('DEL', k) end\" 0 redeemed:{{.RunID}}-*"`
	return c
}

// NewCmdMongo builds 'racetest mongo': the user's own database commands.
func NewCmdMongo(f *Factory, runF func(context.Context, *ScriptOptions) error) *cobra.Command {
	c := newCmdScript(f, script.Mongo, runF)
	c.Use = "mongo --attempt JSON|@FILE --effects JSON|@FILE"
	c.Short = "Fire bursts of your own MongoDB commands (JSON documents) and count, with your count, what really ran"
	c.Example = `  racetest mongo --attempt @redeem.mongo \
    --effects '{"count": "redemptions", "query": {"code": "{{.Token}}"}}' \
    --teardown '{"drop": "redemptions"}'`
	return c
}

func newCmdScript(f *Factory, d script.Dialect, runF func(context.Context, *ScriptOptions) error) *cobra.Command {
	opts := &ScriptOptions{Factory: f, Dialect: d}
	c := &cobra.Command{
		Args: cobra.NoArgs,
		Long: scriptHelp,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runScript(c.Context(), opts)
		},
	}
	fs := c.Flags()
	if d == script.SQL {
		fs.StringVarP(&opts.Backend, "backend", "b", "", "the SQL server: postgres or mysql (MySQL and MariaDB)")
		fs.StringVar(&opts.Isolation, "isolation", "", "read-uncommitted, read-committed, repeatable-read or serializable for every worker's session (default: the server's)")
	} else {
		opts.Backend = d.String()
	}
	fs.StringVar(&opts.Scripts.Setup, "setup", "", "run once before the first burst (inline or @FILE; template {{.RunID}})")
	fs.StringVar(&opts.Scripts.Subject, "subject", "", "run before each burst, outside its timing: make the subject {{.Token}} names")
	fs.StringArrayVar(&opts.Scripts.Attempt, "attempt", nil, "what each attempt runs (required; templates {{.Token}} {{.Burst}} {{.Attempt}} {{.RunID}}); repeat it for one script per transaction: attempt i runs the i-th, round again past the last")
	fs.StringVar(&opts.Scripts.Effects, "effects", "", "after each burst: a query or command returning how many times the action took effect (required)")
	fs.StringVar(&opts.Scripts.Teardown, "teardown", "", "run once at the end, also after Ctrl-C (inline or @FILE)")
	fs.IntVarP(&opts.Attempts, "attempts", "n", runner.DefaultAttempts, "attempts released together in each burst, each on its own connection")
	fs.IntVar(&opts.Bursts, "bursts", runner.DefaultBursts, "bursts to fire, each at a fresh {{.Token}}")
	fs.IntVar(&opts.Allowed, "allowed", runner.DefaultAllowed, "effects per burst that are correct")
	fs.DurationVar(&opts.Timeout, "timeout", runner.DefaultTimeout, "per-attempt timeout; an attempt past it counts as unknown")
	fs.StringVar(&opts.Release, "release", string(release.Default), "how each burst's attempts are released: auto (last-byte: each attempt's first marked statement held back by its last byte, all released in one loop), gate, or last-byte")
	fs.StringVar(&opts.Expect, "expect", "safe", "what the run must show: safe, race, or max=N effects per burst")
	fs.BoolVar(&opts.Strict, "strict", false, "fail (exit 4) when the bursts did not overlap enough to prove anything")
	fs.StringVarP(&opts.Format, "format", "o", "table", "output format: "+strings.Join(report.Formats(), ", "))
	_ = c.RegisterFlagCompletionFunc("format", fixed(report.Formats()))
	fs.BoolVar(&opts.Timeline, "timeline", true, "draw the example burst of a RACE as a timeline, its steps named file:line")
	registerConn(fs, f.Registry, &opts.Conn)
	return c
}

const scriptHelp = `Each value is inline text or @FILE. The attempt script is a small subset of
pgbench/psql scripting:

  statements ending with ';'            (SQL; Redis: one command per line)
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
rests on --effects. racetest creates and drops nothing of its own: it runs
your statements only.`

func runScript(ctx context.Context, o *ScriptOptions) error {
	d, ok := script.DialectOf(o.Backend)
	if !ok || d != o.Dialect {
		if o.Backend == "" {
			return usageErrorf("racetest sql needs -b postgres or -b mysql")
		}
		return usageErrorf("racetest %s runs on %s, not %q", o.Dialect, strings.Join(script.Backends[o.Dialect], " or "), o.Backend)
	}
	for name, n := range map[string]int{"attempts": o.Attempts, "bursts": o.Bursts} {
		if n < 1 {
			return usageErrorf("--%s must be at least 1 (got %d)", name, n)
		}
	}
	if o.Allowed < 0 {
		return usageErrorf("--allowed cannot be negative (got %d)", o.Allowed)
	}
	if err := attemptScripts(len(o.Scripts.Attempt), o.Attempts); err != nil {
		return err
	}
	if err := checkDurations(map[string]time.Duration{"timeout": o.Timeout}); err != nil {
		return err
	}
	reporter, err := report.Lookup(o.Format)
	if err != nil {
		return usageError(err)
	}
	expect, err := report.ParseExpect(o.Expect)
	if err != nil {
		return usageError(err)
	}
	scripts, err := o.Scripts.Load("", o.Dialect, func(n string) string { return "--" + n })
	if err != nil {
		return usageError(err)
	}
	rel, err := release.New(o.Release, o.Backend)
	if err != nil {
		return usageError(fmt.Errorf("--release: %w", err))
	}
	if rel.Warning != "" {
		fmt.Fprintln(o.IO.ErrOut, "racetest: warning: "+rel.Warning)
	}
	p := scenarios.Params{RunID: scenarios.NewRunID(), Attempts: o.Attempts, Replicas: 1,
		Isolation: o.Isolation, Conn: o.Conn, Dial: rel.Dial}
	cfg := runner.NewConfig(runner.Attempts(o.Attempts), runner.Bursts(o.Bursts),
		runner.Allowed(o.Allowed), runner.Timeout(o.Timeout))
	for _, opt := range rel.Options() {
		opt(&cfg)
	}
	name := scripts.Attempt.Name
	c := report.Case{
		Name: name, Scenario: "script", Backend: o.Backend, Expect: expect, Strict: o.Strict,
		Release: string(rel.Mode), Settings: map[string]string{},
	}
	if o.Isolation != "" {
		c.Settings["isolation"] = o.Isolation
	}
	c.Result, c.Err = runScripts(ctx, o.Factory, o.Backend, p, scripts, cfg)
	if err := scriptRunError(c.Err); err != nil {
		return err
	}
	if o.Format == "table" && c.Err != nil && (c.Result == nil || len(c.Result.Bursts) == 0) && !errors.Is(c.Err, context.Canceled) {
		return setupError(c.Err)
	}
	cases := []report.Case{c}
	if err := reporter(o.IO.Out, cases, report.Options{
		Color: o.IO.Color(), Timeline: o.Timeline, Version: version(),
	}); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	strictHint(o.IO.ErrOut, cases)
	return verdictError(ctx, cases)
}

// runScripts opens the server, says on stderr what it will run, and runs.
func runScripts(ctx context.Context, f *Factory, backend string, p scenarios.Params, sc script.Scripts, cfg runner.Config) (*runner.Result, error) {
	store, err := script.Open(ctx, backend, p)
	if err != nil {
		return nil, err
	}
	t, err := script.New(store, sc, p.RunID)
	if err != nil {
		store.Close()
		return nil, err
	}
	defer t.Close()
	fmt.Fprintf(f.IO.ErrOut, "racetest: running your scripts on %s\n", store.Where())
	for _, line := range sc.Describe() {
		fmt.Fprintln(f.IO.ErrOut, "  "+line)
	}
	fmt.Fprintf(f.IO.ErrOut, "  %d attempts released together (%s), %d bursts, token {{.Token}} = %s-<burst>; racetest creates and drops nothing of its own here\n",
		cfg.Attempts, cfg.ReleaseName(), cfg.Bursts, p.RunID)
	pr := newProgress(f.IO)
	var done func()
	cfg.Progress, done = pr.track(sc.Attempt.Name, cfg.Bursts)
	res, err := runner.RunConfig(ctx, t, cfg)
	done()
	pr.wait()
	return res, err
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

// scriptFactory returns the factory a suite runs with: f, plus, when the
// suite has script cases, a "script" scenario on their backends whose build
// looks each case's scripts up by its run id.
func scriptFactory(f *Factory, plans []suite.Plan) *Factory {
	scripts := map[string]script.Scripts{}
	for _, p := range plans {
		if p.Script != nil {
			scripts[p.Params.RunID] = p.Script.Scripts
		}
	}
	if len(scripts) == 0 {
		return f
	}
	reg := f.Registry.Clone()
	reg.AddScenario(scenarios.Spec{Name: suite.ScriptScenario, Lesson: "your own statements: the effects query counts what happened",
		Expect: func(scenarios.Params) scenarios.Expectation { return scenarios.ExpectSafe }})
	for _, d := range []script.Dialect{script.SQL, script.Redis, script.Mongo} {
		for _, b := range script.Backends[d] {
			if _, err := reg.Backend(b); err != nil {
				reg.AddBackend(scenarios.Backend{Name: b, Server: true})
			}
			reg.Register(suite.ScriptScenario, b, func(ctx context.Context, p scenarios.Params) (runner.Target, error) {
				sc, ok := scripts[p.RunID]
				if !ok {
					return nil, fmt.Errorf("no script case has run id %s", p.RunID)
				}
				store, err := script.Open(ctx, b, p)
				if err != nil {
					return nil, err
				}
				fmt.Fprintf(f.IO.ErrOut, "racetest: running scripts on %s\n", store.Where())
				for _, line := range sc.Describe() {
					fmt.Fprintln(f.IO.ErrOut, "  "+line)
				}
				return script.New(store, sc, p.RunID)
			})
		}
	}
	return &Factory{IO: f.IO, Registry: reg}
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
