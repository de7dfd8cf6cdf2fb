package suite

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/racetest/racetest/release"
	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/runplan"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/script"
)

// Scripts are a case of the user's own statements or commands, as
// 'racetest sql' and 'racetest redis' run them: each field inline text or
// @FILE, a file relative to the suite file.
type Scripts struct {
	Setup   string `yaml:"setup"`
	Subject string `yaml:"subject"`
	// Attempt is one script for every attempt, or a list: one script per
	// transaction, attempt i running the i-th (round again past the end).
	Attempt  Attempts `yaml:"attempt"`
	Effects  string   `yaml:"effects"`
	Teardown string   `yaml:"teardown"`
	// Invariant lists queries (or commands) that must hold after every
	// burst: each returns how many times it is broken, or a boolean.
	Invariant []string `yaml:"invariant"`
	// Allowed is how many effects per burst are correct: N (default 1),
	// MIN-MAX, or successes (each success landed exactly once).
	Allowed *Allowance `yaml:"allowed"`
	// Watch and SoloEvery shape effects: auto (racetest sql --watch,
	// --solo-every): the tables (Redis: key patterns, MongoDB:
	// collections) to measure, and how often a solo twin runs.
	Watch     []string `yaml:"watch"`
	SoloEvery *int     `yaml:"solo_every"`
}

// Attempts is an attempt: field, one script or a list of them.
type Attempts []string

// UnmarshalYAML reads one script (a string) or a list of scripts.
func (a *Attempts) UnmarshalYAML(unmarshal func(any) error) error {
	var one string
	if err := unmarshal(&one); err == nil {
		*a = Attempts{one}
		return nil
	}
	var many []string
	if err := unmarshal(&many); err != nil {
		return fmt.Errorf("attempt: write one script (inline or @FILE), or a list of them, one per transaction")
	}
	*a = many
	return nil
}

// autoShape checks effects: auto's watch and solo_every, and that no
// allowance is given (the twins judge, nothing is counted): how often a
// solo twin runs (0 when the case counts its effects).
func (c *checker) autoShape(path string, auto bool, needWatch bool, watch []string, soloEvery *int, allowed bool) int {
	if auto && allowed {
		c.fail(path+".allowed", "allowed judges what effects counts, and effects: auto counts nothing: each burst must change the store as its solo twin did (remove allowed, or count the effects with a query)")
	}
	if !auto {
		if len(watch) > 0 || soloEvery != nil {
			c.fail(path, "watch and solo_every shape effects: auto: set effects: auto, or remove them")
		}
		return 0
	}
	if needWatch && len(watch) == 0 {
		c.fail(path+".watch", "effects: auto on Redis measures the keys watch names: add watch: [\"coupon:{{.RunID}}-*\"]")
	}
	// An empty list or name is not "every table": it names nothing.
	if watch != nil && !needWatch && len(watch) == 0 {
		c.fail(path+".watch", "watch: [] names nothing: name the tables (collections) the attempts write, e.g. watch: [\"coupons_{{.RunID}}\"], or remove watch to measure every one")
	}
	for _, w := range watch {
		if strings.TrimSpace(w) == "" {
			c.fail(path+".watch", "watch: an empty name: name each table (key pattern, collection) the attempts write, e.g. watch: [\"coupons_{{.RunID}}\"]")
			break
		}
	}
	every := 1
	if soloEvery != nil {
		if every = *soloEvery; every < 1 {
			c.fail(path+".solo_every", "solo_every must be at least 1 (got %d): 1 runs a solo twin before every burst", every)
		}
	}
	return every
}

// ScriptCase is a script case ready to run: its parsed scripts.
type ScriptCase struct {
	Scripts script.Scripts
}

// ScriptScenario is the scenario name a script case's plan carries.
const ScriptScenario = "script"

// script returns k's scripts, their key and dialect; key is "" for a
// case that is not a script case.
func (k *Case) script() (key string, s *Scripts, d script.Dialect) {
	switch {
	case k.SQL != nil:
		return "sql", k.SQL, script.SQL
	case k.Redis != nil:
		return "redis", k.Redis, script.Redis
	case k.Mongo != nil:
		return "mongo", k.Mongo, script.Mongo
	}
	return "", nil, 0
}

