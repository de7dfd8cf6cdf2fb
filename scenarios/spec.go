package scenarios

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"regexp"
	"time"
)

// Expectation is what a correct reading of the pattern predicts for a run.
type Expectation string

const (
	ExpectSafe Expectation = "safe"
	ExpectRace Expectation = "race"
	// ExpectLost: some burst leaves fewer effects than required while an
	// attempt claims it done (a failure swallowed as "already done").
	ExpectLost Expectation = "lost"
)

// Spec is a scenario as a person reads it: its name, its lesson, its story,
// and what it should do.
type Spec struct {
	Name string
	// Lesson is the one line a table shows.
	Lesson string
	// Story is what 'racetest explain' prints.
	Story Story
	// Allowed is how many effects per subject are correct (default 1).
	Allowed int
	// Expect predicts the verdict for a run with p on a correct backend.
	Expect func(p Params) Expectation
	// Demo lists the parameter sets 'racetest demo' runs (nil: not in the demo).
	Demo []DemoCase
	// InProcess, when set, says why the attempt's first step sends nothing
	// (its check is in the replica's memory): holding a request back cannot
	// line the attempts up, so the default release (auto) uses the gate.
	InProcess string
	// Variants lists every --variant the scenario has, its default first,
	// on the backends that implement variants (nil: none, or only those
	// the demo shows). 'racetest explain' and the matrix read it.
	Variants []string
	// Topology names the cluster the scenario needs beyond one server
	// ("replica": a primary and a replica of it; see scripts/cluster.sh);
	// "" for one server. What runs every scenario on one server (the
	// catalog gate, the conformance suites, the matrix) leaves such a
	// scenario out.
	Topology string
}

// AutoGate says why the default release (auto) keeps the gate for this
// scenario rather than last-byte, or "" when it need not: a first step that
// sends nothing (InProcess), or a cluster, whose reads and failovers go on
// connections that are not the workers' own and where last-byte was not
// measured.
func (s Spec) AutoGate() string {
	if s.InProcess != "" {
		return s.InProcess
	}
	if s.Topology != "" {
		return s.Name + " runs on a " + s.Topology + " cluster, where last-byte was not measured"
	}
	return ""
}

// TopologyReplica: a primary and an asynchronous replica of it.
const TopologyReplica = "replica"

// DemoCase is one row of the demo table.
type DemoCase struct {
	Label    string // shown beside the scenario name, e.g. "3 replicas"
	Replicas int
	Waves    int
	Deploy   bool
	Variant  string
	// Bursts, when set, caps the bursts of this row in the demo (a row
	// whose bursts wait out a TTL would otherwise dominate its time).
	Bursts int
	// Gap, when set and the user gave none, is the row's delay between
	// check and act: a guarded action that takes a moment, so that the
	// attempts a lock turned away were in flight while it ran.
	Gap time.Duration
}

// Story is the explain text, in the order a trainer tells it.
type Story struct {
	Naive   string // the naive code
	Breaks  string // why it breaks
	Fix     string // the fix
	Numbers string // what to look for in the numbers
}

// Params are everything a Factory may need for one run. Fields a backend
// does not use are ignored by it.
type Params struct {
	// RunID namespaces every table, key and collection the run creates:
	// racetest_<RunID>_...
	RunID    string
	Attempts int
	Replicas int
	// Gap is an extra delay between check and act, to widen the window.
	Gap time.Duration
	// Latency is the embedded backend's simulated round trip.
	Latency time.Duration
	// TTL is the lease length for ttl-lease.
	TTL  time.Duration
	Seed int64
	// Isolation is an SQL isolation level ("read-committed", ...; "" = server default).
	Isolation string
	// Engine is a MySQL storage engine ("" = InnoDB).
	Engine string
	// Variant selects a scenario's variant ("for-update", "fenced", ...).
	Variant string
	// Retries is how many times the run retries an attempt refused with a
	// conflict (runner.Retries). The backends ignore it; the catalog's
	// expectations read it, since retried conflicts finish their work.
	Retries int
	// Fault is a fault to inject into a cluster scripts/cluster.sh started
	// ("failover-after-act"; "" is the scenario's default).
	Fault string
	Conn  Connections
	// Dial, when set, dials every connection the run opens to a server, in
	// place of the driver's own dialer. Release modes that act on the wire
	// (holding back each request's last byte) wrap connections here.
	Dial DialFunc
}

