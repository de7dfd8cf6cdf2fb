package proxy

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/racetest/racetest/internal/sqldb"
)

// BurstSpec is what a burst asks of the proxy.
type BurstSpec struct {
	// Attempts is how many requests the burst sends: the hold waits for
	// that many connections to reach a write or a lock.
	Attempts int `json:"attempts"`
	// Timeout bounds the hold (DefaultBurstTimeout when zero): past it
	// every held statement goes on and the burst is untested.
	Timeout time.Duration `json:"timeout"`
	// Settle: how long a connection with nothing in flight, outside a
	// transaction, stays quiet to count as finished (the proxy's
	// Config.Settle when zero). Not used when Reports is set.
	Settle time.Duration `json:"settle,omitempty"`
	// Reports: the caller reports each request that has its answer
	// (Done), so the proxy need not guess from quiet connections. The
	// held statements are then released when the held requests, the
	// finished ones and those waiting on a lock at the server make
	// Attempts. Without it a busy machine can make a request between two
	// statements look finished.
	Reports bool `json:"reports,omitempty"`
}

// Reason says why a burst's held statements were released.
type Reason string

const (
	// ReleasedAllMet: every request of the burst reached its hold point.
	ReleasedAllMet Reason = "all met"
	// ReleasedOthersIdle: the connections not held had nothing in flight
	// and stayed quiet (finished, or a request that does not write).
	ReleasedOthersIdle Reason = "others idle"
	// ReleasedOthersDone: the requests not held had their answers, as
	// the caller reported (BurstSpec.Reports).
	ReleasedOthersDone Reason = "others finished"
	// ReleasedLockWait: some connection not held waits on a lock at the
	// server (the rest idle): holding longer could only deadlock.
	ReleasedLockWait Reason = "lock wait"
	// ReleasedTimeout: the burst's timeout passed first.
	ReleasedTimeout Reason = "timeout"
	// ReleasedEnded: the burst was ended while statements were held.
	ReleasedEnded Reason = "ended"
	// ReleasedShutdown: the proxy stopped.
	ReleasedShutdown Reason = "shutdown"
)

// Account is what the proxy saw and did in one burst.
type Account struct {
	Burst    int64     `json:"burst"`
	Attempts int       `json:"attempts"`
	Began    time.Time `json:"began"`
	// Duration is from the burst's beginning to its end.
	Duration time.Duration `json:"duration"`
	// Held is how many connections had a statement held.
	Held int `json:"held"`
	// Met is how many connections were held together when the burst
	// released them: the requests that reached the hold point together.
	// Fewer than 2 tested nothing.
	Met int `json:"met"`
	// Released is when the held statements went on, from Began (zero
	// when nothing was held); Reason says why.
	Released time.Duration `json:"released,omitempty"`
	Reason   Reason        `json:"reason,omitempty"`
	// Finished is how many requests the caller reported done.
	Finished int `json:"finished,omitempty"`
	// Untested: the burst's requests did not meet at the hold point
	// (Met < 2, the timeout released them, or no statement came); Why
	// says which, in one line. Such a burst never shows a race is absent.
	Untested bool   `json:"untested"`
	Why      string `json:"why,omitempty"`
	// NoStatement: no statement reached the proxy during the burst (the
	// service does not use it, or served the requests without the
	// database).
	NoStatement bool `json:"no_statement,omitempty"`
	// LockWaits says how a wait on a lock was told: "server lock tables"
	// or "quiet for …" with the reason the tables could not be read.
	LockWaits string `json:"lock_waits"`
	// Conns are the connections that sent (or prepared) a statement
	// during the burst, in the order of their first statement; one that
	// only prepared has no transactions.
	Conns []ConnAccount `json:"conns"`
}

// ConnAccount is one connection's part of a burst.
type ConnAccount struct {
	// Conn numbers the proxy's client connections from 1.
	Conn int `json:"conn"`
	// ServerID is the server's id of the session: PostgreSQL's backend
	// pid, MySQL's connection id.
	ServerID int64 `json:"server_id"`
	// AtRelease is the connection's state when the burst released:
	// "held", "lock wait", "idle", "busy", "closed" ("" when nothing was
	// held).
	AtRelease string `json:"at_release,omitempty"`
	// Transactions are its statements grouped by transaction (a
	// statement in autocommit is one of its own), in order.
	Transactions []Transaction `json:"transactions"`
}

// Transaction is a run of statements the server ran as one transaction.
type Transaction struct {
	// Explicit: the server reported the session inside a transaction
	// (BEGIN … COMMIT), not a statement's own autocommit.
	Explicit   bool        `json:"explicit"`
	Statements []Statement `json:"statements"`
}

