// Package race fires at a team's own Go function in `go test`: N attempts
// released together at one fresh subject, burst after burst, with the
// effects counted in the store, and the verdict racetest's own (RACE, SAFE
// with its bound, INCONCLUSIVE):
//
//	func TestRedeemIsOnce(t *testing.T) {
//		race.Test(t, race.Case{
//			Attempts: 16, Bursts: 200,
//			Subject: func(ctx context.Context, b race.Burst) (any, error) { return newCoupon(ctx, db) },
//			Attempt: func(ctx context.Context, s any, w *race.Worker) race.Outcome {
//				return race.From(svc.Redeem(ctx, s.(string)))
//			},
//			Effects: func(ctx context.Context, s any) (int, error) { return countRedemptions(ctx, db, s.(string)) },
//		})
//	}
//
// Underneath is racetest's engine (runner.Run), not a second one: a Case
// becomes a runner.Target, and runner.Options pass through Case.Options. The
// package imports no database driver; the last-byte release for your own
// driver is in race/lastbyte.
//
// The Go race detector finds unsynchronised memory access; this finds the
// other kind, where every access is correctly locked (or happens in a
// database) and the action still runs twice.
package race

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/runner"
)

// Case is one guarded action under fire. Subject, Attempt and Effects are
// required.
type Case struct {
	// Name is the case's name in the report; the test's name when empty.
	Name string
	// Backend names where the attempts' shared state lives, for the
	// report's BACKEND column ("postgres", "redis"); "func" when empty:
	// racetest sees only the function.
	Backend string
	// Attempts is N, the attempts released together in each burst
	// (runner.DefaultAttempts when 0).
	Attempts int
	// Bursts is T, the bursts, each at a fresh subject (runner.DefaultBursts
	// when 0).
	Bursts int
	// ShortBursts is T under `go test -short`; when 0, a fifth of Bursts but
	// at least 20 (or Bursts, if fewer).
	ShortBursts int
	// Allowed is how many effects per subject are correct: exactly that
	// many, as racetest's --allowed N and a suite's allowed: N mean (1 when
	// 0: exactly once; fewer is LOST, a payment that never happened). A
	// range sets runner.Allowed(MAX) and runner.Required(MIN) in Options
	// (0 and 1: at most once); a case where none is correct sets
	// runner.Allowed(0) and runner.Required(0). Where each
	// attempt that reports success (Done) must have landed exactly once,
	// whatever their number, set runner.Accounting(true) in Options.
	Allowed int
	// AllowInconclusive lets Test pass on an INCONCLUSIVE run (the attempts
	// did not overlap enough to mean anything). By default it fails: a test
	// that proves nothing must not look green.
	AllowInconclusive bool

	// Subject makes burst b's fresh subject (a coupon, a row, a key), before
	// the burst and outside its timing.
	Subject func(ctx context.Context, b Burst) (any, error)
	// Session, when set, makes worker's own session (a connection, a
	// client), before the first burst, so that connection setup never
	// serialises the attempts. The attempt finds it in Worker.Session. A
	// session with a Close method is closed after the last burst.
	Session func(ctx context.Context, worker int) (any, error)
	// Attempt tries the guarded action once on subject s. It marks its steps
	// with w.Step ("check", "act") so the timeline shows them.
	Attempt func(ctx context.Context, s any, w *Worker) Outcome
	// Transactions, when set instead of Attempt, is one function per
	// transaction (a reader and a writer, Hermitage's T1 and T2): worker i
	// runs Transactions[i mod len(Transactions)] — with more workers than
	// functions they go round again.
	Transactions []func(ctx context.Context, s any, w *Worker) Outcome
	// Effects counts, in the store itself, how many times the action took
	// effect on s: the ground truth of a burst, never what the attempts
	// believed. It is read right after Subject and again after the burst,
	// and the burst's effects are the change: it may count a shared table
	// (every redemption) as well as s's own rows. A count that never
	// changes while attempts report success observes nothing, and the run
	// is INCONCLUSIVE, never SAFE. Effects may be nil when Invariant is
	// set: the invariant alone judges the run.
	Effects func(ctx context.Context, s any) (int, error)
	// Auto, instead of Effects, judges each burst against a solo twin: the
	// same attempts run one at a time on a subject of their own, and the
	// store's change in the burst (race.Auto(db) measures a *sql.DB) must
	// equal the twin's, table by table, column by column. More is RACE,
	// less LOST; twins that differ from each other, or a store that changes
	// while nothing runs, are INCONCLUSIVE.
	Auto Watcher
	// SoloEvery runs a solo twin before every SoloEvery-th burst only (1
	// when 0); the others are compared with the latest twin.
	SoloEvery int
	// Invariant, when set, counts how many times what must always hold is
	// broken now (0: it holds), e.g. the accounts below 0. It is read
	// before and after each burst; a burst that adds violations is a RACE
	// named after InvariantName, and bursts that never do can prove SAFE.
	Invariant func(ctx context.Context, s any) (int, error)
	// InvariantName names the invariant in the report ("no account below
	// 0"); "Invariant" when empty.
	InvariantName string

	// Options are runner options applied after the fields above: a
	// timeout (runner.Timeout), replicas, a wire release
	// (runner.Release(lastbyte.New(...))).
	Options []runner.Option
}

