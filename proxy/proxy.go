// Package proxy is racetest's database wire proxy: a service's
// DATABASE_URL points at it, it relays every byte to the real server
// unchanged, and during a burst it holds each connection's first
// statement that writes or locks until every request of the burst has
// reached one (or waits on a lock at the server, or has finished), then
// releases them together. A race between a check and a write then
// happens on every burst, whatever the service's timing.
//
// It speaks PostgreSQL's and MySQL's (MariaDB's) wire protocols in
// plaintext: a client that asks for TLS is told the server has none.
// A control listener beside it (HTTP and JSON) begins and ends bursts;
// Dial is its Go client.
package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/racetest/racetest/explore"
	"github.com/racetest/racetest/internal/sqldb"
)

// Defaults the command's flags reuse.
const (
	// DefaultListen and DefaultControl: a free port on the loopback
	// interface, printed at start.
	DefaultListen  = "127.0.0.1:0"
	DefaultControl = "127.0.0.1:0"
	// DefaultSettle is how long a connection with nothing in flight must
	// stay quiet to count as finished: a request between its read and its
	// write is busy in the service for far less.
	DefaultSettle = 100 * time.Millisecond
	// DefaultLockQuiet is how long a statement must go unanswered to count
	// as waiting on a lock when the server's lock tables cannot be read.
	DefaultLockQuiet = 300 * time.Millisecond
	// DefaultBurstTimeout bounds a hold when a burst does not say.
	DefaultBurstTimeout = 10 * time.Second
	// dialTimeout bounds each dial of the upstream server.
	dialTimeout = 5 * time.Second
)

// Config says where the proxy listens and what it relays to.
type Config struct {
	// Upstream is the real server: a postgres:// or postgresql:// URL, a
	// mysql:// (or mariadb://) URL, or the MySQL driver's DSN
	// (user:pass@tcp(host:3306)/db). Its credentials are used only to read
	// the server's lock tables; the service authenticates itself.
	Upstream string
	// Listen is where the service connects (DefaultListen when empty).
	Listen string
	// Control is where bursts are begun and ended (DefaultControl).
	Control string
	// Settle: DefaultSettle when zero.
	Settle time.Duration
	// LockQuiet: DefaultLockQuiet when zero.
	LockQuiet time.Duration
	// NoLockTables: judge lock waits by LockQuiet alone, without a
	// connection of the proxy's own to the server.
	NoLockTables bool
}

// Proxy is a running proxy. Close stops it, releasing whatever it holds.
type Proxy struct {
	cfg      Config
	upstream Upstream
	dialect  explore.Dialect
	ln, ctl  net.Listener
	hs       *http.Server

	mu     sync.Mutex
	conns  map[*conn]bool
	nextID int
	burst  *burst
	bursts int64
	closed bool

	// Under mu once set: the proxy's own connection to the server, for
	// its lock tables.
	probeDB    *sqldb.DB
	probeErr   error
	probeReady bool
	// probes counts the lock probes started (each a query of the
	// server's lock tables).
	probes int

	wg sync.WaitGroup
}

// Start checks that the upstream server answers, listens, and serves
// until ctx ends or Close is called. Errors: *SchemeError for an
// upstream the proxy does not speak, *UpstreamError for one that does
// not answer, and a listen error naming the address.
func Start(ctx context.Context, cfg Config) (*Proxy, error) {
	up, err := ParseUpstream(cfg.Upstream)
	if err != nil {
		return nil, err
	}
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.Control == "" {
		cfg.Control = DefaultControl
	}
	if cfg.Settle <= 0 {
		cfg.Settle = DefaultSettle
	}
	if cfg.LockQuiet <= 0 {
		cfg.LockQuiet = DefaultLockQuiet
	}
	d := net.Dialer{Timeout: dialTimeout}
	probe, err := d.DialContext(ctx, "tcp", up.Addr)
	if err != nil {
		return nil, &UpstreamError{Protocol: up.Protocol, Addr: up.Addr, Err: err}
	}
	probe.Close()
	p := &Proxy{cfg: cfg, upstream: up, conns: map[*conn]bool{}}
	p.dialect = explore.Postgres
	if up.Protocol == MySQL {
		p.dialect = explore.MySQL
	}
	if p.ln, err = net.Listen("tcp", cfg.Listen); err != nil {
		return nil, fmt.Errorf("proxy: cannot listen on %s: %w — is another server on that port? choose one with --listen", cfg.Listen, err)
	}
	if p.ctl, err = net.Listen("tcp", cfg.Control); err != nil {
		p.ln.Close()
		return nil, fmt.Errorf("proxy: cannot listen on %s for control: %w — choose another with --control", cfg.Control, err)
	}
	if !cfg.NoLockTables {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			db, err := sqldb.Open(ctx, sqlDialect(up.Protocol), up.raw, sqldb.Options{AppName: "racetest proxy (lock waits)"})
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.closed && db != nil {
				db.Close()
				db = nil
			}
			p.probeDB, p.probeErr, p.probeReady = db, err, true
		}()
	}
	p.hs = &http.Server{Handler: p.handler(), ReadHeaderTimeout: 10 * time.Second}
	p.wg.Add(2)
	go func() { defer p.wg.Done(); p.hs.Serve(p.ctl) }()
	go func() { defer p.wg.Done(); p.accept() }()
	go func() {
		<-ctx.Done()
		p.Close()
	}()
	return p, nil
}

func sqlDialect(pr Protocol) sqldb.Dialect {
	if pr == Postgres {
		return sqldb.Postgres
	}
	return sqldb.MySQL
}

// Addr is where the service connects.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// ControlAddr is where bursts are begun and ended (Dial's address).
func (p *Proxy) ControlAddr() string { return p.ctl.Addr().String() }

