package script

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/racetest/racetest/runner"
)

// Store is a database as scripts reach it: racetest's own connection for
// the setup, subject, effects and teardown scripts, and one connection of
// its own per worker.
type Store interface {
	// Server names the server ("PostgreSQL 15.20").
	Server() string
	// Where names the server's address and database, for the banner.
	Where() string
	// Admin is the connection the once-per-run and once-per-burst scripts use.
	Admin() Conn
	// Reader is the admin connection as a check (the effects script, an
	// invariant) uses it, so that it cannot write: SQL inside a read-only
	// transaction that end rolls back; Redis refusing every command the
	// server does not flag read-only.
	Reader(ctx context.Context) (c Conn, end func(), err error)
	// Open starts one replica for workers workers.
	Open(ctx context.Context, workers int) (Pool, error)
	// Notes are what the report should say about the server's settings.
	Notes() []string
	Close() error
}

// Pool is one replica's connections.
type Pool interface {
	// Session dials and warms worker's own connection.
	Session(ctx context.Context, worker int) (SessionConn, error)
	Close() error
}

// SessionConn is a worker's connection.
type SessionConn interface {
	Conn
	Close() error
}

// Scripts are the scripts of a run; all but Attempt and Effects may be
// nil. Attempts, when there are several, are one script per transaction:
// attempt i runs Attempts[i mod len(Attempts)] (A the first, B the
// second, and round again when there are more attempts than scripts);
// Attempt is the first.
type Scripts struct {
	Setup, Subject, Attempt, Effects, Teardown *Script
	// Auto: no effects script; each burst's change of the store is
	// compared with a solo twin's (--effects auto), on the tables (Redis:
	// key patterns) Watch names, or every one of the schema.
	Auto     bool
	Watch    []string
	Attempts []*Script
	// Invariants are checked after each burst (runner.Invarianter).
	Invariants []*Script
}

// For is the script attempt worker runs.
func (sc Scripts) For(worker int) *Script {
	if len(sc.Attempts) == 0 {
		return sc.Attempt
	}
	return sc.Attempts[worker%len(sc.Attempts)]
}

// Target runs scripts as a runner.Target: Setup in Prepare, Subject in
// Reset, Attempt in each attempt, Effects to count, Teardown in Cleanup.
// It creates and drops nothing of its own.
type Target struct {
	store Store
	sc    Scripts
	runID string
	admin sync.Mutex // the admin connection serves one script at a time

	mu    sync.Mutex
	first []runner.Outcome // the first burst's outcomes, by worker

	// Unit is what the run repeats, as its errors name it: "burst" (""),
	// or "order" when explore runs the attempts step by step.
	Unit string
}

// firstUnit names the run's first repetition: "the first burst".
func (t *Target) firstUnit() string {
	if t.Unit == "" {
		return "the first burst"
	}
	return "the first " + t.Unit
}

// Snapshotter is a Store that can measure what it holds, for --effects
// auto: watch names tables (Redis: key patterns); none, the whole schema.
type Snapshotter interface {
	Snapshot(ctx context.Context, watch []string) (runner.Snapshot, error)
}

var (
	_ runner.Target      = (*Target)(nil)
	_ runner.Describer   = (*Target)(nil)
	_ runner.Noter       = (*Target)(nil)
	_ runner.Baseliner   = (*Target)(nil)
	_ runner.Invarianter = (*Target)(nil)
	_ runner.Uncounted   = (*Target)(nil)
)

// New makes a target of sc on store. runID fills {{.RunID}}; tokens are
// "<runID>-<burst>".
func New(store Store, sc Scripts, runID string) (*Target, error) {
	if sc.Attempt == nil || sc.Effects == nil && len(sc.Invariants) == 0 && !sc.Auto {
		return nil, errors.New("script: an attempt script and an effects script (or effects auto) or an invariant are required")
	}
	if _, ok := store.(Snapshotter); sc.Auto && !ok {
		return nil, &RunError{What: "--effects auto", Script: true, Err: fmt.Errorf("%s cannot be measured: count the effects with a query instead", store.Server())}
	}
	watch := make([]string, len(sc.Watch))
	for i, w := range sc.Watch {
		watch[i] = strings.ReplaceAll(w, "{{.RunID}}", runID)
	}
	sc.Watch = watch
	return &Target{store: store, sc: sc, runID: runID}, nil
}

// Token is the subject's name in burst b: unique across runs, since the
// user's tables outlive them.
func (t *Target) Token(b int) string { return t.runID + "-" + strconv.Itoa(b) }