// Burst is what Subject knows of the burst it prepares.
type Burst struct {
	// Index counts bursts from 0.
	Index int
	// Run is unique to the run ("racetest_1f2e3d4c"): a prefix for the
	// names a run creates, so that they are its own.
	Run string
}

// Token is a name unique to the burst within the run, for a subject's key.
func (b Burst) Token() string { return fmt.Sprintf("%s_%d", b.Run, b.Index) }

// Worker is one attempt's handle: its session and its step marks.
type Worker struct {
	// ID numbers the worker from 0 to Attempts-1.
	ID int
	// Session is what Case.Session made for this worker (nil without it).
	Session any
	rw      *runner.Worker
	ctx     context.Context
}

// Step marks that the attempt begins step name ("check", "act"): the
// timeline of a RACE shows where each worker was. A step boundary is also
// where a scheduler of interleavings (runner.Schedule) may hold the worker.
func (w *Worker) Step(name string) { w.rw.Step(w.ctx, name) }

// Since is how long ago the burst was released.
func (w *Worker) Since() time.Duration { return w.rw.Since() }

// Report is what a run showed.
type Report struct {
	Verdict Verdict
	// Why explains an INCONCLUSIVE or ERROR verdict, or an unmet expectation.
	Why string
	// Violations is the bursts over the allowance, of Bursts run.
	Violations, Bursts int
	// Result is every figure of the run, as racetest's reports use them.
	Result *runner.Result
	text   string
}

// String is the run as racetest prints it: the table, and the worst burst's
// timeline.
func (r *Report) String() string { return r.text }

// Run fires c and returns its report, for use outside a test. The error is
// a case that cannot run (a missing function, a bad option) or a run that
// could not be carried out (Subject or Effects failed); the report then
// holds what finished.
func Run(ctx context.Context, c Case) (*Report, error) {
	res, err := run(ctx, c)
	if res == nil {
		return nil, err
	}
	rep, _ := judge(c.Name, c.Backend, res, err, wantSafe, !c.AllowInconclusive)
	return rep, err
}

// Test fails t unless c is shown safe: no burst left more effects than
// allowed, over bursts whose attempts really overlapped. On a RACE it
// stops the test (t.Errorf, t.FailNow) with the table, the worst burst's
// timeline and the command to run it again; INCONCLUSIVE fails too unless
// c.AllowInconclusive. Under `go test -short` it runs c.ShortBursts.
func Test(t testing.TB, c Case) *Report {
	t.Helper()
	return test(t, c, wantSafe)
}

// ExpectRace is for a test that demonstrates a known bug: it passes when
// the run shows the race (and logs the table and the timeline, seen with
// -v), and fails, saying so, when no burst exceeded the allowance — the bug
// may be fixed, or the case no longer reaches it.
func ExpectRace(t testing.TB, c Case) *Report {
	t.Helper()
	return test(t, c, wantRace)
}

func test(t testing.TB, c Case, want expectation) *Report {
	t.Helper()
	short := testing.Short()
	if short && c.validate() == nil {
		// An invalid case keeps its fields, for run to refuse: under
		// -short a negative Bursts once became 20 bursts and passed.
		c.Bursts = c.shortBursts()
	}
	if c.Name == "" {
		c.Name = t.Name()
	}
	res, err := run(t.Context(), c)
	if res == nil {
		t.Fatalf("race: %v", err)
		return nil
	}
	rep, a := judge(c.Name, c.Backend, res, err, want, !c.AllowInconclusive)
	if a.met {
		t.Logf("race: %s\n%s", passLine(a, want), rep.text)
		return rep
	}
	t.Errorf("race: %s\n\n%s%s", failLine(a, want), rep.text, reproduce(t.Name(), short))
	t.FailNow()
	return rep
}