// Statement is one statement a connection sent during the burst.
type Statement struct {
	// Text is normalized: literals as placeholders, space collapsed.
	Text          string `json:"text"`
	WritesOrLocks bool   `json:"writes_or_locks"`
	// Held: this statement was held; it went on at the account's
	// Released.
	Held bool `json:"held,omitempty"`
	// At is when the client sent it, from the burst's beginning.
	At time.Duration `json:"at"`
}

// Summary is the account in one line.
func (a *Account) Summary() string {
	switch {
	case a.NoStatement:
		return fmt.Sprintf("burst %d: no statement reached the proxy", a.Burst)
	case a.Held == 0:
		return fmt.Sprintf("burst %d: %d connections, no statement held (none wrote or locked)", a.Burst, len(a.Conns))
	}
	s := fmt.Sprintf("burst %d: %d of %d met at the hold point, released after %s (%s)", a.Burst, a.Met, a.Attempts, a.Released.Round(time.Millisecond), a.Reason)
	if a.Untested {
		s += ": untested, " + a.Why
	}
	return s
}

// ErrBurstActive: a burst is already active (End it first).
var ErrBurstActive = errors.New("proxy: a burst is already active: end it first")

// ErrNoBurst: End named a burst that is not the active one.
var ErrNoBurst = errors.New("proxy: no such burst is active")

type burst struct {
	p        *Proxy
	id       int64
	spec     BurstSpec
	began    time.Time
	parts    []*participant
	held     []*hold
	released bool
	at       time.Time
	reason   Reason
	met      int
	done     int // requests the caller reported finished
	ended    chan struct{}
}

type participant struct {
	c         *conn
	stmts     []Statement
	txn       []int // each statement's transaction (the conn's groupSeq)
	explicit  map[int]bool
	hold      *hold
	atRelease string
	// lock probing
	probing   bool
	probedAt  time.Time
	lockWait  bool
	probeFail bool
}

type hold struct {
	c        *conn
	raw      []byte
	mark     func()
	released chan struct{}
	err      error
}

// Begin starts a burst. A burst whose timeout has long passed without an
// End is dropped; any other active burst is ErrBurstActive.
func (p *Proxy) Begin(spec BurstSpec) (int64, error) {
	if spec.Attempts < 1 {
		return 0, fmt.Errorf("proxy: a burst needs at least 1 attempt (got %d)", spec.Attempts)
	}
	if spec.Timeout < 0 || spec.Settle < 0 {
		return 0, fmt.Errorf("proxy: a burst's timeout and settle cannot be negative")
	}
	if spec.Timeout == 0 {
		spec.Timeout = DefaultBurstTimeout
	}
	if spec.Settle == 0 {
		spec.Settle = p.cfg.Settle
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, errClosed
	}
	now := time.Now()
	if b := p.burst; b != nil {
		if now.Sub(b.began) < 2*b.spec.Timeout+time.Minute {
			return 0, ErrBurstActive
		}
		go deliver(b.releaseLocked(ReleasedEnded, now)) // not under the lock
		close(b.ended)
		p.dropLocked(b)
	}
	p.bursts++
	b := &burst{p: p, id: p.bursts, spec: spec, began: now, ended: make(chan struct{})}
	p.burst = b
	p.wg.Add(1)
	go func() { defer p.wg.Done(); b.judge() }()
	return b.id, nil
}

// Done reports that one request of burst id has its answer (see
// BurstSpec.Reports).
func (p *Proxy) Done(id int64) error {
	p.mu.Lock()
	b := p.burst
	if b == nil || b.id != id {
		p.mu.Unlock()
		return fmt.Errorf("%w (burst %d)", ErrNoBurst, id)
	}
	b.done++
	held := b.decideLocked(time.Now())
	p.mu.Unlock()
	deliver(held)
	return nil
}

// End ends burst id and returns its account, releasing whatever is
// still held.
func (p *Proxy) End(id int64) (*Account, error) {
	p.mu.Lock()
	b := p.burst
	if b == nil || b.id != id {
		p.mu.Unlock()
		return nil, fmt.Errorf("%w (burst %d)", ErrNoBurst, id)
	}
	now := time.Now()
	held := b.releaseLocked(ReleasedEnded, now)
	close(b.ended)
	a := b.accountLocked(now)
	p.dropLocked(b)
	p.mu.Unlock()
	deliver(held)
	return a, nil
}

func (p *Proxy) dropLocked(b *burst) {
	for _, pt := range b.parts {
		if pt.c.part == pt {
			pt.c.part = nil
		}
	}
	p.burst = nil
}

