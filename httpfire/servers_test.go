package httpfire_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// subjects is an endpoint whose subjects must be made before they are
// used, as a coupon must exist before it is redeemed: PUT /setup?key=K
// makes K; POST /attempt?key=K checks whether K was redeemed and, if not,
// redeems it Gap later (200), else answers 409 Gap later; an unknown K is a
// 404.
// GET /count?key=K is how many times K was redeemed: the effects.
type subjects struct {
	Gap time.Duration
	// Serial holds one lock around every request, as a server with one
	// worker serves one request at a time.
	Serial bool
	// QuickRefusal refuses a redeemed subject at once, and only the
	// winner waits Gap before its write: the winner works longer than
	// the requests it refuses, and a queue of them looks, from the
	// response times, like requests served at once.
	QuickRefusal bool

	one  sync.Mutex // held around a whole request when Serial
	mu   sync.Mutex
	made map[string]bool
	done map[string]int
}

func newSubjects(gap time.Duration) *subjects {
	return &subjects{Gap: gap, made: map[string]bool{}, done: map[string]int{}}
}

func (s *subjects) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.Serial {
		s.one.Lock()
		defer s.one.Unlock()
	}
	key := r.URL.Query().Get("key")
	s.mu.Lock()
	made, done := s.made[key], s.done[key]
	switch r.URL.Path {
	case "/setup":
		s.made[key] = true
		s.mu.Unlock()
		fmt.Fprintln(w, "made")
		return
	case "/count":
		s.mu.Unlock()
		fmt.Fprintln(w, done)
		return
	}
	s.mu.Unlock()
	if s.QuickRefusal && made && done > 0 {
		http.Error(w, "already redeemed", http.StatusConflict)
		return
	}
	// Between the check and the write, or the refusal, the handler waits
	// Gap, as one waiting on a database does: every request takes about
	// Gap, redeemed or refused.
	time.Sleep(s.Gap)
	if !made {
		http.Error(w, "no such subject", http.StatusNotFound)
		return
	}
	if done > 0 {
		http.Error(w, "already redeemed", http.StatusConflict)
		return
	}
	s.mu.Lock()
	s.done[key]++
	s.mu.Unlock()
	fmt.Fprintln(w, "redeemed")
}

// newBoundedServer serves h on a listener that takes at most k connections
// at once and holds each one until it closes, as a server with k threads,
// each owning a connection from accept to close, does (gunicorn's sync
// workers; its gthread workers, for a connection that has not yet sent a
// request). Connections beyond k wait in the listen queue. The server
// closes each connection after one response.
func newBoundedServer(t testing.TB, k int, h http.Handler) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	bl := &boundedListener{Listener: ln, slots: make(chan struct{}, k), closed: make(chan struct{})}
	srv.Listener = bl
	srv.Config.SetKeepAlivesEnabled(false)
	srv.Start()
	t.Cleanup(func() {
		bl.Close()
		srv.Close()
	})
	return srv
}

type boundedListener struct {
	net.Listener
	slots  chan struct{}
	closed chan struct{}
	once   sync.Once
}

func (l *boundedListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &slotConn{Conn: c, free: func() { <-l.slots }}, nil
}

func (l *boundedListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

type slotConn struct {
	net.Conn
	once sync.Once
	free func()
}

func (c *slotConn) Close() error {
	c.once.Do(c.free)
	return c.Conn.Close()
}
