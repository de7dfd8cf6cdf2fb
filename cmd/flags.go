package cmd

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/racetest/racetest/httpfire"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/runplan"
	"github.com/racetest/racetest/scenarios"
	"github.com/spf13/pflag"
)

// shapeFlags are the flags of a run's shape (runplan.Shape), which every
// command that fires bursts shares: they fill the shape directly, so its
// fields are written once, and they are registered in one place
// (shapeFlagTable), each on the commands whose way of firing takes it.
type shapeFlags struct {
	runplan.Shape
	// effects is --effects on run and demo: "" (the scenario's own count)
	// or auto (solo twins); auto sets Shape.SoloEvery.
	effects string
	// Allowed is --allowed as written: N, MIN-MAX or successes.
	Allowed string
	// soloEvery is --solo-every: how often --effects auto runs a solo
	// twin; it becomes Shape.SoloEvery only when the effects are auto.
	soloEvery int
	// soloEveryGiven and watchGiven: --solo-every and --watch were given
	// on the command line (onCommandLine), where a run without auto
	// refuses them; the environment's RACETEST_SOLO_EVERY is used by auto
	// runs and ignored by the others.
	soloEveryGiven, watchGiven bool
	// fires is the way of firing the flags were registered for.
	fires firing
}

// firing is a way of firing bursts, as a set of bits: a shape flag is
// registered on each command whose way of firing is among its own.
type firing uint

const (
	firesScenario      firing = 1 << iota // run, demo: catalog scenarios
	firesMatrix                           // matrix: the catalog's cells on the SQL backends
	firesScript                           // sql, redis, mongo: the user's scripts
	firesHTTP                             // http: an endpoint
	firesExplore                          // explore, replay: a catalog scenario, step by step
	firesExploreScript                    // explore sql|redis|mongo: the user's scripts, step by step
	servesScenario                        // serve: one scenario's attempts, over HTTP (no bursts)
	onSQLServer                           // a script command on a SQL server: sessions take isolation levels

	// firesBursts is every command that fires bursts: a knob of every run
	// is registered on each of them.
	firesBursts = firesScenario | firesMatrix | firesScript | firesHTTP | firesExplore | firesExploreScript
	// buildsScenario is every command that builds a catalog scenario, and
	// so takes its parameters.
	buildsScenario = firesScenario | firesExplore | servesScenario
)

// verbShape is what one command takes of the shape: its way of firing,
// its defaults, and its own words for a flag where the shared ones would
// mislead (a matrix's --bursts are per cell).
type verbShape struct {
	fires firing
	// attempts, bursts and timeout are the defaults of -n, --bursts and
	// --timeout (0: runplan.DefaultShape's).
	attempts, bursts int
	timeout          time.Duration
	// noShort leaves --attempts without -n (explore).
	noShort bool
	// usage replaces a flag's help, by name.
	usage map[string]string
}

// shapeFlag is one flag of the shape: on which ways of firing it is
// registered, and how.
type shapeFlag struct {
	name string
	on   firing
	add  func(fs *pflag.FlagSet, s *shapeFlags, v verbShape, usage string)
	// usage is the flag's help unless the command has its own words.
	usage string
	// check, when set, refuses a value no run could use (a usage error):
	// every command that takes the flag runs it with its other checks of
	// the shape (checkRows).
	check func(sh runplan.Shape) error
}

