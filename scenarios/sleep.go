package scenarios

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/racetest/racetest/runner"
)

// Sleep waits d (the run's --gap between check and act, a lease holder's
// pause), or until ctx ends. For sub-millisecond precision on the embedded
// store, see memstore.Wait.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ErrReconnectTimeout is the error of an attempt whose deadline ran out
// while it re-made the connection an earlier timed-out attempt cost: the
// server is not to blame, the attempt timeout is shorter than a connection
// setup. It is a timeout (runner.Unknown), in one line every such attempt
// shares, so the report prints its cause once.
var ErrReconnectTimeout = fmt.Errorf("%w: re-making the connection an earlier timed-out attempt cost took longer than the attempt timeout (the server answered before; raise --timeout)", runner.ErrTimeout)

// Expired reports whether ctx's deadline has passed, even in the instant
// before ctx.Err() says so: a dial that gave up at the deadline returns a
// network timeout, not the context's error.
func Expired(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// CleanupTimeout bounds the dropping of a run's objects. It is short on
// purpose: a cleanup runs after Ctrl-C, while the user waits.
const CleanupTimeout = 15 * time.Second

// CleanupContext is the context a cleanup runs under: never cancelled by
// ctx (Ctrl-C must not stop the dropping of what the run made), but with a
// deadline of its own, so that a server that stopped answering cannot hold
// the process forever.
func CleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), CleanupTimeout)
}

// NoAnswer reports whether err is a server that did not answer in time, as
// opposed to one that refused or failed: a cleanup tries such a server
// again until its own deadline, since a paused server (a stopped VM, a
// stalled disk) that resumes would then drop what the run made, and a
// failure reported for a drop that succeeds later is a lie.
func NoAnswer(err error) bool {
	var ne net.Error
	return err != nil && (errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout())
}

// RetryNoAnswer calls connect until it succeeds, fails otherwise than
// NoAnswer, or ctx ends.
func RetryNoAnswer[T any](ctx context.Context, connect func(context.Context) (T, error)) (T, error) {
	for {
		c, err := connect(ctx)
		if !NoAnswer(err) || ctx.Err() != nil {
			return c, err
		}
		select {
		case <-ctx.Done():
			return c, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}
