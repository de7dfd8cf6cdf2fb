package suite

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/racetest/racetest/release"
	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/runplan"
	"github.com/racetest/racetest/scenarios"
)

// Options are what Plans needs besides the file.
type Options struct {
	// Conn are the connections given on the command line; a case's own
	// connection is the only thing that wins over them.
	Conn scenarios.Connections
	// Env reads the RACETEST_* variables a server backend falls back to.
	Env LookupEnv
	// Strict makes every INCONCLUSIVE case fail its expectation, even one
	// that allows it.
	Strict bool
	// AllowInconclusive lets INCONCLUSIVE cases pass. Without it (or a
	// case's allow_inconclusive), a gate fails a case that proved nothing.
	AllowInconclusive bool
	// Keep leaves every run's namespaced objects in the store.
	Keep bool
	// Dir is the directory relative paths in the suite (body_file) are
	// read from: the suite file's own.
	Dir string
	// Local overrides a server backend's standard local address (its
	// Connection.Default), for listings and messages ("default" leaves the
	// connection empty: the backend itself dials it).
	Local map[string]string
}

// Plan is one case ready to run.
type Plan struct {
	// Run is the case as reports show it before it ran, its parameters and
	// its shape; its Catalog says the case expects what the catalog's table
	// says, which the command resolves again once the run names its server.
	runplan.Run
	// HTTP is set for an HTTP case; Params then holds no scenario, and
	// Config the shape (attempts, bursts, timeout).
	HTTP *HTTP
	// Script is set for a script case (sql: or redis:).
	Script *ScriptCase
	// Prove is the violation rate the case must prove it stays under, at
	// 95% (0: none asked; Config.Bursts was computed from it).
	Prove float64
	// OnServer replaces Case.Expect once the run names its server.
	OnServer []ServerRule
	// Conn is the connection the case uses, redacted, and where it came from.
	Conn Conn
	// ReadConn is its read endpoint (a replica), for the clustered
	// scenarios; zero for the others.
	ReadConn Conn
	// Line and Column are where the case starts in the file.
	Line, Column int
}

// ServerRule is an expectation for the servers whose name contains Match.
type ServerRule struct {
	Match  string
	Expect report.Expect
	Why    string
}

// Conn is a case's connection as --list shows it.
type Conn struct {
	// Value is redacted: no password ever leaves the suite.
	Value string
	// Source says where it came from: "suite defaults", "case",
	// "--mysql-dsn", "env RACETEST_MYSQL_DSN".
	Source string
}

// LocalDefault is the word that accepts a backend's standard local address.
const LocalDefault = "default"

// Plans checks the suite against the catalog and the connections at hand,
// and returns one plan per case, in file order. It reports every problem
// it finds, each at its place in the file; a suite with any problem gets
// no plans.
func (s *Suite) Plans(reg *scenarios.Registry, o Options) ([]Plan, error) {
	if o.Env == nil {
		o.Env = func(string) (string, bool) { return "", false }
	}
	c := &checker{s: s, reg: reg, o: o}
	c.file()
	if len(c.errs) > 0 {
		return nil, c.errs
	}
	return c.plans, nil
}

// checker collects a suite's problems while it builds the plans.
type checker struct {
	s     *Suite
	reg   *scenarios.Registry
	o     Options
	errs  Errors
	plans []Plan
}

func (c *checker) fail(path, format string, a ...any) {
	if len(c.errs) < maxErrors {
		c.errs = append(c.errs, c.s.errorAt(path, format, a...))
	}
}