// Server names the server.
func (t *Target) Server() string { return t.store.Server() }

// Notes are the store's notes.
func (t *Target) Notes() []string { return t.store.Notes() }

// Close closes racetest's own connection.
func (t *Target) Close() error { return t.store.Close() }

// RunError is a failure of the setup, subject, effects or teardown script,
// or of the first burst's attempts: the run stops and gives no verdict.
type RunError struct {
	// What failed: "--setup", "the first burst", …
	What string
	Err  error
	// Script reports a failure of the script's own (a statement the
	// server refused as written, a variable never set): bad input, exit 2.
	// Otherwise the server failed: exit 3.
	Script bool
}

func (e *RunError) Error() string { return e.What + ": " + e.Err.Error() }
func (e *RunError) Unwrap() error { return e.Err }

func runError(what string, err error) error {
	var se *SyntaxError
	return &RunError{What: what, Err: err, Script: IsScriptError(err) || errors.As(err, &se)}
}

// once runs a whole script on the admin connection and returns its last
// reply, or the error that stopped it.
func (t *Target) once(ctx context.Context, s *Script, d Data) (Reply, error) {
	t.admin.Lock()
	defer t.admin.Unlock()
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	e := s.Start(t.store.Admin(), d, nil)
	e.QueryLast()
	o := e.Run(ctx, nil)
	if o.Class != runner.Executed {
		if o.Err == nil {
			o.Err = errors.New(o.Class.String())
		}
		return Reply{}, o.Err
	}
	return e.Last(), nil
}

// adminTimeout bounds each setup, subject, effects and teardown script.
const adminTimeout = 30 * time.Second

// Prepare has the server judge the checks (they only read), then runs the
// setup script.
func (t *Target) Prepare(ctx context.Context) error {
	if err := t.preflight(ctx); err != nil {
		return err
	}
	if t.sc.Setup == nil {
		return nil
	}
	if _, err := t.once(ctx, t.sc.Setup, Data{RunID: t.runID}); err != nil {
		return runError("--setup (the teardown script was not run: drop what the setup made before it failed yourself)", err)
	}
	return nil
}

// Reset runs the subject script for burst b.
func (t *Target) Reset(ctx context.Context, b int) (runner.Subject, error) {
	s := runner.Subject{Burst: b, Key: t.Token(b)}
	if t.sc.Subject != nil {
		if _, err := t.once(ctx, t.sc.Subject, Data{RunID: t.runID, Token: s.Key, Burst: b}); err != nil {
			return s, runError("--subject", err)
		}
	}
	return s, nil
}

// Snapshot measures the store for --effects auto, on racetest's own
// connection. The first burst is checked by Effects, which the runner calls
// right after a burst's snapshots: a script that failed whole is named as
// such, not as a snapshot that failed.
func (t *Target) Snapshot(ctx context.Context) (runner.Snapshot, error) {
	t.admin.Lock()
	defer t.admin.Unlock()
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	s, err := t.store.(Snapshotter).Snapshot(ctx, t.sc.Watch)
	if err != nil {
		var se *runner.SnapshotError
		return nil, &RunError{What: "--effects auto", Err: err, Script: errors.As(err, &se)}
	}
	return s, nil
}

// Effects checks the first burst for a script that cannot work, then runs
// the effects script: its last statement's first value is the count. The
// runner reads it as a change since Baseline.
func (t *Target) Effects(ctx context.Context, s runner.Subject) (int, error) {
	if s.Burst == 0 {
		if err := t.checkFirst(); err != nil {
			return 0, err
		}
	}
	if t.sc.Auto {
		return 0, nil // measured by snapshots (Snapshot)
	}
	return t.count(ctx, t.sc.Effects, "--effects", s, false)
}

// Baseline runs the effects script right after the subject was made: the
// burst's effects are what it adds (a shared count, SELECT count(*) FROM
// redemptions, works as well as a count per token).
func (t *Target) Baseline(ctx context.Context, s runner.Subject) (int, error) {
	return t.count(ctx, t.sc.Effects, "--effects", s, false)
}

// Baselined: the effects script is the team's own, read as a change; an
// auto run has none (its snapshots measure the change).
func (t *Target) Baselined() bool { return t.sc.Effects != nil && !t.sc.Auto }

// Uncounted reports a run without an effects script, nor effects auto:
// its invariants judge it.
func (t *Target) Uncounted() bool { return t.sc.Effects == nil && !t.sc.Auto }

