package redisstore

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/racetest/racetest/runner"
)

// serverError is an error reply from the server ("-OOM ..."), as the driver
// hands it over: a redis.Error.
type serverError string

func (e serverError) Error() string { return string(e) }
func (serverError) RedisError()     {}

// classifySession is a session as far as classification reaches into it:
// the connection's password, which no message may show.
func classifySession(password string) *session {
	return &session{app: &app{t: &target{c: &conn{password: password}}}}
}

// TestClassifyInsert: each reply SET NX can get, without a server, and the
// outcome the report must count it as. Only the nil reply is the guard's
// "already done"; a reply that never came may have been applied, so it is
// unknown; anything else is an error, never a refusal.
func TestClassifyInsert(t *testing.T) {
	for _, c := range []struct {
		name     string
		err      error
		want     runner.Class
		inserted bool
		msg      string // the outcome's error, exactly ("" for none)
	}{
		{"OK", nil, runner.Executed, true, ""},
		{"nil reply: the key exists", redis.Nil, runner.Declined, false, "key already exists (SET NX replied nil)"},
		{"attempt deadline", context.DeadlineExceeded, runner.Unknown, false, "redis SET NX: no reply in time (it may have been applied)"},
		{"socket read deadline", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, runner.Unknown, false,
			"redis SET NX: no reply in time (it may have been applied)"},
		{"out of memory", serverError("OOM command not allowed when used memory > 'maxmemory'."), runner.Error, false,
			"redis SET NX: OOM command not allowed when used memory > 'maxmemory'."},
		{"read-only replica", serverError("READONLY You can't write against a read only replica."), runner.Error, false,
			"redis SET NX: READONLY You can't write against a read only replica."},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, runner.Error, false,
			"redis SET NX: read tcp: connection reset by peer"},
		{"connection closed", redis.ErrClosed, runner.Error, false, "redis SET NX: connection closed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o, inserted := classifyInsert(context.Background(), classifySession(""), c.err)
			if o.Class != c.want || inserted != c.inserted {
				t.Errorf("SET NX gave %v: %s (inserted %v), want %s (inserted %v)", c.err, o.Class, inserted, c.want, c.inserted)
			}
			got := ""
			if o.Err != nil {
				got = o.Err.Error()
			}
			if got != c.msg {
				t.Errorf("SET NX gave %v: the outcome says %q, want %q", c.err, got, c.msg)
			}
			if c.err != nil && !errors.Is(o.Err, c.err) && c.want != runner.Declined {
				t.Errorf("the outcome %v no longer wraps the driver's error %v (errors.Is)", o.Err, c.err)
			}
		})
	}
}

// TestClassifyKeepsThePasswordOut: a server reply that quotes the password
// (an AUTH error echoing it) is counted as an error whose message never
// shows it.
func TestClassifyKeepsThePasswordOut(t *testing.T) {
	o, _ := classifyInsert(context.Background(), classifySession("s3cret"), serverError("WRONGPASS invalid password s3cret"))
	if o.Class != runner.Error || strings.Contains(o.Err.Error(), "s3cret") || !strings.Contains(o.Err.Error(), "xxxxx") {
		t.Errorf("got %s %q, want an error with the password replaced by xxxxx", o.Class, o.Err)
	}
}

// TestClassifyWhenTheAttemptEnded: the driver often reports its own error
// (a closed connection) when the attempt's context ended first. The
// context's reason is then named beside it; when it was the attempt's
// deadline, the insert may have been applied, so it is unknown, not an
// error; when the run was interrupted, it is an error that says so once.
func TestClassifyWhenTheAttemptEnded(t *testing.T) {
	expired, cancel := context.WithDeadline(context.Background(), time.Unix(1, 0))
	defer cancel()
	o, _ := classifyInsert(expired, classifySession(""), redis.ErrClosed)
	if o.Class != runner.Unknown || o.Err.Error() != "redis SET NX: connection closed (context deadline exceeded)" {
		t.Errorf("deadline passed, driver said closed: %s %q, want unknown naming the deadline", o.Class, o.Err)
	}

	interrupted := errors.New("interrupted (Ctrl-C)")
	ctx, stop := context.WithCancelCause(context.Background())
	stop(interrupted)
	o, _ = classifyInsert(ctx, classifySession(""), redis.ErrClosed)
	if o.Class != runner.Error || o.Err.Error() != "redis SET NX: connection closed (interrupted (Ctrl-C))" || !errors.Is(o.Err, interrupted) {
		t.Errorf("run interrupted, driver said closed: %s %q, want an error naming the interruption", o.Class, o.Err)
	}
	// The driver's error is the cause itself: named once, not twice.
	o, _ = classifyInsert(ctx, classifySession(""), interrupted)
	if o.Class != runner.Error || o.Err.Error() != "redis SET NX: interrupted (Ctrl-C)" {
		t.Errorf("the driver returned the cause: %s %q, want it named once", o.Class, o.Err)
	}
}