// DialFunc dials a network connection, as net.Dialer.DialContext does.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Connections are the servers' addresses, keyed by each Connection's Key:
// a backend's name for its server ("postgres"), and the name with
// ReadSuffix for its replica ("postgres_read"), as a suite's connections:
// writes them. A key that is not set (or set to "") means the standard
// local address, or for a replica none.
//
// Connections is a value like the struct it replaced: copies share nothing
// that Set changes (Set copies the few addresses before it writes).
type Connections struct{ addr map[string]string }

// NewConnections returns the connections addr names (key → address).
func NewConnections(addr map[string]string) Connections {
	var c Connections
	for k, v := range addr {
		c.Set(k, v)
	}
	return c
}

// Get returns the address set for key, or "".
func (c Connections) Get(key string) string { return c.addr[key] }

// Set sets the address of key; "" unsets it.
func (c *Connections) Set(key, addr string) {
	m := make(map[string]string, len(c.addr)+1)
	maps.Copy(m, c.addr)
	if addr == "" {
		delete(m, key)
	} else {
		m[key] = addr
	}
	c.addr = m
}

// Map returns the addresses that are set, as a map of key → address that
// the caller may change.
func (c Connections) Map() map[string]string { return maps.Clone(c.addr) }

// ReadSuffix ends the suite key of a backend's read endpoint: redis_read.
const ReadSuffix = "_read"

// Variant names shared by every backend that has the variant.
const (
	// VariantPlain: check-then-write reads with a plain SELECT (the default).
	VariantPlain = "plain"
	// VariantForShare: check-then-write reads with a shared locking read
	// (FOR SHARE, LOCK IN SHARE MODE).
	VariantForShare = "for-share"
	// VariantAdvisoryLock: check-then-write takes a named lock around the
	// check and the write (pg_advisory_xact_lock, GET_LOCK).
	VariantAdvisoryLock = "advisory-lock"
	// VariantForUpdate: check-then-write reads with SELECT … FOR UPDATE.
	VariantForUpdate = "for-update"
	// VariantOneActive: unique-insert as "one active per user" — a partial
	// unique index (or a generated column on MySQL/MariaDB).
	VariantOneActive = "one-active"
)

// Defaults for parameters the command line shares with the library.
const (
	DefaultLatency = 200 * time.Microsecond
	DefaultTTL     = 50 * time.Millisecond
)

var runIDPattern = regexp.MustCompile(`^[a-z0-9]{1,16}$`)

// NewRunID returns a fresh random run id (8 lowercase hex characters).
func NewRunID() string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}

// Prefix is the namespace every object of the run starts with.
func (p Params) Prefix() string { return "racetest_" + p.RunID + "_" }

// ParamError is a parameter a backend cannot use (an unknown variant,
// isolation level or engine): bad input, not a failing server.
type ParamError struct{ Err error }

func (e *ParamError) Error() string { return e.Err.Error() }
func (e *ParamError) Unwrap() error { return e.Err }

// BadParam marks err as a ParamError.
func BadParam(err error) error { return &ParamError{Err: err} }

// Validate reports parameters no backend could use.
func (p Params) Validate() error {
	switch {
	case !runIDPattern.MatchString(p.RunID):
		return fmt.Errorf("run id %q must be 1 to 16 lowercase letters or digits", p.RunID)
	case p.Gap < 0:
		return fmt.Errorf("--gap cannot be negative (got %s)", p.Gap)
	case p.Latency < 0:
		return fmt.Errorf("--latency cannot be negative (got %s)", p.Latency)
	case p.TTL < 0:
		return fmt.Errorf("--ttl cannot be negative (got %s)", p.TTL)
	}
	return nil
}