// noteLocked records a statement a client sends. When the connection is
// in a burst that has not released yet and this is its first write or
// lock, the statement is held: h is its hold. held is what a release
// this note brought about lets go (to deliver outside the lock).
func (p *Proxy) noteLocked(c *conn, st *statement, norm string, raw []byte) (h *hold, held []*hold) {
	b := p.burst
	if b == nil {
		return nil, nil
	}
	pt := p.joinLocked(c)
	now := time.Now()
	if !c.groupOpen {
		c.groupSeq++
		c.groupOpen = true
	}
	if c.status != 'I' {
		pt.explicit[c.groupSeq] = true
	}
	s := Statement{Text: norm, WritesOrLocks: st.write, At: now.Sub(b.began)}
	if st.write && !b.released && pt.hold == nil {
		s.Held = true
		h = &hold{c: c, raw: raw, mark: st.mark, released: make(chan struct{})}
		pt.hold = h
		b.held = append(b.held, h)
	}
	pt.stmts = append(pt.stmts, s)
	pt.txn = append(pt.txn, c.groupSeq)
	if h != nil {
		held = b.decideLocked(now)
	}
	return h, held
}

// joinLocked makes c a connection of the active burst (if there is one):
// it sent a statement, or prepared one (a prepare waits on a lock too).
func (p *Proxy) joinLocked(c *conn) *participant {
	b := p.burst
	if b == nil {
		return nil
	}
	if c.part == nil {
		c.part = &participant{c: c, explicit: map[int]bool{}}
		b.parts = append(b.parts, c.part)
	}
	return c.part
}

// judge re-decides the burst as time passes: settle periods, lock waits,
// the timeout.
func (b *burst) judge() {
	tick := min(max(b.spec.Settle/5, 5*time.Millisecond), 50*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-b.ended:
			return
		case now := <-t.C:
			b.p.mu.Lock()
			if b.released {
				b.p.mu.Unlock()
				return
			}
			held := b.decideLocked(now)
			b.p.mu.Unlock()
			deliver(held)
		}
	}
}

// decideLocked releases the burst's held statements when their time has
// come, and returns them to deliver.
func (b *burst) decideLocked(now time.Time) []*hold {
	if b.released || len(b.held) == 0 {
		return nil
	}
	if now.Sub(b.began) >= b.spec.Timeout {
		return b.releaseLocked(ReleasedTimeout, now)
	}
	if len(b.held) >= b.spec.Attempts {
		return b.releaseLocked(ReleasedAllMet, now)
	}
	if b.spec.Reports {
		// Each held connection, each finished request and each
		// connection waiting on a lock is a request of its own: a
		// request runs one statement at a time.
		waiting := 0
		for _, pt := range b.parts {
			if pt.hold == nil && b.lockWaitLocked(pt, now) {
				waiting++
			}
		}
		switch {
		case len(b.held)+b.done+waiting < b.spec.Attempts:
			return nil
		case waiting > 0:
			return b.releaseLocked(ReleasedLockWait, now)
		}
		return b.releaseLocked(ReleasedOthersDone, now)
	}
	if len(b.parts) < b.spec.Attempts {
		return nil // a request has not reached the database yet
	}
	waiting := false
	for _, pt := range b.parts {
		switch {
		case pt.hold != nil:
		case b.idleLocked(pt, now):
		case b.lockWaitLocked(pt, now):
			waiting = true
		default:
			return nil
		}
	}
	if waiting {
		return b.releaseLocked(ReleasedLockWait, now)
	}
	return b.releaseLocked(ReleasedOthersIdle, now)
}

// idleLocked: nothing in flight, no transaction open, and quiet for the
// settle period (or the connection closed). An open transaction is a
// request that has not finished.
func (b *burst) idleLocked(pt *participant, now time.Time) bool {
	c := pt.c
	if c.done {
		return true
	}
	if c.busyLocked() && !c.lost || c.status != 'I' {
		return false
	}
	return now.Sub(last(c.lastSent, c.lastRecv)) >= b.spec.Settle
}

// lockWaitLocked: a statement in flight with no answer, which the
// server's lock tables say waits on a lock (or, where they cannot be
// read, which stayed unanswered for LockQuiet).
func (b *burst) lockWaitLocked(pt *participant, now time.Time) bool {
	c := pt.c
	if !c.busyLocked() && !c.lost {
		return false
	}
	quiet := now.Sub(last(c.lastSent, c.lastRecv))
	p := b.p
	if p.probeDB != nil && c.serverID != 0 && !pt.probeFail {
		// An answer about the statement in flight holds while it waits;
		// "not waiting" only for reprobe, since a statement that ran a
		// while can block on a lock later.
		if pt.probedAt.After(last(c.lastSent, c.lastRecv)) && (pt.lockWait || now.Sub(pt.probedAt) < reprobe) {
			return pt.lockWait
		}
		if quiet >= 10*time.Millisecond && !pt.probing {
			pt.probing = true
			p.probes++
			p.wg.Add(1)
			go b.probe(pt, c.serverID)
		}
		return false
	}
	return quiet >= p.cfg.LockQuiet
}

