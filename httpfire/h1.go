package httpfire

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/racetest/racetest/runner"
)

// maxBodyKept is how much of a response body a success pattern can see.
const maxBodyKept = 64 << 10

// maxBodyDrained is how much more is read to keep the connection reusable.
const maxBodyDrained = 4 << 20

// h1App is one replica over HTTP/1.1: nothing is shared between its
// sessions, each of which owns its connection.
type h1App struct{ t *Target }

// Session makes worker's session. Its connection is dialled when it is
// first armed, in Reset, after the burst's setup request: a server that
// gives each connection a thread from accept on (gunicorn's sync and
// gthread workers) would otherwise park its threads on racetest's idle
// connections, and the setup request would wait behind them until it timed
// out.
func (a h1App) Session(_ context.Context, worker int) (runner.Session, error) {
	s := &h1Session{t: a.t, worker: worker}
	a.t.register(s)
	return s, nil
}

func (h1App) Close() error { return nil }

// h1Session is one attempt's own keep-alive connection, written and read
// raw so that the release can hold back a request's tail.
type h1Session struct {
	t      *Target
	worker int
	conn   net.Conn
	br     *bufio.Reader

	// Set by arm, before the gate; read by this session's attempt and by
	// the release loop after the gate (the gate orders them).
	burst    *burst
	held     []byte // what is written at the release
	heldHead bool   // the held tail includes the header's end: the server has no request yet
	looped   bool   // the release loop writes held (last-byte); else the attempt does
	armErr   error
	sendErr  error
	sentAny  bool          // some of the request reached the connection
	sentAt   time.Time     // when the request's last part started to leave
	fired    chan struct{} // closed once the held bytes were written (or failed)
}

func (s *h1Session) order() int    { return s.worker }
func (s *h1Session) attempts() int { return 1 }

func (s *h1Session) connect(ctx context.Context) error {
	conn, err := s.t.dial(ctx, []string{"http/1.1"})
	if err != nil {
		return err
	}
	s.conn, s.br = conn, bufio.NewReaderSize(conn, 16<<10)
	if s.t.c.warmup != nil {
		if err := s.warm(ctx); err != nil {
			s.close()
			return err
		}
	}
	return nil
}

// warm fetches the warm-up URL on the new connection: a server (or a proxy)
// that sets a connection up lazily does so now, not inside a burst.
func (s *h1Session) warm(ctx context.Context) error {
	u := s.t.c.warmup
	req := "GET " + requestTarget(u) + " HTTP/1.1\r\nHost: " + u.Host + "\r\nUser-Agent: " + userAgent + "\r\n\r\n"
	ctx, cancel := context.WithTimeout(ctx, s.t.c.timeout)
	defer cancel()
	s.conn.SetDeadline(time.Now().Add(s.t.c.timeout))
	defer s.conn.SetDeadline(time.Time{})
	if _, err := io.WriteString(s.conn, req); err != nil {
		return fmt.Errorf("warm-up GET %s: %w", u.Redacted(), err)
	}
	resp, _, err := s.read(ctx, "GET")
	if err != nil {
		return fmt.Errorf("warm-up GET %s: %w", u.Redacted(), err)
	}
	if resp.Close {
		return fmt.Errorf("warm-up GET %s: the server closed the connection after answering, so it cannot stay warm; drop --warmup", u.Redacted())
	}
	return nil
}

// alive reports whether the connection can carry the next request: a server
// may have closed an idle keep-alive connection since the last burst.
func (s *h1Session) alive() bool {
	if s.conn == nil {
		return false
	}
	s.conn.SetReadDeadline(aLongTimeAgo)
	_, err := s.br.Peek(1)
	s.conn.SetReadDeadline(time.Time{})
	// A timeout means nothing is waiting: the idle connection is fine. Bytes
	// or EOF mean it is closed or out of step.
	return err != nil && isTimeout(err)
}

func (s *h1Session) close() {
	if s.conn != nil {
		s.conn.Close()
		s.conn, s.br = nil, nil
	}
}

// arm makes the session ready for b: a live connection, the rendered
// request, and for last-byte everything but the tail already written.
func (s *h1Session) arm(ctx context.Context, b *burst) error {
	return s.prepare(ctx, b, s.t.c.release == LastByte)
}

