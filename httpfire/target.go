package httpfire

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/racetest/racetest/proxy"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// The engine contract, and the optional parts this target promises:
// checked here so a changed signature fails the build, not the report.
var (
	_ runner.Target      = (*Target)(nil)
	_ runner.Describer   = (*Target)(nil)
	_ runner.Noter       = (*Target)(nil)
	_ runner.Baseliner   = (*Target)(nil)
	_ runner.Invarianter = (*Target)(nil)
	_ runner.Uncounted   = (*Target)(nil)

	_ runner.ServerParalleler = (*Target)(nil)
	_ runner.ServerProber     = (*Target)(nil)
	_ runner.LockWaiter       = (*Target)(nil)
	_ runner.Holder           = (*Target)(nil)
)

// Target fires a run's bursts at one HTTP endpoint. Build it with New; it is
// a runner.Target, and also a runner.Noter, Describer, Checker and
// ServerParalleler.
type Target struct {
	c       *compiled
	p       scenarios.Params
	effects effectsCheck
	// auto measures the store for solo twins (--effects auto:STORE).
	auto *autoCheck
	// invariants are checked before and after each burst; names are
	// their specs as written.
	invariants []effectsCheck
	invNames   []string
	// maxStreams is the server's stream limit, as auto's probe read it.
	maxStreams uint32
	// probe is what Prepare's probe of the server's concurrency found
	// (probe.go); nil before Prepare.
	probe *runner.ServerProbe
	// locks watches the database of the run's SQL checks for lock waits
	// during each burst (lockwatch.go); nil without a SQL check.
	locks *lockWatch
	// proxy is the control of the database proxy that holds each burst's
	// statements (hold.go); nil without Config.Proxy.
	proxy *proxy.Client
	// open is the burst begun at the proxy and not yet ended.
	open *burst

	mu       sync.Mutex
	sessions map[armer]struct{}
	client   *http.Client // for requests beside the bursts (setup, effects)

	st stats
}

// armer is a live session (HTTP/1.1) or connection (HTTP/2) that must be
// made ready before each burst, while nothing is timed.
type armer interface {
	arm(ctx context.Context, b *burst) error
	order() int
	// attempts is how many attempts of a burst it carries.
	attempts() int
}

// New validates cfg and builds the target; p supplies the run id (for
// {{.RunID}} and {{.Key}}), the connections an effects check uses, and
// optionally the dial function. A bad cfg is an *InputError.
func New(cfg Config, p scenarios.Params) (*Target, error) {
	c, err := compile(cfg)
	if err != nil {
		return nil, err
	}
	if p.RunID == "" {
		p.RunID = scenarios.NewRunID()
	}
	t := &Target{c: c, p: p, sessions: map[armer]struct{}{}}
	if kind, store, _ := strings.Cut(cfg.Effects, ":"); kind == "auto" {
		if t.auto, err = parseAuto(store, cfg.Watch, t); err != nil {
			return nil, err
		}
		if c.release == SinglePacket {
			return nil, inputErrorf("release", "--effects auto runs each burst's requests one at a time too, and single-packet cannot send one alone: use --release last-byte")
		}
	} else if cfg.Effects != "" {
		if t.effects, err = parseEffects(cfg.Effects, t); err != nil {
			return nil, err
		}
	} else if len(cfg.Watch) > 0 {
		return nil, inputErrorf("watch", "--watch names what --effects auto:STORE measures; there is no auto: effects check")
	}
	for _, spec := range cfg.Invariants {
		inv, err := parseCheck("invariant", spec, t)
		if err != nil {
			return nil, err
		}
		t.invariants, t.invNames = append(t.invariants, inv), append(t.invNames, spec)
	}
	t.locks = newLockWatch(t.auto, append([]effectsCheck{t.effects}, t.invariants...)...)
	t.st.statuses = map[int]int{}
	return t, nil
}

// Release is the release mode the target uses: Auto until Choose (or
// Prepare) has asked the server.
func (t *Target) Release() Release { return t.c.release }

