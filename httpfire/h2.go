package httpfire

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/racetest/racetest/runner"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// recvWindow is the flow-control window racetest grants the server, for the
// connection and for each stream: responses never wait for a WINDOW_UPDATE.
const recvWindow = 1 << 30

// errRefused marks a stream the server refused before processing it
// (REFUSED_STREAM, or beyond a GOAWAY's last stream): it did not run.
var errRefused = errors.New("the server refused the stream before processing it")

// h2App is one replica over HTTP/2: every session is a stream on the app's
// one connection, so that the whole burst can be released in one write.
type h2App struct {
	t       *Target
	replica int

	mu       sync.Mutex
	conn     *h2Conn
	sessions []*h2Session
	held     []byte // the final DATA frames of the armed burst
	burst    *burst
	wave     int
}

type h2Session struct {
	a      *h2App
	worker int
	// Set by the app's arm under a.mu, before the gate.
	burst  *burst
	st     *h2Stream
	armErr error
}

func (a *h2App) order() int { return a.replica }

func (a *h2App) attempts() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.sessions)
}

func (a *h2App) Session(_ context.Context, worker int) (runner.Session, error) {
	s := &h2Session{a: a, worker: worker}
	a.mu.Lock()
	a.sessions = append(a.sessions, s)
	sort.Slice(a.sessions, func(i, j int) bool { return a.sessions[i].worker < a.sessions[j].worker })
	a.mu.Unlock()
	return s, nil
}

func (a *h2App) Close() error {
	a.t.unregister(a)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.conn != nil {
		a.conn.close()
	}
	return nil
}

// arm opens every session's stream for b — HEADERS, and the body but its
// last byte — in one write, and keeps each stream's final DATA frame (with
// END_STREAM) back for the release.
func (a *h2App) arm(ctx context.Context, b *burst) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.wave = 0
	if err := a.armLocked(ctx, b); err != nil {
		return err
	}
	b.releasers = append(b.releasers, a)
	b.armed += len(a.sessions)
	return nil
}