func (s *h1Session) prepare(ctx context.Context, b *burst, hold bool) error {
	s.burst, s.held, s.heldHead, s.looped, s.armErr, s.sendErr, s.sentAny = b, nil, false, false, nil, nil, false
	s.fired = make(chan struct{})
	if !s.alive() {
		s.close()
		if err := s.connect(ctx); err != nil {
			s.armErr = err
			return err
		}
	}
	r, err := s.t.c.render(b.varsFor(s.worker))
	if err != nil {
		s.armErr = err
		return err
	}
	req, head := s.t.c.http1(r)
	if !hold {
		s.held, s.heldHead = req, true
		return nil
	}
	// Hold back the final byte: of the body when there is one (the server has
	// parsed the headers and its handler waits on the body, so the release
	// costs it one read), else of the header block.
	cut := len(req) - 1
	s.conn.SetWriteDeadline(time.Now().Add(s.t.c.timeout))
	_, err = s.conn.Write(req[:cut])
	s.conn.SetWriteDeadline(time.Time{})
	if err != nil {
		s.close()
		s.armErr = fmt.Errorf("writing the request before the release: %w", err)
		return s.armErr
	}
	s.held, s.heldHead, s.looped, s.sentAny = req[cut:], cut < head, true, true
	b.releasers = append(b.releasers, s)
	b.armed++
	return nil
}

// fire writes the held bytes: from the release loop, or from the attempt.
func (s *h1Session) fire(at time.Time) {
	defer close(s.fired)
	s.conn.SetWriteDeadline(at.Add(s.t.c.timeout))
	at = time.Now()
	s.sentAt = at
	_, err := s.conn.Write(s.held)
	s.burst.sent(at)
	s.conn.SetWriteDeadline(time.Time{})
	if err != nil {
		s.sendErr = err
		// Wake the attempt, which may already be waiting for a response.
		s.conn.Close()
	} else {
		s.sentAny = true
	}
}

func (s *h1Session) Attempt(ctx context.Context, subj runner.Subject, w *runner.Worker) runner.Outcome {
	b, ok := subj.Data.(*burst)
	if !ok {
		return runner.Failed(errors.New("httpfire: the subject was not made by this target"))
	}
	b.attempts.Add(1)
	if s.burst != b || w.Wave > 0 {
		// Not armed for this wave (a later wave at the same subject): the
		// gate alone releases it.
		s.prepare(ctx, b, false)
		b.mu.Lock()
		b.notSynchronous++
		b.mu.Unlock()
	}
	if s.armErr != nil {
		return b.outcome(runner.Failed(s.armErr))
	}
	if s.looped {
		// Wait for the response at once; the tail leaves with the others.
		b.arrive()
	} else {
		s.fire(time.Now())
	}
	resp, body, err := s.read(ctx, s.t.c.method)
	if err != nil {
		select {
		case <-s.fired:
		case <-ctx.Done():
		}
		s.close()
		if s.sendErr != nil {
			err := fmt.Errorf("sending the request: %w", s.sendErr)
			if s.heldHead && !s.sentAny {
				return b.outcome(runner.Failed(err))
			}
			// Part of it reached the server, which may have acted on it.
			return b.outcome(runner.Outcome{Class: runner.Unknown, Err: err})
		}
		if ctx.Err() != nil || isTimeout(err) {
			// The read deadline is the context's: it may expire a moment
			// before the context says so.
			cause := context.Cause(ctx)
			if cause == nil {
				cause = runner.ErrTimeout
			}
			return b.outcome(runner.Outcome{Class: runner.Unknown, Err: fmt.Errorf("no response in time: %w", cause)})
		}
		return b.outcome(runner.Outcome{Class: runner.Unknown, Err: fmt.Errorf("the server closed the connection before answering (the request may have run): %w", err)})
	}
	done := time.Now()
	// The write that the response answers is over; fired orders its
	// record before this read of it.
	<-s.fired
	if resp.Close || s.t.probe.Serial() {
		// A server with one worker that keeps connections alive reads
		// this one until it closes: kept open, it would leave the burst's
		// other requests, and the effects check after it, unanswered.
		s.close()
	}
	b.answer(resp.StatusCode, resp.Header, resp.Proto, done.Sub(s.sentAt))
	return b.outcome(s.t.c.rules.classify(resp.StatusCode, body))
}

// read reads one response, honouring ctx, and keeps up to maxBodyKept of
// its body. The connection stays usable unless the response says close.
func (s *h1Session) read(ctx context.Context, method string) (*http.Response, []byte, error) {
	if dl, ok := ctx.Deadline(); ok {
		s.conn.SetReadDeadline(dl)
	}
	conn := s.conn
	stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(aLongTimeAgo) })
	defer func() {
		if stop() {
			conn.SetReadDeadline(time.Time{})
		}
	}()
	resp, err := http.ReadResponse(s.br, &http.Request{Method: method})
	if err != nil {
		return nil, nil, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyKept))
	if err == nil {
		var n int64
		n, err = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBodyDrained))
		if n == maxBodyDrained {
			resp.Close = true
		}
	}
	resp.Body.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("reading the response body: %w", err)
	}
	return resp, body, nil
}

func (s *h1Session) Close() error {
	s.t.unregister(s)
	s.close()
	return nil
}