// shapeFlagTable lists every flag of the shape. A knob every run shares is
// one row here, on firesBursts.
var shapeFlagTable = []shapeFlag{
	{name: "attempts", on: firesBursts, add: func(fs *pflag.FlagSet, s *shapeFlags, v verbShape, usage string) {
		if v.noShort {
			fs.IntVar(&s.Attempts, "attempts", s.Attempts, usage)
			return
		}
		fs.IntVarP(&s.Attempts, "attempts", "n", s.Attempts, usage)
	}, usage: "attempts released together in each burst"},
	{name: "bursts", on: firesScenario | firesMatrix | firesScript | firesHTTP, add: func(fs *pflag.FlagSet, s *shapeFlags, _ verbShape, usage string) {
		fs.IntVar(&s.Bursts, "bursts", s.Bursts, usage)
	}, usage: "bursts to fire, each at a fresh subject"},
	{name: "replicas", on: firesScenario | firesExplore, add: func(fs *pflag.FlagSet, s *shapeFlags, _ verbShape, usage string) {
		fs.IntVar(&s.Replicas, "replicas", s.Replicas, usage)
	}, usage: "application replicas; attempts are spread round-robin over them"},
	{name: "waves", on: firesScenario, add: func(fs *pflag.FlagSet, s *shapeFlags, _ verbShape, usage string) {
		fs.IntVar(&s.Waves, "waves", s.Waves, usage)
	}, usage: "waves of attempts per burst, all at the same subject"},
	{name: "deploy", on: firesScenario, add: func(fs *pflag.FlagSet, s *shapeFlags, _ verbShape, usage string) {
		fs.BoolVar(&s.Deploy, "deploy", false, usage)
	}, usage: "restart every replica between waves (a deploy wipes their memory)"},
	{name: "timeout", on: firesBursts, add: func(fs *pflag.FlagSet, s *shapeFlags, _ verbShape, usage string) {
		fs.DurationVar(&s.Timeout, "timeout", s.Timeout, usage)
	}, usage: "per-attempt timeout; an attempt past it counts as unknown"},
	{name: "retry", on: firesScenario, add: func(fs *pflag.FlagSet, s *shapeFlags, _ verbShape, usage string) {
		fs.IntVar(&s.Retries, "retry", 0, usage)
	}, usage: "SQL backends: retry an attempt the server refused with a deadlock or serialization failure (1213, 1020, 40001, 40P01) up to this many times, as applications do"},
	{name: "allowed", on: firesScript | firesHTTP | firesExploreScript, add: func(fs *pflag.FlagSet, s *shapeFlags, _ verbShape, usage string) {
		fs.StringVar(&s.Allowed, "allowed", strconv.Itoa(runner.DefaultAllowed), usage)
	}, usage: allowedUsage},
	{name: "gap", on: buildsScenario | firesMatrix, add: func(fs *pflag.FlagSet, s *shapeFlags, _ verbShape, usage string) {
		fs.DurationVar(&s.Gap, "gap", 0, usage)
	}, usage: "extra delay between check and write, to widen the window on purpose"},
	{name: "latency", on: buildsScenario, add: func(fs *pflag.FlagSet, s *shapeFlags, _ verbShape, usage string) {
		fs.DurationVar(&s.Latency, "latency", scenarios.DefaultLatency, usage)
	}, usage: "memory backend: simulated round trip of each store operation (0 allowed)"},
	{name: "ttl", on: buildsScenario, add: func(fs *pflag.FlagSet, s *shapeFlags, _ verbShape, usage string) {
		fs.DurationVar(&s.TTL, "ttl", scenarios.DefaultTTL, usage)
	}, usage: "ttl-lease: lease length"},
	{name: "seed", on: buildsScenario, add: func(fs *pflag.FlagSet, s *shapeFlags, _ verbShape, usage string) {
		fs.Int64Var(&s.Seed, "seed", 0, usage)
	}, usage: "seed for the run's random choices, such as the memory backend's round-trip jitter (0: a fresh one); recorded in the report"},
	{name: "isolation", on: buildsScenario | onSQLServer, add: func(fs *pflag.FlagSet, s *shapeFlags, _ verbShape, usage string) {
		fs.StringVar(&s.Isolation, "isolation", "", usage)
	}}, // isolationHelp, from the registry
	{name: "engine", on: buildsScenario, add: func(fs *pflag.FlagSet, s *shapeFlags, _ verbShape, usage string) {
		fs.StringVar(&s.Engine, "engine", "", usage)
	}}, // engineHelp
	{name: "variant", on: buildsScenario, add: func(fs *pflag.FlagSet, s *shapeFlags, _ verbShape, usage string) {
		fs.StringVar(&s.Variant, "variant", "", usage)
	}}, // variantHelp
	{name: "fault", on: buildsScenario, add: func(fs *pflag.FlagSet, s *shapeFlags, _ verbShape, usage string) {
		fs.StringVar(&s.Fault, "fault", "", usage)
	}, usage: "a fault to inject into a cluster scripts/cluster.sh started: failover-after-act (failover-lock's default) or none"},
	{name: "keep", on: buildsScenario | firesMatrix | firesExploreScript, add: func(fs *pflag.FlagSet, s *shapeFlags, _ verbShape, usage string) {
		fs.BoolVar(&s.Keep, "keep", false, usage)
	}, usage: "keep the run's namespaced tables, keys and collections for inspection"},
	{name: "solo-every", on: firesScript | firesHTTP, add: func(fs *pflag.FlagSet, s *shapeFlags, _ verbShape, usage string) {
		fs.IntVar(&s.soloEvery, "solo-every", 1, usage)
	}, usage: "--effects auto: run a solo twin before every K-th burst (and the first); the others are compared with the latest twin"},
	{name: "effects", on: firesScenario, add: func(fs *pflag.FlagSet, s *shapeFlags, _ verbShape, usage string) {
		fs.StringVar(&s.effects, "effects", "", usage)
	}, usage: "auto: judge each burst by what it changed in the store beside a solo twin (the same attempts one at a time, on one replica) instead of the scenario's own count (embedded store)"},
}