func (c *checker) file() {
	f := &c.s.File
	if f.Version != nil && *f.Version != 1 {
		c.fail("$.version", "unknown suite version %d (this racetest reads version 1)", *f.Version)
	}
	c.shape("$.defaults", f.Defaults.Shape)
	if f.Defaults.Variant != nil {
		c.fail("$.defaults.variant", "variant belongs to one case's scenario (for-update, one-active, …): move it into the case")
	}
	if f.Defaults.Fault != nil {
		c.fail("$.defaults.fault", "fault belongs to one case's clustered scenario (failover-lock): move it into the case")
	}
	if len(f.Cases) == 0 {
		c.fail("$", "the suite has no cases: add a list under cases:")
		return
	}
	seen := map[string]string{}
	for i := range f.Cases {
		path := fmt.Sprintf("$.cases[%d]", i)
		for _, k := range c.expand(path, &f.Cases[i]) {
			p, ok := c.plan(path, k)
			if !ok {
				continue
			}
			key := p.Case.Backend + "\x00" + p.Case.Name
			if prev, dup := seen[key]; dup {
				c.fail(path, "two cases on %s are both named %q (the other is %s): give one a name: so reports can tell them apart",
					p.Case.Backend, p.Case.Name, prev)
				continue
			}
			seen[key] = fmt.Sprintf("at line %d", p.Line)
			c.plans = append(c.plans, p)
		}
	}
}

// expand turns a demo: true case into one case per variant the catalog
// demonstrates for its scenario; any other case is itself.
func (c *checker) expand(path string, k *Case) []*Case {
	if !k.Demo {
		return []*Case{k}
	}
	spec, err := c.reg.Scenario(k.Scenario)
	if err != nil || k.HTTP != nil {
		return []*Case{k} // plan reports the problem
	}
	bad := false
	for _, set := range []struct {
		key string
		on  bool
	}{
		{"name", k.Name != ""}, {"replicas", k.Replicas != nil}, {"waves", k.Waves != nil}, {"deploy", k.Deploy != nil},
		{"variant", k.Variant != nil}, {"max_effects", k.MaxEffects != nil}, {"prove", k.Prove != ""},
		{"expect", k.Expect != "" && k.Expect != "catalog"},
	} {
		if set.on {
			c.fail(path+"."+set.key, "demo: true runs the catalog's own variants of %s, with their names and expectations: remove %s",
				spec.Name, set.key)
			bad = true
		}
	}
	if bad {
		return nil
	}
	demos := spec.Demo
	if len(demos) == 0 {
		demos = []scenarios.DemoCase{{}}
	}
	out := make([]*Case, 0, len(demos))
	for _, d := range demos {
		v := *k
		v.Demo, v.Name = false, spec.Name
		if d.Label != "" {
			v.Name += " (" + d.Label + ")"
		}
		if d.Replicas > 0 {
			v.Replicas = &d.Replicas
		}
		if d.Waves > 0 {
			v.Waves, v.Deploy = &d.Waves, &d.Deploy
		}
		if d.Variant != "" {
			v.Variant = &d.Variant
		}
		if d.Gap > 0 && k.Gap == nil && c.s.File.Defaults.Gap == nil {
			gap := d.Gap.String()
			v.Gap = &gap
		}
		out = append(out, &v)
	}
	return out
}

// plan checks one case and builds its plan; ok is false when it has a
// problem (already reported).
func (c *checker) plan(path string, k *Case) (Plan, bool) {
	before := len(c.errs)
	line, col := c.s.position(path)
	p := Plan{Line: line, Column: col}
	// Ifs, not a switch: gremlins v0.6.0 never mutates a switch's case
	// expressions, and these decide what kind of case a file holds.
	if k.HTTP != nil && (k.Scenario != "" || k.Backend != "") {
		c.fail(path, "a case is either a scenario on a backend or an http target, not both: remove scenario/backend or http")
		return p, false
	}
	if k.SQL != nil || k.Redis != nil || k.Mongo != nil {
		c.shape(path, k.Shape)
		c.scriptCase(path, k, c.merged(k.Shape), &p)
		return p, len(c.errs) == before
	}
	if k.HTTP == nil && k.Scenario == "" {
		c.fail(path, "the case names no scenario: add scenario: (one of %s), an http: target, or sql:, redis: or mongo: scripts",
			strings.Join(scenarioNames(c.reg), ", "))
		return p, false
	}
	c.shape(path, k.Shape)
	sh := c.merged(k.Shape)
	if sh.Deploy && sh.Waves < 2 {
		c.fail(path, "deploy restarts replicas between waves: add waves: 2 or more")
	}
	if k.HTTP != nil {
		if k.Release != nil {
			c.fail(path+".release", "an HTTP case releases its requests by http.release (barrier, last-byte, single-packet, naive): move it there")
		}
		c.httpCase(path, k, sh, &p)
	} else {
		c.scenarioCase(path, k, sh, &p)
	}
	return p, len(c.errs) == before
}