// Invariants names the invariants: an inline one by its text, one from a
// file by the file's name.
func (t *Target) Invariants() []string {
	names := make([]string, len(t.sc.Invariants))
	for i, inv := range t.sc.Invariants {
		names[i] = inv.Name
		if inv.Inline {
			var texts []string
			for _, st := range inv.Steps {
				if st.Kind == Statement {
					texts = append(texts, strings.TrimSuffix(strings.TrimSpace(st.Text), ";"))
				}
			}
			names[i] = oneLine(strings.Join(texts, "; "))
		}
	}
	return names
}

// Broken runs each invariant after the burst: a count of what breaks it,
// or a boolean that must hold (false: broken once).
func (t *Target) Broken(ctx context.Context, s runner.Subject) ([]int, error) {
	out := make([]int, len(t.sc.Invariants))
	for i, inv := range t.sc.Invariants {
		n, err := t.count(ctx, inv, "--invariant", s, true)
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

// count runs sc on the admin connection and reads its last statement's
// first value as a whole number; with truth, a boolean reads as a
// violation count (true: it holds, 0; false: 1).
func (t *Target) count(ctx context.Context, sc *Script, what string, s runner.Subject, truth bool) (int, error) {
	r, err := t.read(ctx, sc, Data{RunID: t.runID, Token: s.Key, Burst: s.Burst})
	if err != nil {
		return 0, runError(what, err)
	}
	v, n, counted, err := sc.lang().count(r)
	if err != nil {
		return 0, t.oneValueError(sc, what, err)
	}
	if counted {
		return n, nil
	}
	if truth {
		if holds, ok := truthOf(v); ok {
			if holds {
				return 0, nil
			}
			return 1, nil
		}
	}
	n, err = strconv.Atoi(v)
	if err != nil || n < 0 {
		last := sc.lastStatement()
		want := "one whole number (a count)"
		if truth {
			want = "one whole number (how many rows break it) or a boolean (true: it holds)"
		}
		return 0, &RunError{What: what, Script: true, Err: &ScriptError{Pos: last.Pos, Text: last.Text,
			Msg: fmt.Sprintf("the %s script must end with a query that returns %s, got %q", strings.TrimPrefix(what, "--"), want, v)}}
	}
	return n, nil
}

// truthOf reads a server's boolean: PostgreSQL's t and f, true and false.
// MySQL's booleans are the numbers 1 and 0, which read as counts.
func truthOf(v string) (holds, ok bool) {
	switch strings.ToLower(v) {
	case "t", "true":
		return true, true
	case "f", "false":
		return false, true
	}
	return false, false
}

func (s *Script) lastStatement() *Step {
	for i := len(s.Steps) - 1; i >= 0; i-- {
		if s.Steps[i].Kind == Statement {
			return &s.Steps[i]
		}
	}
	return &Step{Pos: Pos{File: s.Name, Line: 1}}
}

// checkFirst stops the run after a first burst that shows the script
// cannot work: a failure of the script's own in any attempt, or one
// statement failing in every attempt.
func (t *Target) checkFirst() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	allFailed := len(t.first) > 0
	var firstFail *StatementError
	for _, o := range t.first {
		var se *ScriptError
		if errors.As(o.Err, &se) {
			return &RunError{What: t.firstUnit(), Err: se, Script: true}
		}
		var st *StatementError
		if o.Class != runner.Error || !errors.As(o.Err, &st) {
			allFailed = false
			continue
		}
		if firstFail == nil {
			firstFail = st
		}
	}
	if allFailed && firstFail != nil {
		why := "the server refused it"
		if firstFail.Schema {
			why = "the statement, as written, does not fit the schema or the server's language"
		}
		return &RunError{What: fmt.Sprintf("%s: every attempt (%d of %d) failed; %s", t.firstUnit(), len(t.first), len(t.first), why),
			Err: firstFail, Script: firstFail.Schema}
	}
	return nil
}

func (t *Target) record(worker int, o runner.Outcome) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(t.first) <= worker {
		t.first = append(t.first, runner.Outcome{Class: runner.Executed})
	}
	t.first[worker] = o
}

// Cleanup runs the teardown script.
func (t *Target) Cleanup(ctx context.Context) error {
	if t.sc.Teardown == nil {
		return nil
	}
	if _, err := t.once(ctx, t.sc.Teardown, Data{RunID: t.runID}); err != nil {
		return runError("--teardown", err)
	}
	return nil
}

