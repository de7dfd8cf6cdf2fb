package proxy

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// fakePG is a PostgreSQL server in miniature, for the tests that must
// say exactly when each statement is answered and in which transaction
// status: it answers the startup with a backend key, every simple query
// at once with CommandComplete and ReadyForQuery, the status following
// BEGIN, COMMIT and ROLLBACK, and a Sync with ReadyForQuery. A query that names the table
// "locked" is answered only when unlock is closed, as one waiting on a
// lock at a real server would be. No real server, so these tests run
// anywhere and fast.
type fakePG struct {
	ln     net.Listener
	unlock chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
}

func newFakePG(t *testing.T) *fakePG {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakePG{ln: ln, unlock: make(chan struct{})}
	t.Cleanup(func() {
		f.release()
		ln.Close()
		f.wg.Wait()
	})
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for pid := uint32(1000); ; pid++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				defer c.Close()
				f.serve(c, pid)
			}()
		}
	}()
	return f
}

// release lets every query waiting on "locked" be answered.
func (f *fakePG) release() { f.once.Do(func() { close(f.unlock) }) }

func (f *fakePG) serve(c net.Conn, pid uint32) {
	be := pgproto3.NewBackend(c, c)
	if _, err := be.ReceiveStartupMessage(); err != nil {
		return // Start's check of the address dials and hangs up
	}
	status := byte('I')
	be.Send(&pgproto3.AuthenticationOk{})
	be.Send(&pgproto3.BackendKeyData{ProcessID: pid, SecretKey: []byte{0, 0, 0, 1}})
	be.Send(&pgproto3.ReadyForQuery{TxStatus: status})
	if be.Flush() != nil {
		return
	}
	for {
		msg, err := be.Receive()
		if err != nil {
			return
		}
		if _, ok := msg.(*pgproto3.Sync); ok {
			be.Send(&pgproto3.ReadyForQuery{TxStatus: status})
			if be.Flush() != nil {
				return
			}
			continue
		}
		q, ok := msg.(*pgproto3.Query)
		if !ok {
			continue // a Parse: taken as read, answered at its Sync
		}
		if strings.Contains(q.String, "locked") {
			<-f.unlock
		}
		switch strings.ToUpper(strings.Fields(q.String + " x")[0]) {
		case "BEGIN":
			status = 'T'
		case "COMMIT", "ROLLBACK":
			status = 'I'
		}
		be.Send(&pgproto3.CommandComplete{CommandTag: []byte("OK")})
		be.Send(&pgproto3.ReadyForQuery{TxStatus: status})
		if be.Flush() != nil {
			return
		}
	}
}

// startFake starts a proxy in front of a fakePG, judging lock waits by
// quiet alone (the fake has no lock tables).
func startFake(t *testing.T, cfg Config) (*Proxy, *fakePG) {
	t.Helper()
	f := newFakePG(t)
	cfg.Upstream = "postgres://u@" + f.ln.Addr().String() + "/db"
	cfg.NoLockTables = true
	p, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, f
}

// fakeClient is one connection of a service through the proxy, speaking
// the simple query protocol.
type fakeClient struct {
	t  *testing.T
	c  net.Conn
	fe *pgproto3.Frontend
}

func dialFake(t *testing.T, p *Proxy) *fakeClient {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fc := &fakeClient{t: t, c: c, fe: pgproto3.NewFrontend(c, c)}
	fc.fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: map[string]string{"user": "u", "database": "db"}})
	if err := fc.fe.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.ready(); err != nil {
		t.Fatalf("startup through the proxy: %v", err)
	}
	return fc
}

// ready reads up to a ReadyForQuery and returns its status.
func (fc *fakeClient) ready() (byte, error) {
	fc.c.SetReadDeadline(time.Now().Add(time.Minute))
	for {
		msg, err := fc.fe.Receive()
		if err != nil {
			return 0, err
		}
		if z, ok := msg.(*pgproto3.ReadyForQuery); ok {
			return z.TxStatus, nil
		}
	}
}

// exec runs q and waits for its answer.
func (fc *fakeClient) exec(q string) {
	fc.t.Helper()
	if err := <-fc.send(q); err != nil {
		fc.t.Fatalf("%s: %v", q, err)
	}
}

// send sends q and answers on the channel when its answer has come (the
// caller must wait for it before using the connection again).
func (fc *fakeClient) send(q string) <-chan error {
	fc.fe.Send(&pgproto3.Query{String: q})
	done := make(chan error, 1)
	if err := fc.fe.Flush(); err != nil {
		done <- err
		return done
	}
	go func() {
		_, err := fc.ready()
		done <- err
	}()
	return done
}

// pending: the answer has not come within d.
func pending(done <-chan error, d time.Duration) bool {
	select {
	case <-done:
		return false
	case <-time.After(d):
		return true
	}
}

// within waits for the answer, failing the test past d.
func within(t *testing.T, what string, done <-chan error, d time.Duration) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(d):
		t.Fatalf("%s: no answer after %s", what, d)
	}
}

// prepare sends a Parse of q and a Sync, and waits for the answer.
func (fc *fakeClient) prepare(q string) {
	fc.t.Helper()
	fc.fe.SendParse(&pgproto3.Parse{Query: q})
	fc.fe.SendSync(&pgproto3.Sync{})
	if err := fc.fe.Flush(); err != nil {
		fc.t.Fatal(err)
	}
	if _, err := fc.ready(); err != nil {
		fc.t.Fatalf("prepare %s: %v", q, err)
	}
}