func passLine(a assessed, want expectation) string {
	if want == wantRace {
		return fmt.Sprintf("RACE shown, as expected: %d of %d bursts left more effects than allowed", a.violations, a.bursts)
	}
	return string(a.verdict)
}

func failLine(a assessed, want expectation) string {
	switch {
	case a.verdict == Error:
		return "the run could not be carried out: " + a.why
	case want == wantRace:
		return "ExpectRace: this test demonstrates a known bug, but the race did not show — " + a.why +
			". If the bug is fixed, make this a race.Test; otherwise raise Bursts or widen the gap between check and act"
	case a.verdict == Inconclusive:
		return "INCONCLUSIVE: " + a.why +
			" — the test proves nothing as it stands; let the attempts overlap (a Session per worker, more Attempts), or set AllowInconclusive"
	}
	return string(a.verdict) + ": " + a.why
}

// reproduce is the command that runs this test alone, from its package's
// directory.
func reproduce(name string, short bool) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	dir := "."
	if _, file, _, ok := runtime.Caller(3); ok {
		dir = filepath.Dir(file)
	}
	hint := fmt.Sprintf("\nreproduce: (cd %s && go test -race -count=1 -v -run '%s' .)\n", dir, strings.Join(parts, "/"))
	hint += "A race shows in some bursts, not in every one: a rerun sees different counts, and more bursts see more."
	if short {
		hint += " This run was under -short, with fewer bursts."
	}
	return hint + "\n"
}

func (c Case) shortBursts() int {
	if c.ShortBursts > 0 {
		return c.ShortBursts
	}
	b := c.Bursts
	if b <= 0 {
		b = runner.DefaultBursts
	}
	return min(b, max(b/5, 20))
}

// run builds the target and fires it; a nil Result means the case could
// not start.
func run(ctx context.Context, c Case) (*runner.Result, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	cfg := runner.NewConfig(c.options()...)
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("case: %w", err)
	}
	res, err := runner.RunConfig(ctx, &target{c: &c, run: newRunID()}, cfg)
	if res == nil {
		return nil, err
	}
	return res, err
}

func (c *Case) validate() error {
	var missing []string
	if c.Subject == nil {
		missing = append(missing, "Subject")
	}
	if c.Attempt == nil && len(c.Transactions) == 0 {
		missing = append(missing, "Attempt")
	}
	if c.Attempt != nil && len(c.Transactions) > 0 {
		return fmt.Errorf("case %q: set Attempt (one function for every worker) or Transactions (one per transaction), not both", c.Name)
	}
	for i, f := range c.Transactions {
		if f == nil {
			return fmt.Errorf("case %q: Transactions[%d] is nil: every transaction needs its function", c.Name, i)
		}
	}
	if c.Effects == nil && c.Invariant == nil && c.Auto == nil {
		missing = append(missing, "Effects (or Invariant, or Auto)")
	}
	if c.Effects != nil && c.Auto != nil {
		return fmt.Errorf("case %q: Effects and Auto contradict each other: count the effects, or compare with solo twins — keep one", c.Name)
	}
	if len(missing) > 0 {
		return fmt.Errorf("case %q: %s must be set (Subject makes each burst's fresh subject, Attempt tries the action once, Effects counts in the store what took effect, Invariant counts what breaks a rule that must always hold, or Auto compares each burst with solo twins)",
			c.Name, strings.Join(missing, ", "))
	}
	if c.Attempts < 0 || c.Bursts < 0 || c.Allowed < 0 || c.ShortBursts < 0 || c.SoloEvery < 0 {
		return fmt.Errorf("case %q: Attempts, Bursts, ShortBursts, Allowed and SoloEvery cannot be negative (0 takes the default)", c.Name)
	}
	return nil
}

// attempt is the function worker runs.
func (c *Case) attempt(worker int) func(ctx context.Context, s any, w *Worker) Outcome {
	if len(c.Transactions) == 0 {
		return c.Attempt
	}
	return c.Transactions[worker%len(c.Transactions)]
}