// register registers the shape's flags that v's way of firing takes, and
// the servers' addresses, with v's defaults and words.
func (s *shapeFlags) register(fs *pflag.FlagSet, reg *scenarios.Registry, v verbShape) {
	s.Shape, s.fires = runplan.DefaultShape(), v.fires
	if v.attempts > 0 {
		s.Attempts = v.attempts
	}
	if v.bursts > 0 {
		s.Bursts = v.bursts
	}
	if v.timeout > 0 {
		s.Timeout = v.timeout
	}
	registry := map[string]string{"isolation": isolationHelp(reg), "engine": engineHelp(reg), "variant": variantHelp(reg)}
	for _, f := range shapeFlagTable {
		if f.on&v.fires == 0 {
			continue
		}
		usage := f.usage
		if u, ok := registry[f.name]; ok {
			usage = u
		}
		if u, ok := v.usage[f.name]; ok {
			usage = u
		}
		f.add(fs, s, v, usage)
		if fs.Lookup(f.name) == nil {
			panic("shapeFlagTable: the row " + f.name + " registers no flag of its name")
		}
	}
	registerConn(fs, reg, &s.Conn)
}

// given records which of the flags whose use depends on --effects auto
// were given on the command line.
func (s *shapeFlags) given(fs *pflag.FlagSet) {
	s.soloEveryGiven, s.watchGiven = onCommandLine(fs, "solo-every"), onCommandLine(fs, "watch")
}

// checkAutoFlags refuses --solo-every without --effects auto, and a
// --watch given on the command line that names nothing (an empty one would
// measure every table); what names what --watch takes, and advice says
// what to give instead.
func (s *shapeFlags) checkAutoFlags(auto bool, watch []string, what, advice string) error {
	if !auto && s.soloEveryGiven {
		return usageErrorf("--solo-every sets how often --effects auto runs a solo twin: add --effects auto, or drop --solo-every")
	}
	if !s.watchGiven {
		return nil
	}
	if len(watch) == 0 {
		return usageErrorf("--watch '' names no %s: %s", what, advice)
	}
	for _, w := range watch {
		if strings.TrimSpace(w) == "" {
			return usageErrorf("--watch %q: an empty name among the %s: %s", strings.Join(watch, ","), what, advice)
		}
	}
	return nil
}