func (a *h2App) armLocked(ctx context.Context, b *burst) error {
	a.burst, a.held = b, nil
	for _, s := range a.sessions {
		s.burst, s.st, s.armErr = b, nil, nil
	}
	fail := func(err error) error {
		for _, s := range a.sessions {
			if s.armErr == nil {
				s.armErr = err
			}
		}
		return err
	}
	if a.conn == nil || !a.conn.usable() {
		if a.conn != nil {
			a.conn.close()
		}
		a.conn = nil
		conn, err := a.t.dialH2(ctx)
		if err != nil {
			return fail(err)
		}
		a.conn = conn
	}
	c := a.conn
	type request struct {
		s      *h2Session
		fields []hpack.HeaderField
		body   []byte
	}
	reqs := make([]request, 0, len(a.sessions))
	total := 0
	for _, s := range a.sessions {
		r, err := a.t.c.render(b.varsFor(s.worker))
		if err != nil {
			s.armErr = err
			continue
		}
		reqs = append(reqs, request{s, a.t.c.http2Fields(r), r.body})
		total += len(r.body)
	}
	if len(reqs) == 0 {
		return fail(errors.New("no request could be rendered"))
	}
	if err := c.reserve(ctx, len(reqs), total); err != nil {
		return fail(err)
	}
	var held bytes.Buffer
	hf := http2.NewFramer(&held, nil)
	err := c.write(func(fr *http2.Framer) error {
		for _, r := range reqs {
			st := c.open()
			r.s.st = st
			if err := c.writeHeaders(fr, st.id, r.fields); err != nil {
				return err
			}
			body, last := r.body, []byte(nil)
			if len(body) > 0 {
				body, last = body[:len(body)-1], body[len(body)-1:]
			}
			for len(body) > 0 {
				n := min(len(body), int(c.peerMaxFrame()))
				if err := fr.WriteData(st.id, false, body[:n]); err != nil {
					return err
				}
				body = body[n:]
			}
			// A request with no body still ends with a DATA frame: an empty
			// one carrying END_STREAM, held back like any other.
			if err := hf.WriteData(st.id, true, last); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		c.fail(err)
		return fail(fmt.Errorf("writing the requests before the release: %w", err))
	}
	a.held = held.Bytes()
	return nil
}

// fire writes every held final frame of the app's streams in one write, so
// that they share a TCP segment.
func (a *h2App) fire(at time.Time) {
	// Recorded before the write: a response may come back before the
	// write returns, and its response time runs from here.
	a.burst.sent(at)
	err := a.conn.writeRaw(a.held)
	if err != nil {
		a.conn.fail(fmt.Errorf("releasing the held frames: %w", err))
	}
}

func (s *h2Session) Attempt(ctx context.Context, subj runner.Subject, w *runner.Worker) runner.Outcome {
	b, ok := subj.Data.(*burst)
	if !ok {
		return runner.Failed(errors.New("httpfire: the subject was not made by this target"))
	}
	b.attempts.Add(1)
	a := s.a
	if w.Wave > 0 {
		// A later wave at the same subject: the first of its attempts opens
		// every stream and releases them at once; the gate did the rest.
		a.mu.Lock()
		if a.wave != w.Wave {
			a.wave = w.Wave
			if a.armLocked(ctx, b) == nil {
				a.fire(time.Now())
			}
			b.mu.Lock()
			b.notSynchronous += len(a.sessions)
			b.mu.Unlock()
		}
		a.mu.Unlock()
	} else if s.burst == b {
		// Wait for the response at once; the held frames leave with the others.
		b.arrive()
	}
	a.mu.Lock()
	st, armErr, conn := s.st, s.armErr, a.conn
	if s.burst != b && armErr == nil {
		armErr = errors.New("the session was not armed for this burst")
	}
	a.mu.Unlock()
	if armErr != nil {
		return b.outcome(runner.Failed(armErr))
	}
	select {
	case <-st.done:
	case <-ctx.Done():
		conn.cancel(st.id)
		return b.outcome(runner.Outcome{Class: runner.Unknown, Err: fmt.Errorf("no response in time: %w", context.Cause(ctx))})
	}
	if st.err != nil {
		if errors.Is(st.err, errRefused) {
			return b.outcome(runner.Failed(st.err))
		}
		return b.outcome(runner.Outcome{Class: runner.Unknown, Err: fmt.Errorf("no response (the request may have run): %w", st.err)})
	}
	// Every held frame of the connection left in one write, at the burst's
	// first send.
	var took time.Duration
	if sent := b.sentFirst.Load(); sent != 0 {
		took = time.Since(time.Unix(0, sent))
	}
	b.answer(st.status, st.header, "HTTP/2.0", took)
	return b.outcome(s.a.t.c.rules.classify(st.status, st.body))
}

func (s *h2Session) Close() error {
	a := s.a
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, x := range a.sessions {
		if x == s {
			a.sessions = append(a.sessions[:i], a.sessions[i+1:]...)
			break
		}
	}
	return nil
}

// h2Conn is one HTTP/2 client connection, just enough of one to hold back
// and release a burst: no priorities, no pushes, no request body beyond the
// flow-control window it was given.
type h2Conn struct {
	t  *Target
	nc net.Conn
	fr *http2.Framer // reads from nc; writes into wbuf, flushed under wmu

	wmu  sync.Mutex
	wbuf bytes.Buffer
	henc *hpack.Encoder
	hbuf bytes.Buffer

	mu          sync.Mutex
	streams     map[uint32]*h2Stream
	nextID      uint32
	peerStreams uint32
	maxFrame    uint32
	sendWin     int64 // the server's window for the connection
	unacked     uint32
	err         error
	goaway      bool
}

type h2Stream struct {
	id       uint32
	done     chan struct{}
	status   int
	header   http.Header
	body     []byte
	err      error
	finished bool
}

func (t *Target) dialH2(ctx context.Context) (*h2Conn, error) {
	nc, err := t.dial(ctx, []string{"h2", "http/1.1"})
	if err != nil {
		return nil, err
	}
	addr := t.c.addr
	if tc, ok := nc.(*tls.Conn); ok {
		if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
			nc.Close()
			if p == "" {
				p = "no protocol (so HTTP/1.1)"
			}
			return nil, &ConnectError{Addr: addr, Msg: fmt.Sprintf(
				"single-packet needs HTTP/2, but %s chose %s in the TLS handshake (ALPN): it serves HTTP/1.1 only here — use --release last-byte", addr, p)}
		}
	}
	c := &h2Conn{t: t, nc: nc, streams: map[uint32]*h2Stream{}, nextID: 1,
		peerStreams: math.MaxUint32, maxFrame: 16384, sendWin: 65535}
	br := bufio.NewReaderSize(nc, 64<<10)
	c.fr = http2.NewFramer(&c.wbuf, br)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = 1 << 20
	c.henc = hpack.NewEncoder(&c.hbuf)
	if err := c.handshake(br); err != nil {
		nc.Close()
		return nil, err
	}
	go c.readLoop()
	return c, nil
}

func (c *h2Conn) handshake(br *bufio.Reader) error {
	addr, timeout := c.t.c.addr, c.t.c.timeout
	err := c.write(func(fr *http2.Framer) error {
		c.wbuf.WriteString(http2.ClientPreface)
		if err := fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 0},
			http2.Setting{ID: http2.SettingInitialWindowSize, Val: recvWindow}); err != nil {
			return err
		}
		return fr.WriteWindowUpdate(0, recvWindow-65535)
	})
	if err != nil {
		return &ConnectError{Addr: addr, Msg: fmt.Sprintf("sending the HTTP/2 preface to %s: %v", addr, err), Err: err}
	}
	c.nc.SetReadDeadline(time.Now().Add(timeout))
	defer c.nc.SetReadDeadline(time.Time{})
	peek, err := br.Peek(9)
	h2c := c.t.c.scheme == "http"
	switch {
	case bytes.HasPrefix(peek, []byte("HTTP/1")):
		return &ConnectError{Addr: addr, Msg: fmt.Sprintf(
			"single-packet over http:// speaks HTTP/2 with prior knowledge (h2c), and %s answered in HTTP/1.1: it serves HTTP/1.1 only — use --release last-byte (or https:// if it speaks HTTP/2 over TLS)", addr)}
	case err != nil && h2c:
		return &ConnectError{Addr: addr, Msg: fmt.Sprintf(
			"%s did not answer the HTTP/2 preface (%v): it does not speak HTTP/2 over cleartext (h2c) — use --release last-byte", addr, err), Err: err}
	case err != nil:
		return &ConnectError{Addr: addr, Msg: fmt.Sprintf("%s did not answer the HTTP/2 preface: %v", addr, err), Err: err}
	}
	f, err := c.fr.ReadFrame()
	if err != nil {
		return &ConnectError{Addr: addr, Msg: fmt.Sprintf("reading %s's HTTP/2 settings: %v", addr, err), Err: err}
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		return &ConnectError{Addr: addr, Msg: fmt.Sprintf("%s broke the HTTP/2 handshake: its first frame was %v, not SETTINGS", addr, f.Header().Type)}
	}
	c.applySettings(sf)
	if err := c.write(func(fr *http2.Framer) error { return fr.WriteSettingsAck() }); err != nil {
		return &ConnectError{Addr: addr, Msg: fmt.Sprintf("acknowledging %s's HTTP/2 settings: %v", addr, err), Err: err}
	}
	return nil
}

