// Package scenarios is racetest's catalog: each "do it once" pattern, and its
// implementation on each backend, behind one registry.
package scenarios

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/racetest/racetest/runner"
)

// Factory builds one scenario on one backend for a run.
type Factory func(ctx context.Context, p Params) (runner.Target, error)

// Backend describes where the shared state lives, and everything the
// command line, the environment and a suite file need to know about it:
// its connection, the knobs it accepts, what its runs leave on the server
// and how 'racetest clean' finds it, and what an attempt costs. The flags,
// their help text and completions, the environment lookup, a suite's
// connections: keys, 'clean', --keep's note and the checks before a run
// are all generated from this value: a backend is its package, which
// declares it, and its line in scenarios/builtin (see docs/layout.md for
// what else a backend may want: scripts, families, wire releases).
type Backend struct {
	Name    string
	Summary string
	// Server is false for the embedded backend, which needs no server.
	Server bool
	// Conn is how a server backend is reached; nil for one that needs no
	// connection.
	Conn *Connection
	// Isolations are the isolation levels the backend accepts (--isolation,
	// isolation:); nil: it has none to choose.
	Isolations []string
	// Engines are the storage engines it accepts (--engine); the first is
	// its default. Nil: it has none to choose.
	Engines []string
	// Releases are the release modes that act on its wire (--release)
	// besides the gate, which every backend has.
	Releases []string
	// ReadConn is how a replica of the server is reached, for the
	// clustered scenarios (replica-read, failover-lock); nil: the backend
	// has none. Its Default is "": no replica unless one is named.
	ReadConn *Connection
	// Kept names what a run makes on the server, and --keep leaves there
	// ("tables", "keys"); "" for a backend that keeps a run's state in
	// racetest's own process.
	Kept string
	// Janitor opens the backend's side of 'racetest clean' on the server c
	// names; nil for a backend that keeps nothing between runs.
	Janitor func(ctx context.Context, c Connections) (Janitor, error)
	// AttemptCost is what one attempt of a burst costs racetest's memory,
	// in bytes; 0 is DefaultAttemptCost.
	AttemptCost int64
}

// DefaultAttemptCost is what one attempt costs racetest's memory on a
// server backend: its worker, goroutine and marks (about 5 KiB, measured
// with 'racetest run unique-insert -n 100000 --latency 0': 520 MB), and
// its own connection's driver buffers.
const DefaultAttemptCost = 64 << 10

// Cost is b's AttemptCost, or DefaultAttemptCost.
func (b Backend) Cost() int64 {
	if b.AttemptCost > 0 {
		return b.AttemptCost
	}
	return DefaultAttemptCost
}

// Retries reports whether b reports conflicts (deadlocks, serialization
// failures) that --retry tries again: the backends with isolation levels,
// the SQL ones.
func (b Backend) Retries() bool { return len(b.Isolations) > 0 }

// Connection is how one server backend is reached.
type Connection struct {
	// Flag is the command-line flag that names the server, without its
	// dashes ("mysql-dsn").
	Flag string
	// Env is the environment variable the flag falls back to.
	Env string
	// Default is the standard local address, dialled when neither is set
	// (and accepted by a suite's "default").
	Default string
	// What says what the flag takes, for help text ("PostgreSQL URL").
	What string
	// Redact hides the password of an address written in any form the
	// backend accepts, for output.
	Redact func(string) string
	// Key is the connection's key in Connections and in a suite's
	// connections:, the backend's name (with ReadSuffix for a ReadConn);
	// AddBackend holds a backend to it.
	Key string
	// Cluster is the scripts/cluster.sh topology that starts a primary
	// with this replica (a ReadConn's; "" for a primary's connection).
	Cluster string
	// Probe reports whether something listens at the address (a connect,
	// no handshake, no login), so that a command can tell "not running"
	// from a failure; nil when the backend has none. Empty is Default.
	Probe func(ctx context.Context, address string) error
}