func (c *checker) scenarioCase(path string, k *Case, sh shape, p *Plan) {
	spec, err := c.reg.Scenario(k.Scenario)
	if err != nil {
		c.fail(path+".scenario", "%v", err)
		return
	}
	backend := k.Backend
	if backend == "" {
		backend = "memory"
	}
	b, err := c.reg.Backend(backend)
	if err != nil {
		c.fail(path+".backend", "%v", err)
		return
	}
	if _, err := c.reg.Factory(spec.Name, b.Name); err != nil {
		c.fail(path+".backend", "%v", err)
		return
	}
	c.applicable(path, k.Shape, b)
	// A default knob reaches only the backends it means something to.
	if len(b.Isolations) == 0 {
		sh.Isolation = ""
		sh.Retries = 0
	}
	if len(b.Engines) == 0 {
		sh.Engine = ""
	}
	var conn scenarios.Connections
	if b.Server {
		resolved, ok := c.connection(path, k.Connection, b.Name, "the case")
		if !ok {
			return
		}
		resolved.into(&conn)
		p.Conn = resolved.Conn
		read, ok := c.readConnection(path, k, b, spec)
		if !ok {
			return
		}
		read.into(&conn)
		p.ReadConn = read.Conn
	} else {
		for _, set := range []struct{ key, value string }{{"connection", k.Connection}, {"read_connection", k.ReadConnection}} {
			if set.value != "" {
				c.fail(path+"."+set.key, "backend %s runs in racetest's own process and takes no connection", b.Name)
			}
		}
	}
	catalog := k.MaxEffects == nil && (k.Expect == "" || k.Expect == "catalog")
	var expect report.Expect
	if !catalog {
		var ok bool
		if expect, ok = c.expectation(path, k.Expectation, report.Expect{}, sh); !ok {
			return
		}
	}
	name := k.Name
	if name == "" {
		name = defaultName(spec.Name, k.Shape)
	}
	run, err := runplan.Build(c.reg, runplan.Request{
		Scenario: spec.Name, Backend: b.Name, Name: name, Shape: sh.run(c.o.Keep, conn),
		Release: cmp.Or(sh.release, string(release.Default)),
		Expect:  expect, Catalog: catalog, Strict: c.strict(k),
	})
	if err != nil {
		field := "backend"
		if fe := new(runplan.FieldError); errors.As(err, &fe) {
			field = fe.Field
		}
		c.fail(path+"."+field, "%v", err)
		return
	}
	if !c.prove(path, k, run.Case.Expect, &run.Config, p) {
		return
	}
	rules, ok := c.serverRules(path, k.OnServer, sh)
	if !ok {
		return
	}
	if e := run.Case.Expect; e.Kind == report.ExpectMax && e.Max >= sh.Attempts*sh.Waves {
		c.fail(path+".max_effects", "max_effects %d can never fail: a burst makes at most %d attempts; lower it below %d",
			e.Max, sh.Attempts*sh.Waves, sh.Attempts*sh.Waves)
		return
	}
	p.Run, p.OnServer = run, rules
}

// strict reports whether an INCONCLUSIVE run fails the case: by default,
// since a gate must not pass what proved nothing.
func (c *checker) strict(k *Case) bool {
	return c.o.Strict || !(c.o.AllowInconclusive || k.AllowInconclusive)
}

