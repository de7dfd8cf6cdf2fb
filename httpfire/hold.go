package httpfire

import (
	"context"
	"fmt"
	"time"

	"github.com/racetest/racetest/proxy"
	"github.com/racetest/racetest/runner"
)

// A racetest proxy between the service and its database (Config.Proxy)
// forces the race: during each burst it holds every request's first
// statement that writes or locks until all of them have reached one (or
// wait on a lock, or have their answer), then lets them go on together.
// The target begins the proxy's burst before the gate opens, reports each
// request's answer to it (so a request that finished without writing is
// not waited for), and ends it after the burst: the proxy's account is the
// burst's Hold, and a burst whose requests never met there tested nothing.

// dialProxy connects to the proxy's control address; an address where no
// racetest proxy answers (none listening, or something else) is bad input.
func (t *Target) dialProxy(ctx context.Context) error {
	c, err := proxy.Dial(ctx, t.c.cfg.Proxy)
	if err != nil {
		return &InputError{Field: "proxy", Err: fmt.Errorf("%w: start one with 'racetest proxy --upstream URL', and give --proxy the control address it prints", err)}
	}
	t.proxy = c
	return nil
}

// holdBurst is one burst's part of the proxy: its id, for Done and End.
type holdBurst struct {
	c  *proxy.Client
	id int64
}

// beginHold asks the proxy to hold burst b's statements.
func (t *Target) beginHold(ctx context.Context, b *burst) error {
	ctx, cancel := context.WithTimeout(ctx, t.c.timeout)
	defer cancel()
	id, err := t.proxy.Begin(ctx, proxy.BurstSpec{Attempts: int(b.expected), Timeout: t.c.timeout, Reports: true})
	if err != nil {
		return fmt.Errorf("the database proxy at %s would not begin a burst: %w", t.c.cfg.Proxy, err)
	}
	b.hold = &holdBurst{c: t.proxy, id: id}
	return nil
}

// done tells the proxy that one of the burst's requests has its answer.
// A failure to tell it costs the burst time (the proxy waits for the
// request until the hold's timeout), not its truth.
func (h *holdBurst) done() {
	if h == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = h.c.Done(ctx, h.id)
}

// Hold ends burst s's hold at the proxy and returns its account; nil when
// no proxy held it. An account the proxy could not give leaves the burst
// untested.
func (t *Target) Hold(s runner.Subject) *runner.Hold {
	b, ok := s.Data.(*burst)
	if !ok || b.hold == nil {
		return nil
	}
	h := b.hold
	b.hold = nil // ended here: endHold has nothing left to end
	ctx, cancel := context.WithTimeout(context.Background(), t.c.timeout)
	defer cancel()
	a, err := h.c.End(ctx, h.id)
	if err != nil {
		return &runner.Hold{Untested: true, Why: fmt.Sprintf("the proxy gave no account of the burst: %v", err), Summary: "no account"}
	}
	return holdOf(a)
}

// holdOf is the runner's record of a proxy's account.
func holdOf(a *proxy.Account) *runner.Hold {
	h := &runner.Hold{Met: a.Met, Attempts: a.Attempts, Untested: a.Untested, Why: a.Why, Summary: a.Summary()}
	if a.NoStatement {
		h.Why = "no statement reached the proxy: does the service's database URL point at it?"
	}
	for _, c := range a.Conns {
		hc := runner.HoldConn{Conn: c.Conn}
		for _, tx := range c.Transactions {
			var sts []runner.HoldStatement
			for _, st := range tx.Statements {
				sts = append(sts, runner.HoldStatement{Text: st.Text, Writes: st.WritesOrLocks, Held: st.Held})
			}
			hc.Transactions = append(hc.Transactions, sts)
		}
		h.Conns = append(h.Conns, hc)
	}
	return h
}

// endHold ends a burst the runner left before asking for its account, so
// that the proxy holds nothing past the run.
func (t *Target) endHold(b *burst) {
	if b == nil || b.hold == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = b.hold.c.End(ctx, b.hold.id)
	b.hold = nil
}
