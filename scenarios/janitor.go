package scenarios

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// What 'racetest clean' asks of a server backend (Backend.Janitor); the
// registrations themselves are written and read in scenarios/runs.

// Record is one run's registration.
type Record struct {
	RunID   string
	Started time.Time
	Host    string
	PID     int
}

// Alive reports whether the run's process is still running: only a run
// registered from this host can be checked (another host's pid means
// nothing here), and for those a process that answers signal 0 counts as
// alive — a reused pid keeps a dead run's objects until --run-id names it.
func (r Record) Alive() (alive, known bool) {
	host, _ := os.Hostname()
	if r.Host != host || r.PID <= 0 {
		return false, false
	}
	if r.PID == os.Getpid() {
		return true, true
	}
	err := syscall.Kill(r.PID, 0)
	return err == nil || errors.Is(err, syscall.EPERM), true
}

func (r Record) String() string {
	return fmt.Sprintf("run %s (started %s on %s, pid %d)", r.RunID, r.Started.UTC().Format(time.RFC3339), r.Host, r.PID)
}

// Leftover is one run's objects on a backend: registered (Record set) or
// not (only the names: racetest never drops those).
type Leftover struct {
	RunID      string
	Record     *Record
	Objects    []string
	Registered bool
}

// Janitor is one backend's side of 'racetest clean': what racetest runs
// left there, and the dropping of one registered run's objects.
type Janitor interface {
	// Where names the server and database, without a password.
	Where() string
	Leftovers(ctx context.Context) ([]Leftover, error)
	// Drop drops the objects of registered run id, then its registration,
	// and says what it dropped.
	Drop(ctx context.Context, runID string) (string, error)
	Close() error
}