// checkRows runs the checks of the table's flags this command took, in
// the table's order, on sh: the command's shape for this run.
func (s *shapeFlags) checkRows(sh runplan.Shape) error {
	for _, f := range shapeFlagTable {
		if f.on&s.fires == 0 || f.check == nil {
			continue
		}
		if err := f.check(sh); err != nil {
			return err
		}
	}
	return nil
}

// auto checks --effects for a run on backend, and sets the shape's solo
// twins for auto.
func (s *shapeFlags) auto(backend string) error {
	switch s.effects {
	case "":
		return nil
	case "auto":
	default:
		return usageErrorf("--effects %q: a built-in scenario counts its own effects; the one choice is auto (judge by solo twins)", s.effects)
	}
	if backend != "memory" {
		return usageErrorf("--effects auto on the built-in scenarios runs on the embedded store (-b memory) for now; on %s, 'racetest sql|redis|mongo … --effects auto' measures your own tables", backend)
	}
	s.SoloEvery = 1
	return nil
}

// intFlag and durationFlag are a flag's value with its name: checks take
// them in a list, so that of two bad flags the user always hears of the
// same one first.
type intFlag struct {
	name  string
	value int
}

type durationFlag struct {
	name  string
	value time.Duration
}

// checkAtLeastOne refuses the first flag below 1.
func checkAtLeastOne(flags ...intFlag) error {
	for _, f := range flags {
		if f.value < 1 {
			return usageErrorf("--%s must be at least 1 (got %d)", f.name, f.value)
		}
	}
	return nil
}

// checkDurations refuses the first negative duration.
func checkDurations(flags ...durationFlag) error {
	for _, f := range flags {
		if f.value < 0 {
			return usageErrorf("--%s cannot be negative (got %s)", f.name, f.value)
		}
	}
	return nil
}

// validate checks what no backend could use, and a burst too large for
// this machine's memory on backend; it runs before anything.
func (s *shapeFlags) validate(reg *scenarios.Registry, backend string) error {
	if err := checkAtLeastOne(intFlag{"attempts", s.Attempts}, intFlag{"bursts", s.Bursts}, intFlag{"replicas", s.Replicas}, intFlag{"waves", s.Waves}); err != nil {
		return err
	}
	if err := checkRetry(s.Retries, reg, backend); err != nil {
		return err
	}
	if err := checkBurstMemory(s.Attempts, reg, backend); err != nil {
		return err
	}
	if s.Deploy && s.Waves < 2 {
		return usageErrorf("--deploy restarts replicas between waves: add --waves 2 or more")
	}
	if s.Seed == 0 {
		// A fresh seed, recorded in the report so that it can be given back.
		s.Seed = rand.Int64N(1<<53) + 1
	}
	if err := checkDurations(durationFlag{"gap", s.Gap}, durationFlag{"latency", s.Latency}, durationFlag{"ttl", s.TTL}, durationFlag{"timeout", s.Timeout}); err != nil {
		return err
	}
	return s.checkRows(s.Shape)
}

// checkEngine refuses --engine on a backend that has no storage engines
// to choose from: it was accepted and reported as a setting, on postgres
// say, though nothing read it.
func (s *shapeFlags) checkEngine(reg *scenarios.Registry, backend string) error {
	if s.Engine == "" {
		return nil
	}
	b, err := reg.Backend(backend)
	if err != nil || len(b.Engines) > 0 {
		return nil // an unknown backend is refused on its own, an engine by the backend
	}
	return usageErrorf("--engine %s: the %s backend has no storage engines to choose from (%s): drop --engine", s.Engine, backend, engineHelp(reg))
}

// params builds a scenario's parameters for one run.
func (s *shapeFlags) params(replicas int) scenarios.Params {
	return s.plan(replicas).Params(scenarios.NewRunID())
}

