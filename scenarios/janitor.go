package scenarios

import (
	"bytes"
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
// alive — a reused pid keeps a dead run's objects until --run-id names it —
// unless it is a zombie: a run killed outright whose parent (python's
// subprocess, a test harness) has not reaped it yet has ended all the same.
func (r Record) Alive() (alive, known bool) {
	host, _ := os.Hostname()
	if r.Host != host || r.PID <= 0 {
		return false, false
	}
	if r.PID == os.Getpid() {
		return true, true
	}
	if err := syscall.Kill(r.PID, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false, true
	}
	return !ended(r.PID), true
}

// ended reports whether process pid has exited and waits only to be
// reaped (state Z or X in /proc/pid/stat). Where there is no /proc, it
// says false: such a process then counts as alive, as before.
func ended(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	state := procState(stat)
	return state == 'Z' || state == 'X'
}

// procState is the state letter of a /proc/pid/stat line, "pid (comm)
// state ...", or 0 if there is none: comm may hold spaces and parentheses,
// and the state follows the last ')'.
func procState(stat []byte) byte {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) || stat[i+1] != ' ' {
		return 0
	}
	return stat[i+2]
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
