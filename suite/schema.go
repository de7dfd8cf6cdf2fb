// Package suite reads racetest suite files: YAML that lists the runs a CI
// gate carries out and what each must show. Parse reads and checks a file
// on its own (syntax, unknown keys, types, ${ENV} expansion); Plans checks
// it against the catalog and the connections at hand and turns each case
// into a run. Every error names the file, line and column it is about, and
// nothing runs until the whole suite is known to be sound.
//
// A suite:
//
//	version: 1
//	defaults:
//	  attempts: 16
//	  bursts: 200
//	  connections:
//	    postgres: ${DATABASE_URL}
//	cases:
//	  - scenario: conditional-update
//	    backend: postgres
//	    prove: 1%
//	  - name: double tap on the save endpoint
//	    scenario: check-then-write
//	    backend: postgres
//	    expect: race
//
// The package never prints and never connects: the command line does both.
package suite

import (
	"fmt"
	"time"

	"github.com/racetest/racetest/runplan"
	"github.com/racetest/racetest/scenarios"
)

// File is a suite as written, after ${ENV} expansion. Pointer fields tell
// "not given" from a zero the author wrote.
type File struct {
	// Version is the schema version; only 1 exists. Optional.
	Version  *int     `yaml:"version"`
	Defaults Defaults `yaml:"defaults"`
	Cases    []Case   `yaml:"cases"`
}

// Defaults apply to every case that does not set the knob itself.
type Defaults struct {
	Shape `yaml:",inline"`
	// Connections are the servers' addresses, by backend name (the
	// registry's backends that take a connection), and their replicas', by
	// backend name and _read (postgres_read), for the clustered scenarios.
	// The word "default" accepts the backend's standard local address.
	Connections Connections `yaml:"connections"`
}

// Connections are the addresses a suite names, keyed as
// scenarios.Connections is (postgres, postgres_read); Parse refuses a key
// that no backend of its registry declares.
type Connections map[string]string

// Shape is a run's knobs, shared by the defaults and each case.
type Shape struct {
	Attempts *int `yaml:"attempts"`
	Bursts   *int `yaml:"bursts"`
	Replicas *int `yaml:"replicas"`
	Waves    *int `yaml:"waves"`
	// Retry tries an attempt the SQL server refused with a deadlock or a
	// serialization failure again, up to this many times.
	Retry *int `yaml:"retry"`
	// Deploy restarts every replica between waves.
	Deploy *bool `yaml:"deploy"`
	// Durations are written as Go durations ("200us", "1.5s"; "0" is zero).
	Gap     *string `yaml:"gap"`
	Latency *string `yaml:"latency"`
	TTL     *string `yaml:"ttl"`
	Timeout *string `yaml:"timeout"`
	Seed    *int64  `yaml:"seed"`
	// Isolation, Engine and Variant are passed to the backend as given.
	Isolation *string `yaml:"isolation"`
	Engine    *string `yaml:"engine"`
	Variant   *string `yaml:"variant"`
	// Fault is a fault to inject into a cluster scripts/cluster.sh started
	// (failover-lock: failover-after-act, its default, or none); a case's
	// own, like variant.
	Fault *string `yaml:"fault"`
	// Keep leaves the run's namespaced objects in the store.
	Keep *bool `yaml:"keep"`
	// Release is how a scenario's attempts leave the client: gate
	// (default) or last-byte (redis, mysql, postgres). An HTTP case sets
	// its own under http.release.
	Release *string `yaml:"release"`
}

// shape is a case's knobs with the defaults applied: the run's shape, and
// its release mode.
type shape struct {
	runplan.Shape
	release string
}

// run is the shape a case's run takes: keep, also when the command line
// asks it of every case, and the case's connections.
func (sh shape) run(keep bool, conn scenarios.Connections) runplan.Shape {
	r := sh.Shape
	r.Keep = sh.Keep || keep
	r.Conn = conn
	return r
}

// intKey and durationKey are a knob written as a number or a duration,
// with what it must be; checker.shape checks them.
type intKey struct {
	key string
	v   *int
	min int
	why string
}

type durationKey struct {
	key string
	v   *string
}