// plan is the run's shape for runplan, with replicas replicas.
func (s *shapeFlags) plan(replicas int) runplan.Shape {
	sh := s.Shape
	sh.Replicas = replicas
	return sh
}

// checkRetry refuses a retry count that is negative, or given to a backend
// whose attempts never end in a conflict to retry.
func checkRetry(k int, reg *scenarios.Registry, backend string) error {
	if k < 0 {
		return usageErrorf("--retry cannot be negative (got %d)", k)
	}
	if b, err := reg.Backend(backend); k > 0 && (err != nil || !b.Retries()) {
		var sql []string
		for _, b := range reg.Backends() {
			if b.Retries() {
				sql = append(sql, b.Name)
			}
		}
		return usageErrorf("--retry retries deadlocks and serialization failures, which only the SQL backends (%s) report; backend %s has none — drop --retry", strings.Join(sql, ", "), backend)
	}
	return nil
}

// attemptCost is what one attempt of a burst costs racetest's memory, in
// bytes, on backend: the registry's Backend.Cost, or for an HTTP target
// (not a backend of the registry) httpfire's.
func attemptCost(reg *scenarios.Registry, backend string) int64 {
	if backend == httpBackend {
		return httpfire.AttemptCost
	}
	b, _ := reg.Backend(backend)
	return b.Cost()
}

// availableMemory is the memory a run may use, as the kernel tells it:
// MemAvailable, or less when a cgroup limit is lower. ok is false where
// neither can be read.
var availableMemory = func() (bytes int64, ok bool) {
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, found := strings.CutPrefix(line, "MemAvailable:"); found {
				if kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64); err == nil {
					bytes, ok = kb<<10, true
				}
			}
		}
	}
	if max, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		cur, _ := os.ReadFile("/sys/fs/cgroup/memory.current")
		lim, err1 := strconv.ParseInt(strings.TrimSpace(string(max)), 10, 64)
		used, err2 := strconv.ParseInt(strings.TrimSpace(string(cur)), 10, 64)
		if err1 == nil && err2 == nil && (!ok || lim-used < bytes) {
			bytes, ok = max64(lim-used, 0), true
		}
	}
	return bytes, ok
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// fallbackMemory is assumed where the available memory cannot be read.
const fallbackMemory = 4 << 30

// checkBurstMemory refuses a burst of n attempts that cannot fit in half
// the memory available: past it, the run would crash or push the machine
// into swap long before it found anything.
func checkBurstMemory(n int, reg *scenarios.Registry, backend string) error {
	avail, ok := availableMemory()
	where := "available on this machine"
	if !ok {
		avail, where = fallbackMemory, "assumed (the available memory cannot be read here)"
	}
	cost := attemptCost(reg, backend)
	limit := avail / 2 / cost
	if int64(n) <= limit {
		return nil
	}
	return usageErrorf("%d attempts per burst (-n) cannot fit: a burst holds every attempt at once, about %s each on %s, so it needs %s; %s of memory is %s, and a run may use half: use %d attempts or fewer (see Limits in the README)",
		n, formatBytes(cost), backend, formatBytes(int64(n)*cost), formatBytes(avail), where, limit)
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return strconv.FormatFloat(float64(n)/(1<<30), 'f', 1, 64) + " GiB"
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
	}
	return strconv.FormatInt(n>>10, 10) + " KiB"
}

// allowedUsage is --allowed's help, the same on every command.
const allowedUsage = "effects per burst that are correct: N (exactly N, 0 included), MIN-MAX (0-1: at most once), or successes (each attempt that reported success must have landed exactly once)"

// allowanceOf is the allowance a run's config stands for.
func allowanceOf(c runner.Config) runner.Allowance {
	if c.Accounting {
		return runner.Allowance{Successes: true}
	}
	return runner.Allowance{Min: c.Required, Max: c.Allowed}
}