// reprobe is how long a lock probe's "not waiting" stands for the
// statement it was asked of: after it, the server is asked again.
const reprobe = 10 * time.Millisecond

// probe asks the server whether session id waits on a lock.
func (b *burst) probe(pt *participant, id int64) {
	p := b.p
	defer p.wg.Done()
	at := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var waiting bool
	err := p.probeDB.Admin(ctx, func(ctx context.Context, q sqldb.Querier) error {
		var err error
		waiting, err = sqldb.LockWait(ctx, sqlDialect(p.upstream.Protocol), q, id)
		return err
	})
	p.mu.Lock()
	pt.probing = false
	pt.probedAt = at
	pt.lockWait = waiting
	if err != nil {
		pt.probeFail = true // judged by quiet from now on
	}
	// A burst ended or dropped since was released first: deciding it
	// again lets nothing go.
	held := b.decideLocked(time.Now())
	p.mu.Unlock()
	deliver(held)
}

// firstAt is when a connection sent its first statement (past any
// other for one that only prepared).
func firstAt(c ConnAccount) time.Duration {
	if len(c.Transactions) == 0 {
		return 1<<63 - 1
	}
	return c.Transactions[0].Statements[0].At
}

func last(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// releaseLocked marks every held statement as sent and returns the holds
// for deliver to write, in the order they were held.
func (b *burst) releaseLocked(r Reason, now time.Time) []*hold {
	if b.released {
		return nil
	}
	b.released = true
	if len(b.held) == 0 {
		return nil
	}
	b.at, b.reason, b.met = now, r, len(b.held)
	for _, pt := range b.parts {
		switch {
		case pt.hold != nil:
			pt.atRelease = "held"
		case pt.c.done:
			pt.atRelease = "closed"
		case b.idleLocked(pt, now):
			pt.atRelease = "idle"
		case r == ReleasedLockWait && b.lockWaitLocked(pt, now):
			pt.atRelease = "lock wait"
		default:
			pt.atRelease = "busy"
		}
	}
	for _, h := range b.held {
		if h.mark != nil {
			h.mark()
		}
		h.c.lastSent = now
	}
	return b.held
}

// deliver writes released statements to their servers, one after another
// so that they leave together, then lets their connections go on.
func deliver(held []*hold) {
	for _, h := range held {
		h.err = h.c.sendServer(h.raw, true)
	}
	for _, h := range held {
		close(h.released)
	}
}

func (b *burst) accountLocked(now time.Time) *Account {
	a := &Account{
		Burst: b.id, Attempts: b.spec.Attempts, Began: b.began, Duration: now.Sub(b.began),
		Held: len(b.held), Met: b.met, Reason: b.reason, Finished: b.done,
	}
	if !b.at.IsZero() {
		a.Released = b.at.Sub(b.began)
	}
	p := b.p
	switch {
	case p.probeDB != nil:
		a.LockWaits = "server lock tables"
	case p.cfg.NoLockTables:
		a.LockWaits = fmt.Sprintf("quiet for %s (lock tables not read)", p.cfg.LockQuiet)
	case !p.probeReady:
		a.LockWaits = fmt.Sprintf("quiet for %s (the proxy's own connection to the server was not ready)", p.cfg.LockQuiet)
	default:
		a.LockWaits = fmt.Sprintf("quiet for %s (lock tables unreadable: %v)", p.cfg.LockQuiet, p.probeErr)
	}
	for _, pt := range b.parts {
		ca := ConnAccount{Conn: pt.c.id, ServerID: pt.c.serverID, AtRelease: pt.atRelease}
		for i, s := range pt.stmts {
			if i == 0 || pt.txn[i] != pt.txn[i-1] {
				ca.Transactions = append(ca.Transactions, Transaction{Explicit: pt.explicit[pt.txn[i]]})
			}
			t := &ca.Transactions[len(ca.Transactions)-1]
			t.Statements = append(t.Statements, s)
		}
		a.Conns = append(a.Conns, ca)
	}
	sort.SliceStable(a.Conns, func(i, j int) bool { return firstAt(a.Conns[i]) < firstAt(a.Conns[j]) })
	switch {
	case len(a.Conns) == 0:
		a.NoStatement, a.Untested = true, true
		a.Why = "no statement reached the proxy: does the service's DATABASE_URL point at it?"
	case a.Held == 0:
		a.Untested = true
		a.Why = "no request reached a statement that writes or locks"
	case a.Reason == ReleasedTimeout:
		a.Untested = true
		a.Why = fmt.Sprintf("only %d of %d requests reached the hold point before the timeout (%s)", a.Met, a.Attempts, b.spec.Timeout)
	case a.Met < 2:
		a.Untested = true
		a.Why = fmt.Sprintf("only %d request reached the hold point (released: %s)", a.Met, a.Reason)
	}
	return a
}