// Open starts one replica.
func (t *Target) Open(ctx context.Context, _ int, workers int) (runner.App, error) {
	p, err := t.store.Open(ctx, workers)
	if err != nil {
		return nil, err
	}
	return &app{t: t, pool: p}, nil
}

type app struct {
	t    *Target
	pool Pool
}

func (a *app) Session(ctx context.Context, worker int) (runner.Session, error) {
	c, err := a.pool.Session(ctx, worker)
	if err != nil {
		return nil, err
	}
	s := &session{t: a.t, conn: c}
	if lp, ok := a.t.store.(lockProber); ok {
		return &waitingSession{session: s, probe: lp}, nil
	}
	return s, nil
}

// lockProber is a store whose server says whether a worker's connection
// waits on a lock.
type lockProber interface {
	lockWait(ctx context.Context, c SessionConn) (bool, error)
}

// waitingSession is a session on such a store: an explorer asks it
// whether its statement waits on a lock, rather than timing it.
type waitingSession struct {
	*session
	probe lockProber
}

// LockWait asks the server, on racetest's own connection, whether the
// session's statement waits on a lock.
func (s *waitingSession) LockWait(ctx context.Context) (bool, error) {
	s.t.admin.Lock()
	defer s.t.admin.Unlock()
	return s.probe.lockWait(ctx, s.conn)
}

func (a *app) Close() error { return a.pool.Close() }

type session struct {
	t    *Target
	conn SessionConn
}

func (s *session) Attempt(ctx context.Context, subj runner.Subject, w *runner.Worker) runner.Outcome {
	d := Data{RunID: s.t.runID, Token: subj.Key, Burst: subj.Burst, Attempt: w.ID}
	// Each marked statement is a step: an explorer may hold the attempt
	// before it (without one, Step is Mark).
	o := s.t.sc.For(w.ID).Start(s.conn, d, nil).Run(ctx, func(label string) { w.Step(ctx, label) })
	if subj.Burst == 0 {
		s.t.record(w.ID, o)
	}
	return o
}

func (s *session) Close() error { return s.conn.Close() }

// DescribeStep names the attempt's step label ("redeem.sql:2") as a
// person reads it in a schedule: "SELECT id FROM … (redeem.sql:2)".
func (t *Target) DescribeStep(label string) string {
	if st := t.step(label); st != nil {
		return shortText(st.Text) + " (" + label + ")"
	}
	return label
}

// ReadOnly reports whether step label of attempt's own script is a plain
// read: a SELECT that locks nothing, a Redis command that only reads. Two
// plain reads of different attempts commute, so an explorer runs only one
// of the orders that differ by swapping them; a step is judged in the
// script its attempt runs, never in another's.
func (t *Target) ReadOnly(attempt int, label string) bool {
	sc := t.sc.For(attempt)
	st := sc.stepLabeled(label)
	if st == nil || st.Kind != Statement {
		return false
	}
	words := strings.Fields(strings.ToUpper(st.Text))
	return len(words) > 0 && sc.lang().readOnly(words)
}

// step finds the step labelled label in any attempt's script.
func (t *Target) step(label string) *Step {
	for _, sc := range append([]*Script{t.sc.Attempt}, t.sc.Attempts...) {
		if st := sc.stepLabeled(label); st != nil {
			return st
		}
	}
	return nil
}

func (s *Script) stepLabeled(label string) *Step {
	if s == nil {
		return nil
	}
	for i := range s.Steps {
		if st := &s.Steps[i]; st.Marked() && s.StepLabel(st) == label {
			return st
		}
	}
	return nil
}

// shortText is a statement on one line, cut to a schedule's width.
func shortText(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 48 {
		s = string(r[:47]) + "…"
	}
	return s
}

// catalogReader is a Store whose catalog can say which tables a statement
// reaches past its text (sqldb.HiddenReach).
type catalogReader interface {
	hiddenReach(ctx context.Context, tables []string) (map[string]string, error)
}

// HiddenReach asks the server's catalog, on racetest's own connection,
// which of tables (lower case, {{.RunID}} filled in) a statement may
// reach past what its text names, and why (sqldb.HiddenReach). A store
// without such a catalog (Redis, MongoDB) answers with an error.
func (t *Target) HiddenReach(ctx context.Context, tables []string) (map[string]string, error) {
	cr, ok := t.store.(catalogReader)
	if !ok {
		return nil, fmt.Errorf("%s has no catalog of tables", t.store.Server())
	}
	t.admin.Lock()
	defer t.admin.Unlock()
	return cr.hiddenReach(ctx, tables)
}