// ints lists the knobs written as whole numbers.
func (sh Shape) ints() []intKey {
	return []intKey{
		{"attempts", sh.Attempts, 2, ": one attempt per burst can never race, so it proves nothing"},
		{"bursts", sh.Bursts, 1, ""},
		{"replicas", sh.Replicas, 1, ""},
		{"waves", sh.Waves, 1, ""},
		{"retry", sh.Retry, 0, ""},
	}
}

// durations lists the knobs written as durations.
func (sh Shape) durations() []durationKey {
	return []durationKey{{"gap", sh.Gap}, {"latency", sh.Latency}, {"ttl", sh.TTL}, {"timeout", sh.Timeout}}
}

// apply sets in to each knob sh writes, leaving the others as they are.
// Values were checked (checker.shape), so parse errors cannot happen.
func (sh Shape) apply(to *shape) {
	setInt := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	setDuration := func(dst *time.Duration, v *string) {
		if v != nil {
			*dst, _ = parseDuration(*v)
		}
	}
	setString := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	setBool := func(dst *bool, v *bool) {
		if v != nil {
			*dst = *v
		}
	}
	s := &to.Shape
	setInt(&s.Attempts, sh.Attempts)
	setInt(&s.Bursts, sh.Bursts)
	setInt(&s.Replicas, sh.Replicas)
	setInt(&s.Waves, sh.Waves)
	setInt(&s.Retries, sh.Retry)
	setBool(&s.Deploy, sh.Deploy)
	setBool(&s.Keep, sh.Keep)
	setDuration(&s.Gap, sh.Gap)
	setDuration(&s.Latency, sh.Latency)
	setDuration(&s.TTL, sh.TTL)
	setDuration(&s.Timeout, sh.Timeout)
	if sh.Seed != nil {
		s.Seed = *sh.Seed
	}
	setString(&s.Isolation, sh.Isolation)
	setString(&s.Engine, sh.Engine)
	setString(&s.Variant, sh.Variant)
	setString(&s.Fault, sh.Fault)
	setString(&to.release, sh.Release)
}

// Case is one run of the suite: a built-in scenario on a backend, or an
// HTTP target, and what it must show.
type Case struct {
	// Name is what reports call the case; by default the scenario with the
	// knobs that set it apart, e.g. "memory-set (replicas=3)".
	Name     string `yaml:"name"`
	Scenario string `yaml:"scenario"`
	// Backend defaults to memory, as on the command line.
	Backend string `yaml:"backend"`
	// Demo runs every variant the catalog demonstrates for the scenario
	// (as 'racetest demo' does), each named after its variant and held to
	// the catalog's expectation: a gate that follows the catalog as it grows.
	Demo bool `yaml:"demo"`
	// Connection overrides the backend's connection for this case alone.
	Connection string `yaml:"connection"`
	// ReadConnection overrides the backend's read endpoint (a replica of
	// the primary, defaults.connections.<backend>_read) for this case
	// alone: replica-read and failover-lock need one.
	ReadConnection string `yaml:"read_connection"`
	HTTP           *HTTP  `yaml:"http"`
	// SQL and Redis are cases of the user's own scripts (see Scripts).
	SQL         *Scripts `yaml:"sql"`
	Redis       *Scripts `yaml:"redis"`
	Mongo       *Scripts `yaml:"mongo"`
	Shape       `yaml:",inline"`
	Expectation `yaml:",inline"`
	// Prove asks for a bound on the violation rate instead of a burst
	// count: "1%" or 0.01 runs as many bursts as proving "at most 1% at
	// 95% confidence" needs, and stops at the first violation.
	Prove string `yaml:"prove"`
	// OnServer replaces the expectation when the server the run measured
	// matches: a wire-compatible server that really behaves differently.
	OnServer []ServerExpect `yaml:"on_server"`
	// AllowInconclusive lets this case pass when it proved nothing: a
	// gate fails an INCONCLUSIVE case unless it says so (or the command
	// line gives --allow-inconclusive).
	AllowInconclusive bool `yaml:"allow_inconclusive"`
}