func (c *h2Conn) applySettings(sf *http2.SettingsFrame) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sf.ForeachSetting(func(s http2.Setting) error {
		switch s.ID {
		case http2.SettingMaxConcurrentStreams:
			c.peerStreams = s.Val
		case http2.SettingMaxFrameSize:
			c.maxFrame = s.Val
		}
		return nil
	})
}

func (c *h2Conn) maxStreams() uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peerStreams
}

func (c *h2Conn) peerMaxFrame() uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.maxFrame
}

// usable: the connection can open a burst's streams.
func (c *h2Conn) usable() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err == nil && !c.goaway && c.nextID < 1<<30
}

// reserve checks that n more streams with total body bytes fit the server's
// limits, waiting a little for its WINDOW_UPDATE after the last burst.
func (c *h2Conn) reserve(ctx context.Context, n, total int) error {
	deadline := time.Now().Add(c.t.c.timeout)
	for {
		c.mu.Lock()
		err, active, max, win := c.err, len(c.streams), c.peerStreams, c.sendWin
		if err == nil && int64(total) <= win && uint32(active+n) <= max {
			c.sendWin -= int64(total)
			c.mu.Unlock()
			return nil
		}
		c.mu.Unlock()
		switch {
		case err != nil:
			return err
		case time.Now().After(deadline) || ctx.Err() != nil:
			if uint32(active+n) > max {
				return fmt.Errorf("the server allows %d HTTP/2 streams at once and %d are still open: the burst needs %d", max, active, n)
			}
			return fmt.Errorf("the server did not open its HTTP/2 flow-control window for the request bodies (%d bytes needed, %d open)", total, win)
		}
		time.Sleep(time.Millisecond)
	}
}