// expectation reads a case's expectation; catalog is what the catalog
// predicts for it (empty for an HTTP case, which has no catalog).
func (c *checker) expectation(path string, e Expectation, catalog report.Expect, sh shape) (report.Expect, bool) {
	// Ifs, not a switch: gremlins v0.6.0 never mutates a switch's case
	// expressions, and these decide which expectation a run is held to.
	if e.MaxEffects != nil && e.Expect != "" && e.Expect != "max" {
		c.fail(path+".max_effects", "expect: %s and max_effects: %d contradict each other: keep one", e.Expect, *e.MaxEffects)
		return report.Expect{}, false
	}
	if e.MaxEffects != nil && *e.MaxEffects < 1 {
		c.fail(path+".max_effects", "max_effects %d can never be met: every burst of a do-once pattern lets at least one attempt through (use max_effects: 1 or expect: safe)", *e.MaxEffects)
		return report.Expect{}, false
	}
	if e.MaxEffects != nil {
		return report.Expect{Kind: report.ExpectMax, Max: *e.MaxEffects}, true
	}
	switch e.Expect {
	case "safe", "race", "lost":
		return report.Expect{Kind: report.ExpectKind(e.Expect)}, true
	case "", "catalog":
		if catalog.Kind == "" {
			return report.Expect{Kind: report.ExpectSafe}, true
		}
		return catalog, true
	case "max":
		c.fail(path+".expect", "expect: max needs max_effects: N")
	default:
		msg := fmt.Sprintf("unknown expectation %q (want catalog, safe, race, lost, or max_effects: N)", e.Expect)
		if sug := suggest(e.Expect, []string{"catalog", "safe", "race", "lost"}); sug != "" {
			msg = fmt.Sprintf("unknown expectation %q — did you mean %q? (want catalog, safe, race, or max_effects: N)", e.Expect, sug)
		}
		c.fail(path+".expect", "%s", msg)
	}
	return report.Expect{}, false
}

// prove sets the burst count a "prove: 1%" case needs.
func (c *checker) prove(path string, k *Case, expect report.Expect, cfg *runner.Config, p *Plan) bool {
	if k.Prove == "" {
		return true
	}
	bound, err := parseRate(k.Prove)
	if err != nil {
		c.fail(path+".prove", "%v", err)
		return false
	}
	if k.Bursts != nil {
		c.fail(path+".bursts", "bursts and prove contradict each other: prove %s runs the %d bursts it needs; remove bursts",
			k.Prove, report.BurstsFor(bound))
		return false
	}
	if expect.Kind != report.ExpectSafe {
		c.fail(path+".prove", "prove bounds the rate of violations of a case expected safe; this case expects %s", expect)
		return false
	}
	cfg.Bursts = report.BurstsFor(bound)
	cfg.StopOnViolation = true
	cfg.TopUp = true
	p.Prove = bound
	return true
}

// parseRate reads "1%", "0.5 %" or 0.01 as a rate strictly between 0 and 1.
func parseRate(s string) (float64, error) {
	t := strings.TrimSpace(s)
	pct := strings.HasSuffix(t, "%")
	t = strings.TrimSpace(strings.TrimSuffix(t, "%"))
	x, err := strconv.ParseFloat(t, 64)
	if err != nil {
		return 0, fmt.Errorf("prove %q is not a rate: write a percentage (1%%) or a fraction (0.01)", s)
	}
	if pct {
		x /= 100
	}
	if !(x > 0 && x < 1) {
		return 0, fmt.Errorf("prove %q must be a rate strictly between 0%% and 100%%: no number of bursts proves a bound of 0, and 100%% needs none", s)
	}
	return x, nil
}

func (c *checker) serverRules(path string, rules []ServerExpect, sh shape) ([]ServerRule, bool) {
	var out []ServerRule
	ok := true
	for i, r := range rules {
		rp := fmt.Sprintf("%s.on_server[%d]", path, i)
		if strings.TrimSpace(r.Match) == "" {
			c.fail(rp, "on_server needs match: (part of the server's name as reports show it, e.g. FerretDB)")
			ok = false
			continue
		}
		if strings.TrimSpace(r.Why) == "" {
			c.fail(rp, "on_server for %q needs why: — a different expectation on one server is a finding; say what the server does", r.Match)
			ok = false
			continue
		}
		if r.Expect == "" && r.MaxEffects == nil {
			c.fail(rp, "on_server for %q needs expect: or max_effects:", r.Match)
			ok = false
			continue
		}
		if r.Expect == "catalog" {
			c.fail(rp+".expect", "on_server replaces the catalog's expectation; expect: catalog here would change nothing")
			ok = false
			continue
		}
		e, good := c.expectation(rp, r.Expectation, report.Expect{}, sh)
		if !good {
			ok = false
			continue
		}
		out = append(out, ServerRule{Match: r.Match, Expect: e, Why: r.Why})
	}
	return out, ok
}