// ProbeAddr connects to addr on network and hangs up: what a Connection's
// Probe does once it has parsed the address. The error names the address.
func ProbeAddr(ctx context.Context, network, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		cause := err
		if op := new(net.OpError); errors.As(err, &op) {
			cause = op.Err // the address is in the message already
		}
		return fmt.Errorf("nothing answers at %s (%v)", addr, cause)
	}
	return c.Close()
}

// probeTimeout bounds a probe: a local server answers a connect at once.
const probeTimeout = time.Second

// Accepts reports whether b accepts the value v for a knob whose accepted
// values are vs ("" always: the backend's default).
func Accepts(vs []string, v string) bool {
	return v == "" || slices.Contains(vs, v)
}

// Registry maps scenario × backend to a Factory. It is a value: build one
// with NewRegistry (or builtin.Registry for the shipped catalog).
type Registry struct {
	specs    []Spec
	backends []Backend
	impls    map[[2]string]Factory
	variants map[[2]string][]string
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{impls: map[[2]string]Factory{}, variants: map[[2]string][]string{}}
}

// Clone returns a copy of r that can be added to without changing r.
func (r *Registry) Clone() *Registry {
	c := &Registry{specs: append([]Spec(nil), r.specs...), backends: append([]Backend(nil), r.backends...),
		impls: make(map[[2]string]Factory, len(r.impls)), variants: make(map[[2]string][]string, len(r.variants))}
	for k, f := range r.impls {
		c.impls[k] = f
	}
	for k, v := range r.variants {
		c.variants[k] = v
	}
	return c
}

// AddScenario adds a scenario's spec. It panics on a duplicate name: the
// catalog is a programming decision, not input.
func (r *Registry) AddScenario(s Spec) {
	if _, ok := r.lookupSpec(s.Name); ok {
		panic("scenarios: duplicate scenario " + s.Name)
	}
	if s.Allowed == 0 {
		s.Allowed = 1
	}
	r.specs = append(r.specs, s)
}

// AddBackend adds a backend. It panics on a duplicate name.
func (r *Registry) AddBackend(b Backend) {
	if _, ok := r.lookupBackend(b.Name); ok {
		panic("scenarios: duplicate backend " + b.Name)
	}
	if b.Conn != nil && b.Conn.Key != b.Name {
		panic("scenarios: backend " + b.Name + " keys its connection " + b.Conn.Key + ", not by its name")
	}
	if b.ReadConn != nil && b.ReadConn.Key != b.Name+ReadSuffix {
		panic("scenarios: backend " + b.Name + " keys its read connection " + b.ReadConn.Key + ", not " + b.Name + ReadSuffix)
	}
	r.backends = append(r.backends, b)
}

// Register adds the implementation of scenario on backend. Both must have
// been added; a duplicate panics.
func (r *Registry) Register(scenario, backend string, f Factory) {
	if _, ok := r.lookupSpec(scenario); !ok {
		panic("scenarios: register on unknown scenario " + scenario)
	}
	if _, ok := r.lookupBackend(backend); !ok {
		panic("scenarios: register on unknown backend " + backend)
	}
	k := [2]string{scenario, backend}
	if _, ok := r.impls[k]; ok {
		panic("scenarios: duplicate implementation of " + scenario + " on " + backend)
	}
	r.impls[k] = f
}

// SetVariants records the variants scenario accepts on backend (besides
// "", its default), as the implementation validates them: help text and
// completions list them from here. The implementation must be registered.
func (r *Registry) SetVariants(scenario, backend string, variants []string) {
	k := [2]string{scenario, backend}
	if _, ok := r.impls[k]; !ok {
		panic("scenarios: variants of unregistered " + scenario + " on " + backend)
	}
	r.variants[k] = append([]string(nil), variants...)
}

