package incidents

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/racetest/racetest/runner"
)

// AlertWindow is how long "credits low for app X" stays deduped.
const AlertWindow = 24 * time.Hour

// The incident's in-memory table pruned itself when it reached tableCap keys
// by deleting every entry older than pruneAge, whatever the entry's window.
const (
	tableCap = 500
	pruneAge = 15 * time.Minute
)

// redisReadTimeout is go-redis v9.22+'s default read timeout: what a claim
// against a hung server waits without a deadline of its own.
const redisReadTimeout = 5 * time.Second

var alertKind = &onceKind{
	scenario: AlertDedupe,
	variants: alertVariants,
	window:   AlertWindow,
	effect:   "alert",
	counter:  "the simulated alert sink",
	mode: func(v string) storeMode {
		switch v {
		case FailOpen:
			return storeDown
		case FailOpenHang:
			return storeHung
		}
		return storeUp
	},
	claims: func(v string) bool { return v != Naive && v != P0 },
	prune: func(v string) pruneMode {
		if v == Naive {
			return pruneByAge
		}
		return pruneByExpiry
	},
	subject: func(t *onceTarget, burst int) (string, time.Time) {
		return t.p.Prefix() + "alert:credits-low:app" + strconv.Itoa(burst), time.Now()
	},
	checks:       alertChecks,
	refusedLocal: "already sent: in this replica's dedupe table",
	refusedClaim: "already sent: another replica holds the claim",
}

// pruneMode is how a dedupe table forgets when it grows.
type pruneMode int

const (
	// pruneByAge deletes every entry older than pruneAge: the incident's bug.
	pruneByAge pruneMode = iota
	// pruneByExpiry deletes only entries whose own window has passed.
	pruneByExpiry
)

// dedupeTable is one replica's "alert key → last sent" memory, locked
// correctly inside the replica.
type dedupeTable struct {
	prune   pruneMode
	mu      sync.Mutex
	entries map[string]dedupeEntry
}

type dedupeEntry struct {
	sent   time.Time
	window time.Duration
}

func newDedupeTable(prune pruneMode) *dedupeTable {
	return &dedupeTable{prune: prune, entries: map[string]dedupeEntry{}}
}

// Admit reports whether key may act at now, and records it if so. now is
// passed in, not read, so that a check can move the clock by hand.
func (d *dedupeTable) Admit(key string, window time.Duration, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.entries[key]; ok && now.Before(e.sent.Add(e.window)) {
		return false
	}
	if len(d.entries) >= tableCap {
		d.pruneLocked(now)
	}
	d.entries[key] = dedupeEntry{sent: now, window: window}
	return true
}

func (d *dedupeTable) pruneLocked(now time.Time) {
	for k, e := range d.entries {
		switch d.prune {
		case pruneByAge:
			if now.Sub(e.sent) > pruneAge {
				delete(d.entries, k)
			}
		case pruneByExpiry:
			if !now.Before(e.sent.Add(e.window)) {
				delete(d.entries, k)
			}
		}
	}
}

// pruneReplay replays the quiet bug on a fresh table with a clock moved by
// hand: a 24 h alert at t0, 600 other alerts (1 h windows) at t0+20m, then
// the first alert again. It returns how many times the first was sent.
func pruneReplay(mode pruneMode) int {
	tbl := newDedupeTable(mode)
	t0 := time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC)
	const key = "credits-low:app-42"
	sent := 0
	if tbl.Admit(key, AlertWindow, t0) {
		sent++
	}
	later := t0.Add(20 * time.Minute)
	for i := range 600 {
		tbl.Admit("other-alert:"+strconv.Itoa(i), time.Hour, later)
	}
	if tbl.Admit(key, AlertWindow, later.Add(time.Second)) {
		sent++
	}
	return sent
}

