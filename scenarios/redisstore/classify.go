package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/redis/go-redis/v9"

	"github.com/racetest/racetest/runner"
)

// This file is the backend's outcome classification, apart from the calls
// that meet the errors, so that mutation testing (scripts/mutation.sh)
// measures it alone. Its decisions are ifs, not a switch: gremlins never
// mutates a switch's case expressions.

// classifyInsert reads SET NX's reply: OK inserted, nil is the duplicate key,
// and every other error stays an error (or unknown: see fail). The bool says
// whether this attempt inserted the key and goes on to the guarded action.
func classifyInsert(ctx context.Context, s *session, err error) (runner.Outcome, bool) {
	if err == nil {
		return runner.Done(), true
	}
	if errors.Is(err, redis.Nil) {
		return runner.Refused(errDuplicate), false
	}
	return s.fail(ctx, "SET NX", err), false
}

// fail is the outcome of a call that failed. A call that got no reply in time
// is unknown, not an error: the server may have applied it. The socket's
// deadline is the context's, and it can fire a moment before the context
// itself reports done, so the timeout is read from the error, not from ctx.
func (s *session) fail(ctx context.Context, op string, err error) runner.Outcome {
	if isTimeout(err) {
		// One wording whatever ended the wait, so the report counts these
		// together.
		return runner.Outcome{Class: runner.Unknown, Err: &wrapped{
			msg: fmt.Sprintf("redis %s: no reply in time (it may have been applied)", op), err: err}}
	}
	var e error = &wrapped{msg: fmt.Sprintf("redis %s: %s", op, describeErr(err, s.app.t.c.password)), err: err}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
		e = fmt.Errorf("%w (%w)", e, cause)
	}
	return runner.Failed(e)
}

// isTimeout reports whether err is a wait that ended without a reply: the
// context's deadline, or a socket's.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