// connection resolves the connection of a server backend: the case's own,
// then the command line, then the suite's defaults, then the environment.
// "default" at any of these accepts the standard local address; nothing at
// all is an error, so that a gate never quietly tests a server nobody chose.
func (c *checker) connection(path, own, backend, who string) (resolved, bool) {
	b, err := c.reg.Backend(backend)
	if err != nil || b.Conn == nil {
		c.fail(path, "racetest suite does not know how to connect to backend %s", backend)
		return resolved{}, false
	}
	local := cmp.Or(c.o.Local[backend], b.Conn.Default, "its standard local address")
	if r, ok := c.resolve(b.Conn, own, local); ok {
		return r, true
	}
	key, flag := b.Conn.Key, "--"+b.Conn.Flag
	c.fail(path+".backend", "%s runs on %s, but no %s connection is configured: set defaults.connections.%s "+
		"(e.g. ${%s}), %s, or env %s; write %s: %s to accept %s",
		who, backend, backend, key, b.Conn.Env, flag, b.Conn.Env, key, LocalDefault, Redact(local))
	return resolved{}, false
}

// readConnection resolves the read endpoint (a replica) of a case whose
// scenario needs one, in connection's order; a replica has no standard
// local address, so "default" is refused and nothing at all is an error
// that says how to start one.
func (c *checker) readConnection(path string, k *Case, b scenarios.Backend, spec scenarios.Spec) (resolved, bool) {
	rc := b.ReadConn
	if spec.Topology == "" || rc == nil {
		if k.ReadConnection != "" {
			c.fail(path+".read_connection", "%s on %s reads no replica: remove read_connection (it is for the clustered scenarios, see 'racetest list')", spec.Name, b.Name)
			return resolved{}, false
		}
		return resolved{}, true // nothing to set
	}
	key, flag := rc.Key, "--"+rc.Flag
	if r, ok := c.resolve(rc, k.ReadConnection, ""); ok {
		if r.local {
			c.fail(path+".read_connection", "%s names the replica %q, but a replica has no standard local address: name it (%s, defaults.connections.%s or env %s)",
				r.from, LocalDefault, flag, key, rc.Env)
			return resolved{}, false
		}
		return r, true
	}
	c.fail(path+".backend", "%s on %s reads a replica, but no %s connection is configured: set defaults.connections.%s "+
		"(e.g. ${%s}), the case's read_connection, %s, or env %s; 'scripts/cluster.sh start %s' starts a primary with a replica and prints both",
		spec.Name, b.Name, key, key, rc.Env, flag, rc.Env, rc.Cluster)
	return resolved{}, false
}

// resolve takes the first of the case's own value, the command line, the
// suite's defaults and the environment that is set; "default" resolves to
// an empty value (the backend dials local itself), shown as local.
func (c *checker) resolve(sc *scenarios.Connection, own, local string) (resolved, bool) {
	candidates := []struct{ value, source string }{
		{own, "case"},
		{c.o.Conn.Get(sc.Key), "--" + sc.Flag},
		{c.s.File.Defaults.Connections[sc.Key], "suite defaults"},
	}
	if v, _ := c.o.Env(sc.Env); v != "" {
		candidates = append(candidates, struct{ value, source string }{v, "env " + sc.Env})
	}
	for _, cand := range candidates {
		switch cand.value {
		case "":
			continue
		case LocalDefault:
			return resolved{key: sc.Key, local: true, from: cand.source, Conn: Conn{Value: Redact(local), Source: cand.source + ": default local address"}}, true
		}
		return resolved{key: sc.Key, value: cand.value, from: cand.source, Conn: Conn{Value: Redact(cand.value), Source: cand.source}}, true
	}
	return resolved{}, false
}

type resolved struct {
	value string
	key   string // the connection's key in scenarios.Connections
	local bool   // "default": the standard local address
	from  string // where it was found ("case", "suite defaults", …)
	Conn
}