func alertChecks(ctx context.Context, t *onceTarget) []runner.Check {
	switch t.variant {
	case Naive:
		byAge, byExpiry := pruneReplay(pruneByAge), pruneReplay(pruneByExpiry)
		return []runner.Check{
			{
				Name: "prune by age forgets a 24h alert under load",
				OK:   byAge == 2,
				Bug:  true,
				Detail: fmt.Sprintf("a 24h alert at 09:00, 600 other alerts at 09:20 (the %d-key cap prunes entries older than %s), the same alert at 09:20:01: sent %d time(s)",
					tableCap, human(pruneAge), byAge),
			},
			{
				Name:   "prune by each entry's expiry keeps it",
				OK:     byExpiry == 1,
				Detail: fmt.Sprintf("same replay, pruning only entries past their own window: sent %d time(s)", byExpiry),
			},
		}
	case Fixed:
		return []runner.Check{freshReplicaCheck(ctx, t, "a freshly started replica sees the claim")}
	case FailOpen:
		return []runner.Check{hungStoreCheck(ctx, t)}
	}
	return nil
}

// freshReplicaCheck starts a new replica (empty memory) after the run and
// triggers the last subject again: the claim must turn it away.
func freshReplicaCheck(ctx context.Context, t *onceTarget, name string) runner.Check {
	c := runner.Check{Name: name}
	t.mu.Lock()
	s := t.last
	t.mu.Unlock()
	if s.Data == nil {
		c.Detail = "no burst ran"
		return c
	}
	before := t.effects.count(s.Key)
	out, err := lateAttempt(ctx, t, s)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	after := t.effects.count(s.Key)
	c.OK = out.Class == runner.Declined && after == before
	c.Detail = fmt.Sprintf("a replica started after the run, memory empty, triggered %s again: %s; %ss %d → %d",
		s.Key, outcomeText(out), t.kind.effect, before, after)
	return c
}

// lateAttempt runs one attempt at s from a replica opened now.
func lateAttempt(ctx context.Context, t *onceTarget, s runner.Subject) (runner.Outcome, error) {
	app, err := t.Open(ctx, 0, 1)
	if err != nil {
		return runner.Outcome{}, fmt.Errorf("could not start a late replica: %w", err)
	}
	defer app.Close()
	sess, err := app.Session(ctx, 0)
	if err != nil {
		return runner.Outcome{}, fmt.Errorf("could not open the late replica's session: %w", err)
	}
	defer sess.Close()
	return sess.Attempt(ctx, s, &runner.Worker{}), nil
}

func outcomeText(o runner.Outcome) string {
	if o.Err != nil {
		return o.Class.String() + " (" + o.Err.Error() + ")"
	}
	return o.Class.String()
}

// hungStoreCheck triggers an alert through the fix's own code path against a
// store that accepts and never answers, and shows it failing open at its
// own deadline, not the driver's.
func hungStoreCheck(ctx context.Context, t *onceTarget) runner.Check {
	c := runner.Check{Name: "a hung store: the alert is sent at the 1.5s deadline"}
	conn, dispose, err := t.claims.Hung(ctx)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	defer dispose()
	sess := &onceSession{a: &onceApp{t: t, table: newDedupeTable(pruneByExpiry)}, claim: conn}
	defer sess.Close()
	b := &onceBurst{at: time.Now(), instances: map[*onceApp]bool{}}
	s := runner.Subject{Key: t.p.Prefix() + "check:hung", Data: b}
	start := time.Now()
	out := sess.Attempt(ctx, s, &runner.Worker{})
	took := time.Since(start)
	sent := t.effects.count(s.Key)
	// Halfway between the deadline and the driver's own timeout tells which
	// of the two ended the wait, with room for a slow machine.
	c.OK = out.Class == runner.Executed && b.failedOpen == 1 && sent == 1 && took < (ClaimDeadline+redisReadTimeout)/2
	c.Detail = fmt.Sprintf("a claim against a server that accepts and never answers gave up after %s (deadline %s; go-redis alone would wait its %s read timeout); the attempt %s, the sink counted %d send(s)",
		took.Round(10*time.Millisecond), ClaimDeadline, redisReadTimeout, outcomeText(out), sent)
	return c
}