// open allocates the next stream.
func (c *h2Conn) open() *h2Stream {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := &h2Stream{id: c.nextID, done: make(chan struct{})}
	c.nextID += 2
	c.streams[st.id] = st
	return st
}

// writeHeaders encodes fields and writes them as HEADERS (and CONTINUATION
// frames, for a block larger than a frame), without END_STREAM. Called
// inside write, so the HPACK state follows the order on the wire.
func (c *h2Conn) writeHeaders(fr *http2.Framer, id uint32, fields []hpack.HeaderField) error {
	c.hbuf.Reset()
	for _, f := range fields {
		if err := c.henc.WriteField(f); err != nil {
			return err
		}
	}
	block, max := c.hbuf.Bytes(), int(c.peerMaxFrame())
	first := block[:min(len(block), max)]
	block = block[len(first):]
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndHeaders: len(block) == 0}); err != nil {
		return err
	}
	for len(block) > 0 {
		n := min(len(block), max)
		if err := fr.WriteContinuation(id, n == len(block), block[:n]); err != nil {
			return err
		}
		block = block[n:]
	}
	return nil
}

// write builds frames with fn and sends them in one write.
func (c *h2Conn) write(fn func(fr *http2.Framer) error) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wbuf.Reset()
	if err := fn(c.fr); err != nil {
		return err
	}
	c.nc.SetWriteDeadline(time.Now().Add(c.t.c.timeout))
	_, err := c.nc.Write(c.wbuf.Bytes())
	c.nc.SetWriteDeadline(time.Time{})
	return err
}

func (c *h2Conn) writeRaw(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.nc.SetWriteDeadline(time.Now().Add(c.t.c.timeout))
	_, err := c.nc.Write(b)
	c.nc.SetWriteDeadline(time.Time{})
	return err
}

func (c *h2Conn) readLoop() {
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				c.finish(se.StreamID, fmt.Errorf("malformed response: %w", err))
				continue
			}
			c.fail(fmt.Errorf("HTTP/2 connection lost: %w", err))
			return
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			c.onHeaders(f)
		case *http2.DataFrame:
			c.onData(f)
		case *http2.RSTStreamFrame:
			err := fmt.Errorf("the server reset the stream (%v)", f.ErrCode)
			if f.ErrCode == http2.ErrCodeRefusedStream {
				err = fmt.Errorf("%w (%v)", errRefused, f.ErrCode)
			}
			c.finish(f.StreamID, err)
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.applySettings(f)
				c.write(func(fr *http2.Framer) error { return fr.WriteSettingsAck() })
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				c.write(func(fr *http2.Framer) error { return fr.WritePing(true, f.Data) })
			}
		case *http2.GoAwayFrame:
			c.onGoAway(f)
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 {
				c.mu.Lock()
				c.sendWin += int64(f.Increment)
				c.mu.Unlock()
			}
		}
	}
}

func (c *h2Conn) onHeaders(f *http2.MetaHeadersFrame) {
	c.mu.Lock()
	st := c.streams[f.StreamID]
	if st != nil && st.status == 0 {
		code, err := strconv.Atoi(f.PseudoValue("status"))
		if err == nil && code >= 200 {
			st.status = code
			st.header = http.Header{}
			for _, hf := range f.RegularFields() {
				st.header.Add(hf.Name, hf.Value)
			}
		}
	}
	c.mu.Unlock()
	if f.StreamEnded() {
		c.finish(f.StreamID, nil)
	}
}