// Expectation is what a run must show: expect (catalog, safe, race or lost) or
// max_effects, not both. Neither means the catalog's expectation.
type Expectation struct {
	Expect     string `yaml:"expect"`
	MaxEffects *int   `yaml:"max_effects"`
}

// ServerExpect is an expectation for the servers whose reported name
// contains Match (case-insensitive), with the reason, which reports print.
type ServerExpect struct {
	Match       string `yaml:"match"`
	Expectation `yaml:",inline"`
	Why         string `yaml:"why"`
}

// HTTP is a case that fires at an HTTP endpoint and checks the side effect.
// Its keys are those of the HTTP firing engine's configuration, so that a
// case maps onto it field for field. The URL, header values, body and
// effects check are Go templates over {{.Burst}}, {{.Attempt}}, {{.Token}}
// (random, fresh per burst), {{.RunID}} and {{.Key}}.
type HTTP struct {
	// Method defaults to GET, or POST when there is a body.
	Method string `yaml:"method"`
	URL    string `yaml:"url"`
	// Headers are "Name: value" lines, as curl's -H takes them.
	Headers []string `yaml:"headers"`
	// Cookies are "name=value" pairs.
	Cookies  []string `yaml:"cookies"`
	Body     string   `yaml:"body"`
	BodyFile string   `yaml:"body_file"`
	Success  *Success `yaml:"success"`
	// Effects counts, after each burst, what really happened:
	// sql:mysql:QUERY, sql:postgres:QUERY, redis:COMMAND,
	// mongo:DB.COLLECTION:FILTER, or http:URL (a GET returning a number).
	Effects string `yaml:"effects"`
	// Watch and SoloEvery shape effects: auto:STORE (racetest http
	// --watch, --solo-every).
	Watch     []string `yaml:"watch"`
	SoloEvery *int     `yaml:"solo_every"`
	// Release is barrier (default), last-byte, single-packet or naive.
	Release string `yaml:"release"`
	// Insecure skips TLS verification, for local targets only.
	Insecure bool `yaml:"insecure"`
	// Timeout bounds connecting and each effects check (a duration).
	Timeout string `yaml:"timeout"`
	// Warmup is a URL on the same host fetched once per new connection.
	Warmup string `yaml:"warmup"`
	// Setup is a request made before each burst to create its subject:
	// "METHOD URL" or a URL (POST); it must answer 2xx.
	Setup string `yaml:"setup"`
	// CredentialsTo lists other hosts the setup request and an http:
	// effects check may send the Authorization header and cookies to.
	CredentialsTo []string `yaml:"credentials_to"`
	// Proxy is the control address of a racetest proxy between the
	// service and its database (racetest http --proxy): each burst's
	// race is forced at the database.
	Proxy string `yaml:"proxy"`
	// Invariant lists what must hold after every burst, each written as
	// Effects is (sql:postgres:SELECT count(*) FROM accounts WHERE balance < 0):
	// how many times it is broken, or a boolean that must hold.
	Invariant []string `yaml:"invariant"`
	// Allowed is how many effects per burst are correct: N (default 1),
	// MIN-MAX, or successes (each success landed exactly once).
	Allowed *Allowance `yaml:"allowed"`
}

// Allowance is an allowance as a suite writes it: 1, 0-1 or successes,
// read by runner.ParseAllowance as --allowed is.
type Allowance struct{ Text string }

// UnmarshalYAML takes a number or a string.
func (a *Allowance) UnmarshalYAML(unmarshal func(any) error) error {
	var v any
	if err := unmarshal(&v); err != nil {
		return err
	}
	switch v.(type) {
	case map[string]any, []any, nil:
		return fmt.Errorf("allowed: write N, MIN-MAX or successes")
	}
	a.Text = fmt.Sprint(v)
	return nil
}

// Success is the rule that makes a response count as executed: a status
// in Status ("200" or a class, "2xx"), and (when given) a body matching
// the regular expression Body.
type Success struct {
	Status []string `yaml:"status"`
	Body   string   `yaml:"body"`
	// Declined lists the only statuses that mean "already done" (by
	// default a 4xx that does not refuse the request itself).
	Declined []string `yaml:"declined"`
}