// Choose settles an Auto release: it probes the server once — the TLS
// handshake's ALPN for https://, HTTP/2's preface with prior knowledge
// (h2c) for http:// — and picks single-packet when the server speaks
// HTTP/2, else last-byte. It returns why ("" when the mode was asked for by
// name, or already chosen). The only error is a server that cannot be
// reached (a *ConnectError); Prepare calls it too.
func (t *Target) Choose(ctx context.Context) (string, error) {
	if t.c.release != Auto {
		return t.c.auto, nil
	}
	if t.auto != nil {
		t.c.release = LastByte
		t.c.auto = "auto: --effects auto sends each solo twin's requests one at a time, which single-packet cannot"
		return t.c.auto, nil
	}
	proto, streams, err := t.probeH2(ctx)
	if err != nil {
		return "", err
	}
	if proto == "" {
		t.c.release = LastByte
		t.c.auto = "auto: " + t.c.addr + " does not speak HTTP/2 here"
		if t.c.scheme == "https" {
			t.c.auto += " (its TLS handshake chose HTTP/1.1)"
		} else {
			t.c.auto += " (it did not answer HTTP/2's preface with prior knowledge, h2c)"
		}
		return t.c.auto, nil
	}
	t.c.release, t.maxStreams = SinglePacket, streams
	t.c.auto = fmt.Sprintf("auto: %s negotiated %s", t.c.addr, proto)
	return t.c.auto, nil
}