func (c *h2Conn) onData(f *http2.DataFrame) {
	data := f.Data()
	c.mu.Lock()
	if st := c.streams[f.StreamID]; st != nil && len(st.body) < maxBodyKept {
		st.body = append(st.body, data[:min(len(data), maxBodyKept-len(st.body))]...)
	}
	c.unacked += f.Length
	inc := uint32(0)
	if c.unacked >= recvWindow/2 {
		inc, c.unacked = c.unacked, 0
	}
	c.mu.Unlock()
	if inc > 0 {
		c.write(func(fr *http2.Framer) error { return fr.WriteWindowUpdate(0, inc) })
	}
	if f.StreamEnded() {
		c.finish(f.StreamID, nil)
	}
}

func (c *h2Conn) onGoAway(f *http2.GoAwayFrame) {
	c.mu.Lock()
	c.goaway = true
	var refused []uint32
	for id := range c.streams {
		if id > f.LastStreamID {
			refused = append(refused, id)
		}
	}
	c.mu.Unlock()
	for _, id := range refused {
		c.finish(id, fmt.Errorf("%w (GOAWAY %v)", errRefused, f.ErrCode))
	}
}

func (c *h2Conn) finish(id uint32, err error) {
	c.mu.Lock()
	st := c.streams[id]
	if st == nil || st.finished {
		c.mu.Unlock()
		return
	}
	delete(c.streams, id)
	if err == nil && st.status == 0 {
		err = errors.New("the stream ended without a response")
	}
	st.finished, st.err = true, err
	c.mu.Unlock()
	close(st.done)
}

// fail ends every open stream with err; the connection is re-made at the
// next burst.
func (c *h2Conn) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	ids := make([]uint32, 0, len(c.streams))
	for id := range c.streams {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	for _, id := range ids {
		c.finish(id, err)
	}
	c.nc.Close()
}

// cancel gives up on a stream whose attempt timed out.
func (c *h2Conn) cancel(id uint32) {
	c.finish(id, context.Canceled)
	c.write(func(fr *http2.Framer) error { return fr.WriteRSTStream(id, http2.ErrCodeCancel) })
}

func (c *h2Conn) close() { c.fail(errors.New("connection closed")) }

// probeWait bounds how long auto's probe waits for the server's answer to
// HTTP/2's preface: an HTTP/1.1 server answers it at once (an error
// status), one that says nothing is taken to speak HTTP/1.1 only.
const probeWait = 2 * time.Second

// probeH2 asks the server once whether it speaks HTTP/2: for https://, the
// TLS handshake's ALPN; for http://, HTTP/2's preface with prior knowledge
// (h2c), answered by a SETTINGS frame. proto is "" when it does not; streams
// is its limit on concurrent streams. The only error is a server that could
// not be reached. To an HTTP/1.1 server the preface reads as a request
// "PRI * HTTP/2.0", for "*": no resource, and answered with an error status
// (curl's --http2-prior-knowledge sends the same).
func (t *Target) probeH2(ctx context.Context) (proto string, streams uint32, err error) {
	nc, err := t.dial(ctx, []string{"h2", "http/1.1"})
	if err != nil {
		return "", 0, err
	}
	defer nc.Close()
	proto = "h2c (HTTP/2 with prior knowledge)"
	if tc, ok := nc.(*tls.Conn); ok {
		if tc.ConnectionState().NegotiatedProtocol != "h2" {
			return "", 0, nil
		}
		proto = "h2 (TLS ALPN)"
	}
	var out bytes.Buffer
	out.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&out, bufio.NewReader(nc))
	if err := fr.WriteSettings(); err != nil {
		return "", 0, nil
	}
	nc.SetDeadline(time.Now().Add(min(t.c.timeout, probeWait)))
	if _, err := nc.Write(out.Bytes()); err != nil {
		return "", 0, nil
	}
	f, err := fr.ReadFrame()
	if err != nil {
		return "", 0, nil
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		return "", 0, nil
	}
	streams = math.MaxUint32
	if v, ok := sf.Value(http2.SettingMaxConcurrentStreams); ok {
		streams = v
	}
	out.Reset()
	if fr.WriteGoAway(0, http2.ErrCodeNo, nil) == nil {
		_, _ = nc.Write(out.Bytes())
	}
	return proto, streams, nil
}