// Variants lists the variants scenario accepts on backend, or on any
// backend when backend is "", in the order they were registered.
func (r *Registry) Variants(scenario, backend string) []string {
	var out []string
	for _, b := range r.backends {
		if backend != "" && b.Name != backend {
			continue
		}
		for _, v := range r.variants[[2]string{scenario, b.Name}] {
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	return out
}

// Scenarios lists the specs in catalog order.
func (r *Registry) Scenarios() []Spec { return append([]Spec(nil), r.specs...) }

// Backends lists the backends in catalog order.
func (r *Registry) Backends() []Backend { return append([]Backend(nil), r.backends...) }

// BackendsOf lists the backends that implement scenario, in catalog order.
func (r *Registry) BackendsOf(scenario string) []string {
	var out []string
	for _, b := range r.backends {
		if _, ok := r.impls[[2]string{scenario, b.Name}]; ok {
			out = append(out, b.Name)
		}
	}
	return out
}

// Scenario finds a spec by name, or says what the user may have meant.
func (r *Registry) Scenario(name string) (Spec, error) {
	if s, ok := r.lookupSpec(name); ok {
		return s, nil
	}
	names := make([]string, len(r.specs))
	for i, s := range r.specs {
		names[i] = s.Name
	}
	return Spec{}, &UnknownError{Kind: "scenario", Name: name, Known: names}
}

// Backend finds a backend by name, or says what the user may have meant.
func (r *Registry) Backend(name string) (Backend, error) {
	if b, ok := r.lookupBackend(name); ok {
		return b, nil
	}
	names := make([]string, len(r.backends))
	for i, b := range r.backends {
		names[i] = b.Name
	}
	return Backend{}, &UnknownError{Kind: "backend", Name: name, Known: names}
}

// Factory returns the implementation of scenario on backend.
func (r *Registry) Factory(scenario, backend string) (Factory, error) {
	if _, err := r.Scenario(scenario); err != nil {
		return nil, err
	}
	if _, err := r.Backend(backend); err != nil {
		return nil, err
	}
	f, ok := r.impls[[2]string{scenario, backend}]
	if !ok {
		return nil, &UnknownError{Kind: "backend", Name: backend, Known: r.BackendsOf(scenario), For: scenario}
	}
	return f, nil
}

// Build makes scenario on backend for a run with p.
func (r *Registry) Build(ctx context.Context, scenario, backend string, p Params) (runner.Target, error) {
	f, err := r.Factory(scenario, backend)
	if err != nil {
		return nil, err
	}
	return f(ctx, p)
}

func (r *Registry) lookupSpec(name string) (Spec, bool) {
	for _, s := range r.specs {
		if s.Name == name {
			return s, true
		}
	}
	return Spec{}, false
}

func (r *Registry) lookupBackend(name string) (Backend, bool) {
	for _, b := range r.backends {
		if b.Name == name {
			return b, true
		}
	}
	return Backend{}, false
}

// UnknownError is a scenario or backend name the registry does not know.
type UnknownError struct {
	Kind, Name string
	Known      []string
	For        string // set when the backend exists but lacks this scenario
}

func (e *UnknownError) Error() string {
	if e.For != "" {
		return fmt.Sprintf("scenario %s is not available on backend %s; it runs on: %s",
			e.For, e.Name, strings.Join(e.Known, ", "))
	}
	msg := fmt.Sprintf("unknown %s %q", e.Kind, e.Name)
	if s := Suggest(e.Name, e.Known); s != "" {
		msg += fmt.Sprintf(" — did you mean %q?", s)
	}
	return msg + fmt.Sprintf(" (known: %s; see 'racetest list')", strings.Join(e.Known, ", "))
}

// Suggest returns the known name closest to name, if it is close enough to
// be what the user meant ("did you mean …?"), or "".
func Suggest(name string, known []string) string {
	best, bestD := "", len(name)/2+2
	sorted := append([]string(nil), known...)
	sort.Strings(sorted)
	for _, k := range sorted {
		if strings.HasPrefix(k, name) && len(name) >= 3 {
			return k
		}
		if d := levenshtein(name, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