// Prepare probes whether the server serves two requests at once (once, and
// before any other connection of the run is open: see probe.go), and
// connects the effects check, so an unreachable store stops the run before
// the first burst. An HTTP target creates nothing.
func (t *Target) Prepare(ctx context.Context) error {
	if _, err := t.Choose(ctx); err != nil {
		return err
	}
	if t.probe == nil {
		p := t.probeServer(ctx)
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		t.probe = &p
	}
	if t.auto != nil {
		ctx, cancel := context.WithTimeout(ctx, t.c.timeout)
		defer cancel()
		if err := t.auto.open(ctx); err != nil {
			return fmt.Errorf("effects %s: %w", t.auto.describe(), err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, t.c.timeout)
	defer cancel()
	if t.effects != nil {
		if err := t.effects.open(ctx); err != nil {
			return fmt.Errorf("effects check %s: %w", t.effects.describe(), err)
		}
	}
	for i, inv := range t.invariants {
		if err := inv.open(ctx); err != nil {
			return fmt.Errorf("invariant %s: %w", t.invNames[i], err)
		}
	}
	if t.c.cfg.Proxy != "" && t.proxy == nil {
		if err := t.dialProxy(ctx); err != nil {
			return err
		}
	}
	if t.locks != nil {
		return t.locks.open(ctx)
	}
	return nil
}

// Cleanup closes the effects check's connection. The run made nothing to drop.
func (t *Target) Cleanup(context.Context) error {
	t.mu.Lock()
	if t.client != nil {
		t.client.CloseIdleConnections()
	}
	t.mu.Unlock()
	if t.auto != nil {
		t.auto.close()
	}
	if t.locks != nil {
		t.locks.close()
	}
	t.endHold(t.open)
	var errs []error
	if t.effects != nil {
		errs = append(errs, t.effects.close())
	}
	for _, inv := range t.invariants {
		errs = append(errs, inv.close())
	}
	return errors.Join(errs...)
}

// Open dials replica's connections: one keep-alive connection per attempt
// for HTTP/1.1, one HTTP/2 connection for all of them with single-packet.
func (t *Target) Open(ctx context.Context, replica, workers int) (runner.App, error) {
	if t.c.auto != "" && t.c.release == SinglePacket && t.maxStreams > 0 && uint32(workers) > t.maxStreams {
		// Auto chose HTTP/2, but a burst of this size does not fit on one
		// connection: the strongest mode left is last-byte.
		t.c.release = LastByte
		t.c.auto += fmt.Sprintf(", but it allows %d streams at once, fewer than the %d attempts of a burst", t.maxStreams, workers)
	}
	switch t.c.release {
	case SinglePacket:
		conn, err := t.dialH2(ctx)
		if err != nil {
			return nil, err
		}
		if max := conn.maxStreams(); uint32(workers) > max {
			conn.close()
			return nil, fmt.Errorf("single-packet puts the whole burst on one HTTP/2 connection, and %s allows %d streams at once: lower -n to %d or less",
				t.c.addr, max, max)
		}
		a := &h2App{t: t, conn: conn, replica: replica}
		t.register(a)
		return a, nil
	case Naive:
		return naiveApp{t}, nil
	}
	return h1App{t}, nil
}

func (t *Target) register(a armer) {
	t.mu.Lock()
	t.sessions[a] = struct{}{}
	t.mu.Unlock()
}

func (t *Target) unregister(a armer) {
	t.mu.Lock()
	delete(t.sessions, a)
	t.mu.Unlock()
}

// Reset makes the burst's subject — a fresh token — and arms every session:
// each request is rendered and, for last-byte and single-packet, written but
// for its held-back tail, before the runner's gate opens.
func (t *Target) Reset(ctx context.Context, index int) (runner.Subject, error) {
	return t.reset(ctx, index, true)
}

// ResetSolo makes a solo twin's subject (--effects auto): the setup
// request, and no connection readied for a release, so that each attempt's
// request goes out alone.
func (t *Target) ResetSolo(ctx context.Context, index int) (runner.Subject, error) {
	return t.reset(ctx, index, false)
}

// Snapshot measures the store for --effects auto.
func (t *Target) Snapshot(ctx context.Context) (runner.Snapshot, error) {
	if t.auto == nil {
		return nil, errors.New("httpfire: no auto: effects check to measure the store with")
	}
	ctx, cancel := context.WithTimeout(ctx, max(t.c.timeout, 30*time.Second))
	defer cancel()
	return t.auto.snapshot(ctx)
}

func (t *Target) reset(ctx context.Context, index int, arm bool) (runner.Subject, error) {
	var tok [8]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return runner.Subject{}, err
	}
	v := Vars{Burst: index, Token: hex.EncodeToString(tok[:]), RunID: t.p.RunID, Key: t.p.Prefix() + strconv.Itoa(index)}
	if t.c.setup != nil {
		raw, err := execute(t.c.setup, v)
		if err == nil {
			ctx, cancel := context.WithTimeout(ctx, t.c.timeout)
			_, err = t.aside(ctx, t.c.setupM, raw, v)
			cancel()
		}
		if err != nil {
			return runner.Subject{}, fmt.Errorf("setup request: %w", err)
		}
	}
	b := newBurst(v)
	if !arm {
		// A solo twin's subject: its attempts go out one at a time, and
		// the runner reads no check before them.
		return runner.Subject{Burst: index, Key: v.Key, Data: b}, nil
	}
	// The checks read before the burst are read here, before any of the
	// burst's requests is written: an http: check must not wait behind
	// them. Baseline and Broken hand these readings to the runner.
	if err := t.before(ctx, b); err != nil {
		return runner.Subject{}, err
	}
	t.mu.Lock()
	live := make([]armer, 0, len(t.sessions))
	for a := range t.sessions {
		live = append(live, a)
	}
	t.mu.Unlock()
	// Worker order: the release loop then writes in the order of the attempts.
	sort.Slice(live, func(i, j int) bool { return live[i].order() < live[j].order() })
	var firstErr error
	failed := 0
	for _, a := range live {
		b.expected += int32(a.attempts())
	}
	for _, a := range live {
		if err := a.arm(ctx, b); err != nil {
			failed++
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	if len(live) > 0 && failed == len(live) {
		var in *InputError
		if errors.As(firstErr, &in) {
			return runner.Subject{}, firstErr
		}
		return runner.Subject{}, fmt.Errorf("no connection could be made ready for the burst: %w", firstErr)
	}
	// Watched from before the first request leaves. A server the probe
	// found serial has one worker: a lock wait then is another client's.
	if t.locks != nil && !t.probe.Serial() {
		b.watch = t.locks.start(ctx)
	}
	if t.proxy != nil {
		t.endHold(t.open)
		if err := t.beginHold(ctx, b); err != nil {
			return runner.Subject{}, err
		}
		t.open = b
	}
	return runner.Subject{Burst: index, Key: v.Key, Data: b}, nil
}

// Effects is the ground truth of a burst: the effects check when there is
// one, otherwise the attempts the server said succeeded.
func (t *Target) Effects(ctx context.Context, s runner.Subject) (int, error) {
	b, ok := s.Data.(*burst)
	if !ok {
		return 0, errors.New("httpfire: the subject was not made by this target")
	}
	if n := b.attempts.Load(); n > 0 && b.answered.Load() == 0 {
		return 0, fmt.Errorf("none of the %d requests got an HTTP response (first error: %v) — is the server still up?", n, b.firstErr)
	}
	effects := int(b.executed.Load())
	if t.effects != nil {
		ctx, cancel := context.WithTimeout(ctx, t.c.timeout)
		defer cancel()
		n, err := count(ctx, t.effects, b.vars)
		if err != nil {
			return 0, fmt.Errorf("effects check %s: %w", t.effects.describe(), err)
		}
		// The runner reads the check as a change since Baseline; the
		// notes count what happened the same way.
		t.st.add(b, n-b.baseline)
		return n, nil
	}
	t.st.add(b, effects)
	return effects, nil
}

// before reads the effects check and the invariants before the burst.
// Without invariants there is nothing to read for them (broken reads
// each, and there are none).
func (t *Target) before(ctx context.Context, b *burst) error {
	ctx, cancel := context.WithTimeout(ctx, t.c.timeout)
	defer cancel()
	if t.effects != nil {
		n, err := count(ctx, t.effects, b.vars)
		if err != nil {
			return fmt.Errorf("effects check %s, before the burst: %w", t.effects.describe(), err)
		}
		b.baseline = n
	}
	held, err := t.broken(ctx, b)
	if err != nil {
		return fmt.Errorf("%w, before the burst", err)
	}
	b.held = held
	return nil
}

// Baselined: with an effects check, the runner reads it as a change;
// without one, the successful responses are the count.
func (t *Target) Baselined() bool { return t.effects != nil }

// Baseline is what the effects check read before the burst's requests
// were written (in Reset).
func (t *Target) Baseline(_ context.Context, s runner.Subject) (int, error) {
	b, ok := s.Data.(*burst)
	if !ok {
		return 0, errors.New("httpfire: the subject was not made by this target")
	}
	return b.baseline, nil
}

// Uncounted: invariants without an effects check (nor an auto: one) judge
// the run alone; the successful responses are not counted as effects.
func (t *Target) Uncounted() bool { return t.effects == nil && t.auto == nil && len(t.invariants) > 0 }

// Invariants names the invariants as they were written.
func (t *Target) Invariants() []string { return t.invNames }

// Broken counts each invariant's violations: the reading Reset took
// before the burst's requests were written, the first time it is asked
// for a burst; a new reading after that.
func (t *Target) Broken(ctx context.Context, s runner.Subject) ([]int, error) {
	b, ok := s.Data.(*burst)
	if !ok {
		return nil, errors.New("httpfire: the subject was not made by this target")
	}
	if held := b.held; held != nil {
		b.held = nil
		return held, nil
	}
	ctx, cancel := context.WithTimeout(ctx, t.c.timeout)
	defer cancel()
	return t.broken(ctx, b)
}

func (t *Target) broken(ctx context.Context, b *burst) ([]int, error) {
	out := make([]int, len(t.invariants))
	for i, inv := range t.invariants {
		n, err := violations(ctx, inv, b.vars)
		if err != nil {
			return nil, fmt.Errorf("invariant %s: %w", t.invNames[i], err)
		}
		out[i] = n
	}
	return out, nil
}

// ServerParallelism estimates how many of the burst's requests the server
// handled at once, from their response times (see parallelism); 0 when
// too few were answered to tell. When the probe found a server that serves
// one request at a time it is 1, whatever the response times: a winner
// that works longer than the refused requests makes a queue look like
// requests served at once.
func (t *Target) ServerParallelism(s runner.Subject) float64 {
	if t.probe.Serial() {
		return 1
	}
	b, ok := s.Data.(*burst)
	if !ok {
		return 0
	}
	return b.parallelism()
}

// LockWaited reports whether a session of the checked database waited on a
// lock while burst s was in flight (lockwatch.go), and ends the burst's
// watch. A watch that could not ask says no, and the report says why.
func (t *Target) LockWaited(s runner.Subject) bool {
	b, ok := s.Data.(*burst)
	if !ok || b.watch == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.c.timeout)
	defer cancel()
	waited, err := b.watch.end(ctx)
	t.st.lockWatched(waited, err)
	return waited
}

// WireSpread is burst s's client-side release spread: the first to the last
// request leaving (in last-byte, its held tail; in single-packet, each
// connection's one write). The runner reports it as the burst's spread: the
// workers' release by the gate only starts the loop that sends.
func (t *Target) WireSpread(s runner.Subject) (time.Duration, bool) {
	b, ok := s.Data.(*burst)
	if !ok {
		return 0, false
	}
	return b.clientSpread()
}

// ServerProbe is what Prepare's probe found of the server's concurrency.
func (t *Target) ServerProbe() *runner.ServerProbe { return t.probe }

// Server names what answered: its Server header and protocol.
func (t *Target) Server() string {
	t.st.mu.Lock()
	defer t.st.mu.Unlock()
	s := t.c.scheme + "://" + t.c.host
	switch {
	case t.st.server != "" && t.st.proto != "":
		s += " (" + t.st.server + ", " + t.st.proto + ")"
	case t.st.proto != "":
		s += " (" + t.st.proto + ")"
	}
	return s
}

// Checks refuses to call a run SAFE when attempts went unanswered or failed
// and there is no effects check to say what really happened.
func (t *Target) Checks(context.Context) []runner.Check {
	if t.effects != nil {
		return nil
	}
	t.st.mu.Lock()
	defer t.st.mu.Unlock()
	if t.st.failed == 0 {
		return []runner.Check{{Name: "every request answered", OK: true, Detail: fmt.Sprintf("%d of %d requests got a non-5xx HTTP response", t.st.attempts, t.st.attempts)}}
	}
	return []runner.Check{{Name: "every request answered", OK: false, Detail: fmt.Sprintf(
		"%d of %d requests got no response or a 5xx; without an effects check racetest cannot tell whether they ran, so it claims nothing (add --effects)",
		t.st.failed, t.st.attempts)}}
}

// Diagnose says why no request took effect when no response was a
// success: the statuses the server gave, and what usually causes them.
func (t *Target) Diagnose() string {
	t.st.mu.Lock()
	defer t.st.mu.Unlock()
	if t.st.bursts == 0 || t.st.said > 0 || len(t.st.statuses) == 0 {
		return ""
	}
	return "no request succeeded: " + statusLine(t.st.statuses) + " — is the URL right? does each burst need --setup?"
}

// Notes are what a reader needs beside the table: the release mode, what
// the server said against what happened, and the measured spreads.
func (t *Target) Notes() []string {
	t.st.mu.Lock()
	defer t.st.mu.Unlock()
	notes := []string{"request: " + t.c.describe() + "; success: " + t.c.rules.desc, "release: " + releaseNote[t.c.release]}
	if t.c.auto != "" {
		notes[1] += " (" + t.c.auto + ")"
	}
	if n := t.lockNote(); n != "" {
		notes = append(notes, n)
	}
	if t.st.bursts == 0 {
		return notes
	}
	said := fmt.Sprintf("said success: %d responses in %d bursts (median %d per burst)", t.st.said, t.st.bursts, median(t.st.saidPer))
	if t.auto != nil {
		notes = append(notes, said, "effects: "+t.auto.describe()+" — each burst's change of the store, beside the same requests sent one at a time")
		if n := t.auto.note(); n != "" {
			notes = append(notes, n)
		}
	} else if t.effects != nil {
		notes = append(notes, said+fmt.Sprintf("; actually happened: %d (median %d per burst), counted by %s", t.st.happened, median(t.st.happenedPer), t.effects.describe()))
	} else {
		notes = append(notes, said, "no effects check: counting the responses, which is what the server claims, not what happened")
	}
	if len(t.st.client) > 0 {
		what := "first to last request leaving"
		if t.c.release == SinglePacket {
			what = "one write per HTTP/2 connection"
		}
		notes = append(notes, fmt.Sprintf("client-side release spread (%s): median %s, max %s", what, human(medianD(t.st.client)), human(maxD(t.st.client))))
	}
	if len(t.st.arrival) > 0 {
		notes = append(notes, fmt.Sprintf("server arrival spread (%s header): median %s, max %s over %d bursts", ArrivalHeader, human(medianD(t.st.arrival)), human(maxD(t.st.arrival)), len(t.st.arrival)))
	}
	if t.probe != nil {
		notes = append(notes, "server concurrency probe ("+t.probe.Result+"): "+t.probe.Detail)
	}
	if len(t.st.parallel) > 0 {
		notes = append(notes, parallelNote(t.st.parallel, t.probe.Serial()))
	}
	if t.st.late > 0 {
		bursts := fmt.Sprintf("%d bursts were", t.st.late)
		if t.st.late == 1 {
			bursts = "1 burst was"
		}
		notes = append(notes, fmt.Sprintf("%s released before all their attempts were ready (one was not scheduled within %s of the first)", bursts, releaseWait))
	}
	if t.st.unsync > 0 {
		notes = append(notes, fmt.Sprintf("%d attempts could not be held back (a later wave, or a connection re-made): the gate alone released them", t.st.unsync))
	}
	notes = append(notes, "responses: "+statusLine(t.st.statuses))
	return notes
}

var releaseNote = map[Release]string{
	Barrier:      "barrier — one warmed keep-alive connection per attempt; each writes its whole request when the gate opens",
	LastByte:     "last-byte — each warmed HTTP/1.1 connection carried its request but the held-back tail before the gate; one loop wrote every tail",
	SinglePacket: "single-packet — every request on one HTTP/2 connection, each held back by its final DATA frame; all final frames left in one write",
	Naive:        "naive — a fresh connection per request, dialled after the gate (the reference a hand-written script gives)",
}

func statusLine(m map[int]int) string {
	codes := make([]int, 0, len(m))
	for c := range m {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	var parts []string
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%d ×%d", c, m[c]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// lockNote says what the watch for lock waits saw (t.st.mu held).
func (t *Target) lockNote() string {
	switch {
	case t.locks == nil:
		return ""
	case t.st.watchErr != nil:
		return fmt.Sprintf("lock waits: could not be watched (%v): a burst the server answered one at a time counts as untested", t.st.watchErr)
	case t.st.lockWaits == 0:
		return "" // nothing waited: nothing to say
	}
	return fmt.Sprintf("lock waits on %s: a session waited on a lock in %d of %d bursts (a burst answered one at a time while one did was queued by the database's lock, and counts as tested)",
		t.locks.where, t.st.lockWaits, t.st.watched)
}

// stats are the run's figures beyond the runner's.
type stats struct {
	mu                   sync.Mutex
	bursts               int
	said, happened       int
	saidPer, happenedPer []int
	client, arrival      []time.Duration
	parallel             []float64 // per burst with two answers or more
	statuses             map[int]int
	attempts, failed     int
	unsync, late         int
	server, proto        string
	// Bursts watched for lock waits, those in which a session waited,
	// and the first failure to ask.
	watched, lockWaits int
	watchErr           error
}

func (s *stats) lockWatched(waited bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err != nil:
		if s.watchErr == nil {
			s.watchErr = err
		}
	case waited:
		s.watched++
		s.lockWaits++
	default:
		s.watched++
	}
}

func (s *stats) add(b *burst, effects int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bursts++
	said := int(b.executed.Load())
	s.said += said
	s.happened += effects
	s.saidPer = append(s.saidPer, said)
	s.happenedPer = append(s.happenedPer, effects)
	s.attempts += int(b.attempts.Load())
	s.failed += int(b.failed.Load())
	if d, ok := b.clientSpread(); ok {
		s.client = append(s.client, d)
	}
	if d, ok := b.serverSpread(); ok {
		s.arrival = append(s.arrival, d)
	}
	if p := b.parallelism(); p > 0 {
		s.parallel = append(s.parallel, p)
	}
	b.mu.Lock()
	for c, n := range b.statuses {
		s.statuses[c] += n
	}
	if s.server == "" {
		s.server, s.proto = b.server, b.proto
	}
	s.unsync += b.notSynchronous
	if b.late.Load() {
		s.late++
	}
	b.mu.Unlock()
}

// Spreads returns the per-burst client-side release spreads and server
// arrival spreads measured so far (the latter only where the server sent
// the ArrivalHeader). Benchmarks read them.
func (t *Target) Spreads() (client, arrival []time.Duration) {
	t.st.mu.Lock()
	defer t.st.mu.Unlock()
	return append([]time.Duration(nil), t.st.client...), append([]time.Duration(nil), t.st.arrival...)
}

// parallelNote is the run's server parallelism: its distribution over the
// bursts, and how many were served one request at a time.
func parallelNote(ps []float64, probedSerial bool) string {
	s := slices.Clone(ps)
	slices.Sort(s)
	serial := 0
	for _, p := range s {
		if (runner.Burst{ServerParallelism: p}).Serial() {
			serial++
		}
	}
	note := fmt.Sprintf("server parallelism (estimated from the response times): median %.1f requests at once, min %.1f, max %.1f over %d bursts",
		s[len(s)/2], s[0], s[len(s)-1], len(s))
	switch {
	case probedSerial:
		note += "; the probe found the server serial, so every burst counts as answered one at a time, which tests nothing"
	case serial > 0:
		note += fmt.Sprintf("; %d answered one at a time, which test nothing", serial)
	}
	return note
}

func median(xs []int) int {
	if len(xs) == 0 {
		return 0
	}
	s := append([]int(nil), xs...)
	sort.Ints(s)
	return s[len(s)/2]
}

func medianD(xs []time.Duration) time.Duration {
	s := append([]time.Duration(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func maxD(xs []time.Duration) time.Duration {
	m := time.Duration(0)
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

func human(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000)
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}