// Protocol is the wire protocol the proxy speaks.
func (p *Proxy) Protocol() Protocol { return p.upstream.Protocol }

// ServiceURL is the upstream's URL or DSN with the proxy's address in
// place of the server's (credentials as given: redact before showing).
func (p *Proxy) ServiceURL() string { return p.upstream.Rewrite(p.Addr()) }

// Close releases every held statement, stops listening and closes every
// connection. It is safe to call more than once.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	var held []*hold
	if p.burst != nil {
		held = p.burst.releaseLocked(ReleasedShutdown, time.Now())
	}
	conns := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	deliver(held)
	p.ln.Close()
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	p.hs.Shutdown(sctx)
	cancel()
	for _, c := range conns {
		c.close()
	}
	p.wg.Wait()
	if p.probeDB != nil {
		p.probeDB.Close()
	}
	return nil
}

func (p *Proxy) accept() {
	for {
		cl, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			cl.Close()
			return
		}
		p.nextID++
		c := &conn{p: p, id: p.nextID, client: cl, status: 'I', pgStmts: map[string]string{}, pgPortals: map[string]string{}, myStmts: map[uint32]string{}}
		p.conns[c] = true
		p.wg.Add(1)
		p.mu.Unlock()
		go func() {
			defer p.wg.Done()
			c.serve()
		}()
	}
}

// conn is one client connection and its connection to the server. The
// fields below mu are shared between its two pumps and the burst's
// judge, under the proxy's mutex.
type conn struct {
	p      *Proxy
	id     int
	client net.Conn
	server net.Conn

	wmu sync.Mutex    // the writes to the server
	up  *bufio.Writer // to the server

	// Read by the client pump only.
	pgStmts   map[string]string // statement name → text
	pgPortals map[string]string // portal → text
	myStmts   map[uint32]string // MySQL statement id → text (also read under p.mu by the server pump)

	// Under p.mu.
	serverID   int64
	status     byte // 'I' idle, 'T' in a transaction, 'E' in a failed one
	groupOpen  bool // the statements since the last idle status are one transaction
	groupSeq   int
	due        int // PostgreSQL: Query and Sync sent without a ReadyForQuery
	execDue    int // PostgreSQL: Execute sent without its completion
	myPending  []*myResponse
	lost       bool // a response the proxy could not follow: in flight is judged by quiet alone
	lastSent   time.Time
	lastRecv   time.Time
	done       bool
	part       *participant
	closeOnce  sync.Once
	mysqlPhase int
	caps       uint32
}

func (c *conn) serve() {
	defer c.close()
	d := net.Dialer{Timeout: dialTimeout}
	srv, err := d.Dial("tcp", c.p.upstream.Addr)
	if err != nil {
		return // the service sees its connection close, as it would with the server down
	}
	c.p.mu.Lock()
	c.server = srv
	closed := c.done
	c.p.mu.Unlock()
	if closed {
		srv.Close()
		return
	}
	c.up = bufio.NewWriterSize(srv, 32<<10)
	errc := make(chan error, 2)
	if c.p.upstream.Protocol == Postgres {
		go func() { errc <- c.pgFromClient() }()
		go func() { errc <- c.pgFromServer() }()
	} else {
		go func() { errc <- c.myFromClient() }()
		go func() { errc <- c.myFromServer() }()
	}
	<-errc
	c.close()
	<-errc
}

func (c *conn) close() {
	c.closeOnce.Do(func() {
		c.p.mu.Lock()
		c.done = true
		srv := c.server
		delete(c.p.conns, c)
		c.p.mu.Unlock()
		c.client.Close()
		if srv != nil {
			srv.Close()
		}
	})
}

// sendServer writes raw to the server; flush sends it now.
func (c *conn) sendServer(raw []byte, flush bool) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.up.Write(raw); err != nil {
		return err
	}
	if flush {
		return c.up.Flush()
	}
	return nil
}

// statement is what a client message runs: its text and whether it
// writes or locks.
type statement struct {
	text  string
	write bool
	// mark counts the message as in flight when it is sent (under p.mu).
	mark func()
}

// forward sends a client message to the server, holding it first when
// it is this connection's first write or lock of an active burst.
// more: the client has more bytes already buffered (send them together).
func (c *conn) forward(raw []byte, st *statement, more bool) error {
	if st == nil {
		return c.sendServer(raw, !more)
	}
	norm := Normalize(st.text, c.p.dialect)
	c.p.mu.Lock()
	h, held := c.p.noteLocked(c, st, norm, raw)
	if h == nil {
		if st.mark != nil {
			st.mark()
		}
		c.lastSent = time.Now()
	}
	c.p.mu.Unlock()
	deliver(held)
	if h == nil {
		return c.sendServer(raw, true)
	}
	// Earlier messages (a Parse, a Bind) go now; the held one waits.
	c.wmu.Lock()
	err := c.up.Flush()
	c.wmu.Unlock()
	if err != nil {
		return err
	}
	<-h.released
	return h.err
}

// setStatusLocked records the server's transaction status after a
// statement: a return to idle ends the transaction in the account.
func (c *conn) setStatusLocked(s byte) {
	c.status = s
	if s == 'I' {
		c.groupOpen = false
	} else if c.part != nil && c.groupOpen {
		c.part.explicit[c.groupSeq] = true
	}
}

// busyLocked: a statement is in flight (sent, its answer not complete).
func (c *conn) busyLocked() bool {
	if c.done {
		return false
	}
	return c.due > 0 || c.execDue > 0 || len(c.myPending) > 0
}

var errClosed = errors.New("proxy: closed")