func (c *Case) options() []runner.Option {
	var opts []runner.Option
	if c.Attempts > 0 {
		opts = append(opts, runner.Attempts(c.Attempts))
	}
	if c.Bursts > 0 {
		opts = append(opts, runner.Bursts(c.Bursts))
	}
	if c.Allowed > 0 {
		opts = append(opts, runner.Allowed(c.Allowed), runner.Required(c.Allowed))
	}
	if c.Auto != nil {
		opts = append(opts, runner.SoloTwins(max(c.SoloEvery, 1)))
	}
	return append(opts, c.Options...)
}

func judge(name, backend string, res *runner.Result, err error, want expectation, strict bool) (*Report, assessed) {
	c := reportCase(name, backend, res, err, want, strict)
	a := assess(c)
	return &Report{Verdict: a.verdict, Why: a.why, Violations: a.violations, Bursts: a.bursts, Result: res,
		text: table(c)}, a
}

func newRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "racetest_" + hex.EncodeToString(b[:])
}

// target is a Case as the runner drives it.
type target struct {
	c   *Case
	run string
}

var (
	_ runner.Target      = (*target)(nil)
	_ runner.Baseliner   = (*target)(nil)
	_ runner.Invarianter = (*target)(nil)
	_ runner.Uncounted   = (*target)(nil)
)

func (t *target) Prepare(context.Context) error { return nil }
func (t *target) Cleanup(context.Context) error { return nil }

func (t *target) Open(context.Context, int, int) (runner.App, error) { return app{t.c}, nil }

func (t *target) Reset(ctx context.Context, burst int) (runner.Subject, error) {
	v, err := t.c.Subject(ctx, Burst{Index: burst, Run: t.run})
	if err != nil {
		return runner.Subject{}, fmt.Errorf("subject: %w", err)
	}
	key := ""
	if s, ok := v.(string); ok {
		key = s
	} else if s, ok := v.(fmt.Stringer); ok {
		key = s.String()
	}
	return runner.Subject{Burst: burst, Key: key, Data: v}, nil
}

func (t *target) Effects(ctx context.Context, s runner.Subject) (int, error) {
	if t.c.Effects == nil {
		return 0, nil // Auto: the runner measures the store instead
	}
	return t.c.Effects(ctx, s.Data)
}

// The effects are read as a change since the subject was made.
func (t *target) Baselined() bool { return t.c.Effects != nil }
func (t *target) Baseline(ctx context.Context, s runner.Subject) (int, error) {
	return t.c.Effects(ctx, s.Data)
}

// A case with neither Effects nor Auto is judged by its invariant alone.
func (t *target) Uncounted() bool { return t.c.Effects == nil && t.c.Auto == nil }

func (t *target) Invariants() []string {
	if t.c.Invariant == nil {
		return nil
	}
	if t.c.InvariantName == "" {
		return []string{"Invariant"}
	}
	return []string{t.c.InvariantName}
}

func (t *target) Broken(ctx context.Context, s runner.Subject) ([]int, error) {
	n, err := t.c.Invariant(ctx, s.Data)
	if err != nil {
		return nil, fmt.Errorf("invariant: %w", err)
	}
	return []int{n}, nil
}

type app struct{ c *Case }

func (a app) Close() error { return nil }

func (a app) Session(ctx context.Context, worker int) (runner.Session, error) {
	var v any
	if a.c.Session != nil {
		var err error
		if v, err = a.c.Session(ctx, worker); err != nil {
			return nil, fmt.Errorf("session: %w", err)
		}
	}
	return &session{c: a.c, w: Worker{ID: worker, Session: v}}, nil
}

type session struct {
	c *Case
	w Worker
}

func (s *session) Attempt(ctx context.Context, sub runner.Subject, rw *runner.Worker) (o Outcome) {
	s.w.rw, s.w.ctx = rw, ctx
	defer func() {
		// A panicking attempt is this attempt's error, not the end of the
		// test binary (it runs on the runner's goroutine, not the test's).
		if p := recover(); p != nil {
			o = runner.Failed(fmt.Errorf("attempt panicked: %v", p))
		}
	}()
	return s.c.attempt(s.w.ID)(ctx, sub.Data, &s.w)
}

func (s *session) Close() error {
	switch c := s.w.Session.(type) {
	case interface{ Close() error }:
		return c.Close()
	case interface{ Close() }:
		c.Close()
	}
	return nil
}