func (c *checker) scriptCase(path string, k *Case, sh shape, p *Plan) {
	key, s, d := k.script()
	sp := path + "." + key
	if scripts := btoi(k.SQL != nil) + btoi(k.Redis != nil) + btoi(k.Mongo != nil); scripts > 1 || k.HTTP != nil || k.Scenario != "" {
		c.fail(path, "a case is one of: a scenario on a backend, an http target, sql:, redis: or mongo: scripts — keep one")
		return
	}
	backend := k.Backend
	switch {
	case d != script.SQL && backend == "":
		backend = script.Backends[d][0]
	case backend == "" || !slices.Contains(script.Backends[d], backend):
		c.fail(path+".backend", "a %s: case runs on backend %s (got %q)", key, strings.Join(script.Backends[d], " or "), backend)
		return
	}
	spec := script.Spec{Setup: s.Setup, Subject: s.Subject, Attempt: s.Attempt, Effects: s.Effects, Teardown: s.Teardown,
		Invariants: s.Invariant}
	scripts, err := spec.Load(c.o.Dir, d, func(n string) string { return sp + "." + n })
	if err != nil {
		// The message names the script's own file:line:col, and the
		// field it came from; the suite's line is that field's.
		at := sp
		if fe := (*script.FieldError)(nil); errors.As(err, &fe) {
			at = sp + "." + fe.Field
		}
		c.fail(at, "%v", err)
		return
	}
	every := c.autoShape(sp, scripts.Auto, d == script.Redis, s.Watch, s.SoloEvery, s.Allowed != nil)
	scripts.Watch = s.Watch
	if len(s.Attempt) > sh.Attempts {
		c.fail(sp+".attempt", "%d attempt scripts but attempts: %d: each script is one attempt's transaction, so give attempts: %d or more (with more attempts than scripts they go round again)",
			len(s.Attempt), sh.Attempts, len(s.Attempt))
		return
	}
	if k.Variant != nil || k.Engine != nil || k.Gap != nil || k.Latency != nil || k.TTL != nil {
		c.fail(path, "a script case takes the shape of its bursts (attempts, bursts, timeout, isolation, release), not variant, engine, gap, latency or ttl")
		return
	}
	if k.Expect == "catalog" {
		c.fail(path+".expect", "a script case has no catalog expectation: write expect: safe, race, or max_effects: N")
		return
	}
	allowed, ok := c.allowance(sp+".allowed", s.Allowed)
	if !ok {
		return
	}
	expect, ok := c.expectation(path, k.Expectation, report.Expect{}, sh)
	if !ok {
		return
	}
	params := scenarios.Params{RunID: scenarios.NewRunID(), Attempts: sh.Attempts, Replicas: 1}
	if d == script.SQL {
		params.Isolation = sh.Isolation
	}
	if k.ReadConnection != "" {
		c.fail(path+".read_connection", "a script case runs on one server and reads no replica: remove read_connection")
		return
	}
	conn, ok := c.connection(path, k.Connection, backend, "the case")
	if !ok {
		return
	}
	conn.into(&params.Conn)
	p.Conn = conn.Conn
	// A script case runs one wave of its scripts, on one replica: the
	// knobs of a scenario's replicas (replicas, waves, deploy), its
	// namespaced objects (keep: the scripts make and drop their own) and
	// its retries reach no script case.
	run := sh.Shape
	run.Replicas, run.Waves, run.Deploy, run.Keep, run.Retries = runner.DefaultReplicas, runner.DefaultWaves, false, false, 0
	cfg := runner.NewConfig(append(allowed.Options(), run.Options()...)...)
	rel, err := release.New(sh.release, backend)
	if err != nil {
		c.fail(path+".release", "%v", err)
		return
	}
	params.Dial = rel.Dial
	for _, opt := range rel.Options() {
		opt(&cfg)
	}
	cfg.SoloEvery = every
	if !c.prove(path, k, expect, &cfg, p) {
		return
	}
	rules, ok := c.serverRules(path, k.OnServer, sh)
	if !ok {
		return
	}
	name := k.Name
	if name == "" {
		name = fmt.Sprintf("%s %s", key, scripts.Attempt.Name)
	}
	p.Script = &ScriptCase{Scripts: scripts}
	p.Params, p.Config, p.Shape, p.OnServer = params, cfg, run, rules
	p.Case = report.Case{Name: name, Scenario: ScriptScenario, Backend: backend, Expect: expect, Strict: c.strict(k),
		Release: string(rel.Mode), Settings: runplan.Settings(backend, params, cfg)}
}

// allowance reads a case's allowed: (runner.DefaultAllowed when absent).
func (c *checker) allowance(path string, a *Allowance) (runner.Allowance, bool) {
	if a == nil {
		return runner.Allowance{Min: runner.DefaultRequired, Max: runner.DefaultAllowed}, true
	}
	al, err := runner.ParseAllowance(a.Text)
	if err != nil {
		c.fail(path, "%v", err)
		return al, false
	}
	return al, true
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
