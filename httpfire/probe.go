package httpfire

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/racetest/racetest/runner"
)

// The server-concurrency probe: can the server answer a second request
// while a first one is unfinished? A server with one sync worker (gunicorn's
// default, a single-threaded dev server) reads one connection until its
// request is whole and answers nothing else meanwhile; a server that serves
// requests concurrently (Go's net/http, gunicorn's gthread, node, a proxy in
// front) answers the second at once. Unlike the response-time estimate
// (parallelism) it does not depend on how long the endpoint's requests
// take, so a one-worker server whose winning request does much more work
// than the refused ones (a check-then-insert: one insert, then fast 409s)
// cannot pass for a concurrent one.
//
// What it sends, and why that is harmless: "OPTIONS *", HTTP/1.1's request
// about the server itself rather than any resource (RFC 9110 §9.3.7). Go's
// net/http answers it without calling a handler; a WSGI or node app sees
// method OPTIONS and path "*", which no route of a real application
// matches. The held request is the same, left without the blank line that
// ends its header block, and closed unfinished: the server never has it
// whole, so nothing can act on it. The user's attempt request is never
// sent, nor anything with a body.
//
// It runs once, in Prepare, before racetest opens any other connection:
// a server that gives each connection a thread from accept on cannot find
// its threads taken by racetest's own idle connections,
// and it holds the first connection at most probeCeiling.

// probeFactor × the second request's time alone is how long the probe
// waits for it beside the held one; never less than probeFloor (a loaded
// machine can stall a concurrent server's answer for hundreds of
// milliseconds) unless --timeout is under twice that, never more than
// probeCeiling (gunicorn kills a sync worker silent for 30s).
const (
	probeFactor  = 20
	probeFloor   = time.Second
	probeCeiling = 5 * time.Second
	// probeRounds: a serial verdict needs every round to say so; one
	// answer beside a held request is proof of concurrency.
	probeRounds = 2
)

// probeServer runs the probe over the target's scheme, on HTTP/1.1: an
// HTTP/2 target is probed over HTTP/1.1 where the server also speaks it
// (h2c servers usually do; over TLS, where ALPN offers http/1.1), and the
// probe is not run where it does not.
func (t *Target) probeServer(ctx context.Context) runner.ServerProbe {
	notRun := func(format string, args ...any) runner.ServerProbe {
		return runner.ServerProbe{Result: runner.ProbeNotRun, Detail: fmt.Sprintf(format, args...) +
			"; the bursts are judged by the response-time estimate alone"}
	}
	solo, err := t.probeAlone(ctx)
	if err != nil {
		hint := ""
		if t.c.release == SinglePacket {
			hint = ": does the server speak only HTTP/2? the probe needs HTTP/1.1"
		}
		return notRun("OPTIONS * over HTTP/1.1, alone, got no answer (%v)%s", err, hint)
	}
	wait := roundWait(solo, t.c.timeout)
	var after []time.Duration
	for try := range probeRounds {
		r := t.probeRound(ctx, wait)
		switch {
		case r.err != nil:
			return notRun("%v", r.err)
		case r.beside:
			return runner.ServerProbe{Result: runner.ProbeConcurrent, Detail: besideDetail(r.took, solo, try, wait)}
		}
		after = append(after, r.took)
	}
	return runner.ServerProbe{Result: runner.ProbeSerial, Detail: fmt.Sprintf(
		"did not answer OPTIONS * on a second connection within %s while a first request was held unfinished (%d tries), and answered it %s after the first connection closed (alone: %s): it serves one request at a time",
		human(wait), probeRounds, human(maxD(after)), human(solo))}
}

// roundWait is how long a round waits for the second request beside the
// held first: probeFactor × the request's time alone, within probeFloor
// and probeCeiling, and within half the timeout: over TLS the second
// connection's handshake waits for the server too, and must finish within
// the timeout of its dial, once the held connection is closed.
func roundWait(solo, timeout time.Duration) time.Duration {
	return min(probeCeiling, max(probeFloor, probeFactor*solo), timeout/2)
}

