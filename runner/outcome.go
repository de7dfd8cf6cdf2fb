package runner

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Class is what became of one attempt, as the attempt itself saw it. The
// ground truth is counted separately, in the store (see Target.Effects).
type Class uint8

const (
	// Executed: the guarded action ran (or the attempt believes it did).
	Executed Class = iota
	// Declined: the guard said "already done" (a duplicate key, zero rows
	// affected, a lease held by someone else).
	Declined
	// Conflict: the store refused to decide and asked for a retry — a
	// deadlock (MySQL 1213) or a serialization failure (SQLSTATE 40001).
	Conflict
	// Error: the attempt failed for any other reason. Never "already done".
	Error
	// Unknown: the attempt timed out; it may or may not have run.
	Unknown

	// NumClasses is the number of outcome classes, for arrays indexed by Class.
	NumClasses = int(Unknown) + 1
)

var classNames = [NumClasses]string{"executed", "declined", "conflict", "error", "unknown"}

func (c Class) String() string {
	if int(c) < NumClasses {
		return classNames[c]
	}
	return fmt.Sprintf("class(%d)", c)
}

// Classes lists every outcome class in report order.
func Classes() []Class { return []Class{Executed, Declined, Conflict, Error, Unknown} }

// Outcome is one attempt's result. Err explains Declined, Conflict, Error and
// Unknown outcomes; it is data, not the end of the run.
type Outcome struct {
	Class Class
	Err   error
}

// Done is the outcome of an attempt whose guarded action ran.
func Done() Outcome { return Outcome{Class: Executed} }

// Refused is the outcome of an attempt the guard turned away; why says how.
func Refused(why error) Outcome { return Outcome{Class: Declined, Err: why} }

// Retry is the outcome of an attempt the store refused with a deadlock or a
// serialization failure.
func Retry(err error) Outcome { return Outcome{Class: Conflict, Err: err} }

// Failed is the outcome of an attempt that failed; a context deadline makes
// it Unknown, since the store may have applied it before the client gave up.
func Failed(err error) Outcome {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrTimeout) {
		return Outcome{Class: Unknown, Err: err}
	}
	return Outcome{Class: Error, Err: err}
}

// ErrTimeout marks an attempt that did not finish within the attempt timeout.
var ErrTimeout = errors.New("attempt timed out")

// Mark is one named instant inside an attempt, measured from the moment the
// burst's gate opened (monotonic clock).
type Mark struct {
	Name string
	At   time.Duration
}
