// Package runs registers each racetest run on the server it uses, so that
// what a killed run left behind can be traced to it and removed, and so that
// a name racetest did not create is never dropped.
//
// A run's objects are named racetest_<run id>_…. Before it creates any, a
// run registers its id (with its start time, host and pid) and checks that
// no object with its prefix exists yet: from then on every object under the
// prefix is the run's own. The registration goes when the run's cleanup has
// dropped its objects; 'racetest clean' finds the registrations that stayed
// (a run killed with SIGKILL, a server that went away) and drops what they
// own, never an object no registration claims.
package runs

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/racetest/racetest/scenarios"
)

// Table is the SQL table (and MongoDB collection) of registrations. It is
// not a run's object: it stays, empty, when every run has been cleaned.
const Table = "racetest_runs"

// KeyTTL is how long every Redis key a run writes lives: a burst's keys are
// read only during their burst, and a run's marker is refreshed while it
// runs, so a day outlives any run's use of them by far, and a killed run's
// keys then expire by themselves.
const KeyTTL = 24 * time.Hour

// Record, Leftover and Janitor are declared in scenarios, where a
// Backend carries its janitor; they are written here as before.
type (
	Record   = scenarios.Record
	Leftover = scenarios.Leftover
	Janitor  = scenarios.Janitor
)

// New is the registration of run id made by this process, now.
func New(runID string) Record {
	host, _ := os.Hostname()
	return Record{RunID: runID, Started: time.Now().UTC().Truncate(time.Millisecond), Host: host, PID: os.Getpid()}
}

// Prefix is the namespace of run id's objects.
func Prefix(runID string) string { return "racetest_" + runID + "_" }

var objectName = regexp.MustCompile(`^racetest_([a-z0-9]{1,16})_`)

// RunOf returns the run id an object's name carries, if it follows
// racetest's naming scheme.
func RunOf(name string) (string, bool) {
	m := objectName.FindStringSubmatch(name)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// Group joins registrations and object names into one Leftover per run id,
// sorted by run id. Names outside the naming scheme are ignored.
func Group(records []Record, names []string) []Leftover {
	by := map[string]*Leftover{}
	get := func(id string) *Leftover {
		l, ok := by[id]
		if !ok {
			l = &Leftover{RunID: id}
			by[id] = l
		}
		return l
	}
	for i := range records {
		l := get(records[i].RunID)
		l.Record, l.Registered = &records[i], true
	}
	for _, n := range names {
		if id, ok := RunOf(n); ok {
			l := get(id)
			l.Objects = append(l.Objects, n)
		}
	}
	out := make([]Leftover, 0, len(by))
	for _, l := range by {
		sort.Strings(l.Objects)
		out = append(out, *l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].RunID < out[j].RunID })
	return out
}

// InUseError is a run whose prefix already names objects it did not make,
// or whose id is registered already: it must not start, since its cleanup
// would drop them.
type InUseError struct {
	Backend, RunID string
	Example        string // an object found under the prefix ("" when the id is registered)
}

func (e *InUseError) Error() string {
	if e.Example == "" {
		return fmt.Sprintf("%s: run id %s is registered already (another run, or one not yet cleaned): racetest never uses another run's objects — choose another run id, or run 'racetest clean --run-id %s' if that run is gone",
			e.Backend, e.RunID, e.RunID)
	}
	return fmt.Sprintf("%s: %s already exists and was not made by this run: racetest never uses or drops a name it did not create — choose another run id (objects of run %s are named %s*)",
		e.Backend, e.Example, e.RunID, strings.TrimSuffix(Prefix(e.RunID), "_")+"_")
}