// besideDetail says that the server answered beside a held request, on
// which try (counted from 0): a later try's answer followed a stall of a
// loaded machine, or a server busy elsewhere, worth knowing when the
// probe's rate of false alarms is.
func besideDetail(took, solo time.Duration, try int, wait time.Duration) string {
	detail := fmt.Sprintf("answered OPTIONS * on a second connection in %s while a first request was held unfinished (alone: %s): it serves requests concurrently",
		human(took), human(solo))
	if try > 0 {
		detail += fmt.Sprintf(" (on try %d; try 1 waited %s in vain)", try+1, human(wait))
	}
	return detail
}

// probeAlone times one OPTIONS * from dialling to its response.
func (t *Target) probeAlone(ctx context.Context) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, t.c.timeout)
	defer cancel()
	start := time.Now()
	if err := t.probeAsk(ctx); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// probeAsk dials, sends OPTIONS * and reads the response's head: any
// status, a 400 or a 501 included, is an answer.
func (t *Target) probeAsk(ctx context.Context) error {
	nc, err := t.dial(ctx, []string{"http/1.1"})
	if err != nil {
		return err
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(aLongTimeAgo) })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	if _, err := io.WriteString(nc, t.probeRequest(true)); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(nc), &http.Request{Method: http.MethodOptions})
	if err != nil {
		// The socket's deadline is the context's: either may be seen
		// first.
		if ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("no response within %s", t.c.timeout)
		}
		return err
	}
	resp.Body.Close()
	return nil
}

// probeRequest is OPTIONS * — whole, or held: without the blank line that
// ends the header block.
func (t *Target) probeRequest(whole bool) string {
	req := "OPTIONS * HTTP/1.1\r\nHost: " + t.c.host + "\r\nUser-Agent: " + userAgent + "\r\n"
	if whole {
		req += "Connection: close\r\n\r\n"
	}
	return req
}

// probeResult is one round: the second request answered beside the held
// one (took: its time), or only after the held one closed (took: from the
// close), or err when the round proved nothing.
type probeResult struct {
	beside bool
	took   time.Duration
	err    error
}

// probeRound holds a request unfinished on one connection and asks on a
// second, waiting up to wait for the answer; without one, it closes the
// held connection and waits for the answer again (up to the target's
// timeout): a server that then answers served the first connection alone.
func (t *Target) probeRound(ctx context.Context, wait time.Duration) probeResult {
	held, err := t.dial(ctx, []string{"http/1.1"})
	if err != nil {
		return probeResult{err: fmt.Errorf("the connection to hold a request on: %w", err)}
	}
	defer held.Close()
	held.SetWriteDeadline(time.Now().Add(t.c.timeout))
	if _, err := io.WriteString(held, t.probeRequest(false)); err != nil {
		return probeResult{err: fmt.Errorf("writing the held request: %w", err)}
	}
	held.SetWriteDeadline(time.Time{})

	askCtx, cancel := context.WithTimeout(ctx, wait+t.c.timeout)
	defer cancel()
	answered := make(chan error, 1)
	start := time.Now()
	go func() { answered <- t.probeAsk(askCtx) }()

	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case err := <-answered:
		took := time.Since(start)
		if err != nil {
			return probeResult{err: fmt.Errorf("OPTIONS * beside a held request got no answer (%v)", err)}
		}
		if !stillOpen(held) {
			// The server gave up on the held request (a header timeout)
			// before answering: a one-worker server does that too.
			return probeResult{err: fmt.Errorf("the server closed the held request's connection within %s, before the probe could tell whether it answers beside it", human(took))}
		}
		return probeResult{beside: true, took: took}
	case <-timer.C:
	case <-ctx.Done():
		return probeResult{err: context.Cause(ctx)}
	}
	held.Close()
	closed := time.Now()
	if err := <-answered; err != nil {
		return probeResult{err: fmt.Errorf("OPTIONS * got no answer beside a held request within %s, nor after it was closed (%v)", human(wait), err)}
	}
	return probeResult{took: time.Since(closed)}
}

// stillOpen reports whether the server has neither closed conn nor written
// to it.
func stillOpen(conn net.Conn) bool {
	conn.SetReadDeadline(aLongTimeAgo)
	defer conn.SetReadDeadline(time.Time{})
	var b [1]byte
	_, err := conn.Read(b[:])
	return err != nil && isTimeout(err)
}