// into sets the resolved connection in conn; a zero resolved sets nothing.
func (r resolved) into(conn *scenarios.Connections) {
	if r.key != "" {
		conn.Set(r.key, r.value)
	}
}

func defaultName(scenario string, sh Shape) string {
	var knobs []string
	add := func(k, v string) { knobs = append(knobs, k+"="+v) }
	if sh.Replicas != nil {
		add("replicas", strconv.Itoa(*sh.Replicas))
	}
	if sh.Waves != nil {
		add("waves", strconv.Itoa(*sh.Waves))
	}
	if sh.Deploy != nil && *sh.Deploy {
		knobs = append(knobs, "deploy")
	}
	for _, kv := range []struct {
		k string
		v *string
	}{{"variant", sh.Variant}, {"fault", sh.Fault}, {"isolation", sh.Isolation}, {"engine", sh.Engine}, {"gap", sh.Gap}} {
		if kv.v != nil && *kv.v != "" {
			add(kv.k, *kv.v)
		}
	}
	if len(knobs) == 0 {
		return scenario
	}
	return scenario + " (" + strings.Join(knobs, ", ") + ")"
}

func scenarioNames(r *scenarios.Registry) []string {
	var names []string
	for _, s := range r.Scenarios() {
		names = append(names, s.Name)
	}
	return names
}

// applicable rejects knobs a case sets on a backend that ignores them: a
// gate that believes it tested "serializable" on Redis tested nothing.
// Knobs in the defaults apply only where they mean something.
func (c *checker) applicable(path string, sh Shape, b scenarios.Backend) {
	only := func(key string, set bool, backends ...string) {
		if set && !slices.Contains(backends, b.Name) {
			c.fail(path+"."+key, "%s applies to backend %s, not %s", key, strings.Join(backends, " and "), b.Name)
		}
	}
	// The backends that declare the knob (scenarios.Backend).
	declaring := func(knob func(scenarios.Backend) []string) []string {
		var names []string
		for _, d := range c.reg.Backends() {
			if len(knob(d)) > 0 {
				names = append(names, d.Name)
			}
		}
		return names
	}
	only("isolation", sh.Isolation != nil && *sh.Isolation != "", declaring(func(d scenarios.Backend) []string { return d.Isolations })...)
	only("engine", sh.Engine != nil && *sh.Engine != "", declaring(func(d scenarios.Backend) []string { return d.Engines })...)
	// Conflicts to retry come from the servers with isolation levels.
	only("retry", sh.Retry != nil && *sh.Retry > 0, declaring(func(d scenarios.Backend) []string { return d.Isolations })...)
	only("latency", sh.Latency != nil, "memory")
}

// shape checks the knobs written at path (defaults or one case).
func (c *checker) shape(path string, sh Shape) {
	for _, n := range sh.ints() {
		if n.v != nil && *n.v < n.min {
			c.fail(path+"."+n.key, "%s must be at least %d (got %d)%s", n.key, n.min, *n.v, n.why)
		}
	}
	if sh.Release != nil {
		if _, err := release.ParseMode(*sh.Release); err != nil {
			c.fail(path+".release", "%v", err)
		}
	}
	for _, d := range sh.durations() {
		if d.v == nil {
			continue
		}
		if _, err := parseDuration(*d.v); err != nil {
			c.fail(path+"."+d.key, "%s: %v", d.key, err)
		}
	}
}

// merged applies a case's own knobs over the suite's defaults, over
// racetest's (runplan.DefaultShape). A variant and a fault are a case's
// own: the defaults' are refused (file), and reach no case.
func (c *checker) merged(k Shape) shape {
	d := c.s.File.Defaults.Shape
	d.Variant, d.Fault = nil, nil
	sh := shape{Shape: runplan.DefaultShape()}
	d.apply(&sh)
	k.apply(&sh)
	return sh
}

// parseDuration reads a Go duration ("250ms", "1m30s") or a bare 0.
func parseDuration(s string) (time.Duration, error) {
	if strings.TrimSpace(s) == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration: write it with a unit, e.g. 200us, 5ms, 10s", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%q cannot be negative", s)
	}
	return d, nil
}
