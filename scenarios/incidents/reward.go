package incidents

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// The engine contract, and the optional parts this target promises:
// checked here so a changed signature fails the build, not the report.
var (
	_ runner.Target    = (*rewardTarget)(nil)
	_ runner.Describer = (*rewardTarget)(nil)
	_ runner.Noter     = (*rewardTarget)(nil)
	_ runner.Checker   = (*rewardTarget)(nil)
	_ runner.Closer    = (*rewardTarget)(nil)
)

// rewardID is the reward every burst's user claims.
const rewardID = "welcome-bonus"

// rewardAmount is what the reward pays.
const rewardAmount = 500

var (
	// errDuplicate marks the unique constraint's refusal (1062, 23505): the
	// only error that means "already paid".
	errDuplicate = errors.New("duplicate key")
	// errConflict marks a deadlock or serialization failure: the store asks
	// for a retry (1213, 40001).
	errConflict = errors.New("conflict")
)

// ledgerBackend is where the reward tables live: records (with or without
// UNIQUE(user_id, reward_id)) and in-store payments.
type ledgerBackend interface {
	Prepare(ctx context.Context) error
	Open(ctx context.Context, workers int) (ledgerPool, error)
	// Counts reads the ground truth for one user and reward.
	Counts(ctx context.Context, user, reward string) (records, payments int, err error)
	// Engine names the storage engine the tables really use, and whether it
	// honours transactions (valid after Prepare).
	Engine() (name string, transactional bool)
	Cleanup(ctx context.Context) error
	Close() error
	Server() string
}

type ledgerPool interface {
	Conn(ctx context.Context) (ledgerConn, error)
	Close() error
}

// ledgerOps are the statements of the pattern. A nil amount is the injected
// failure: the NOT NULL column refuses it.
type ledgerOps interface {
	HasRecord(ctx context.Context, user, reward string) (bool, error)
	// Record inserts the record and returns its id; a duplicate key wraps
	// errDuplicate.
	Record(ctx context.Context, user, reward string, amount *int) (int64, error)
	// Pay credits the user in the store.
	Pay(ctx context.Context, user, reward string, amount *int) error
}

type ledgerConn interface {
	ledgerOps
	Begin(ctx context.Context) (ledgerTx, error)
	Close() error
}

type ledgerTx interface {
	ledgerOps
	Commit() error
	Rollback() error
}

type ledgerFactory func(ctx context.Context, p scenarios.Params, unique bool) (ledgerBackend, error)

func rewardFactory(backend ledgerFactory) scenarios.Factory {
	return func(ctx context.Context, p scenarios.Params) (runner.Target, error) {
		if err := p.Validate(); err != nil {
			return nil, err
		}
		v, err := variantsOf(CheckThenPay, rewardPatterns).pick(RewardPayout, p.Variant)
		if err != nil {
			return nil, err
		}
		pat := rewardPatterns[v]
		lb, err := backend(ctx, p, pat.unique)
		if err != nil {
			return nil, err
		}
		t := &rewardTarget{p: p, variant: v, pattern: pat, ledger: lb}
		if pat.external {
			t.provider = newProvider()
		}
		return t, nil
	}
}

// rewardTarget is reward-payout on one backend for one run.
type rewardTarget struct {
	p        scenarios.Params
	variant  string
	pattern  rewardPattern
	ledger   ledgerBackend
	provider *provider // external variants: the simulated payment provider

	declined atomic.Int64 // attempts told "already paid"
	opened   atomic.Bool  // a replica ran in this process

	mu                  sync.Mutex
	bursts              int
	recorded, paid      int
	overPaid, underPaid int // bursts paying more than once; bursts with a record and no payment
}

// rewardBurst is one user's double tap.
type rewardBurst struct {
	user string
	// inject makes the record insert fail with a non-duplicate error.
	inject bool
	// failPayOnce makes the first in-store payment fail (the tx check).
	failPayOnce atomic.Bool
}

func (t *rewardTarget) Prepare(ctx context.Context) error {
	return prepareOrUndo(ctx, t.ledger.Prepare, t.ledger.Cleanup)
}

func (t *rewardTarget) Cleanup(ctx context.Context) error {
	if t.provider != nil {
		t.provider.Close()
	}
	return t.ledger.Cleanup(ctx)
}

func (t *rewardTarget) Close() error {
	if t.provider != nil {
		t.provider.Close()
	}
	return t.ledger.Close()
}

func (t *rewardTarget) Server() string { return t.ledger.Server() }

func (t *rewardTarget) Reset(_ context.Context, burst int) (runner.Subject, error) {
	user := t.p.Prefix() + "u" + strconv.Itoa(burst)
	b := &rewardBurst{user: user, inject: t.pattern.inject}
	if t.provider != nil {
		t.provider.dropNextResponse(user)
	}
	return runner.Subject{Burst: burst, Key: user, Data: b}, nil
}

// Effects counts payments where they landed: in the store, and on the
// provider's side.
func (t *rewardTarget) Effects(ctx context.Context, s runner.Subject) (int, error) {
	records, paid, err := t.counts(ctx, s.Key)
	if err != nil {
		return 0, err
	}
	t.mu.Lock()
	t.bursts++
	t.recorded += records
	t.paid += paid
	if paid > 1 {
		t.overPaid++
	}
	if records > 0 && paid == 0 {
		t.underPaid++
	}
	t.mu.Unlock()
	return paid, nil
}

func (t *rewardTarget) counts(ctx context.Context, user string) (records, paid int, err error) {
	if t.provider != nil && !t.opened.Load() {
		return 0, 0, errNoReplicaHere(RewardPayout+" "+t.variant, "payments", "the simulated payment provider")
	}
	records, paid, err = t.ledger.Counts(ctx, user, rewardID)
	if err != nil {
		return 0, 0, fmt.Errorf("count the ledger of %s: %w", user, err)
	}
	if t.provider != nil {
		paid += t.provider.count(user)
	}
	return records, paid, nil
}

func (t *rewardTarget) Notes() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var notes []string
	if t.bursts > 0 {
		diff := t.paid - t.recorded
		trade := "paid as recorded"
		switch {
		case diff > 0:
			trade = "over-pay: more payments than records"
		case diff < 0:
			trade = "under-pay: records without a payment"
		}
		notes = append(notes, fmt.Sprintf("ledger after %d bursts: paid %d, recorded %d, difference %+d (%s); %d bursts paid more than once, %d recorded without paying",
			t.bursts, t.paid, t.recorded, diff, trade, t.overPaid, t.underPaid))
	}
	if n := t.declined.Load(); t.variant == SwallowErrors && n > 0 {
		notes = append(notes, fmt.Sprintf("swallow-errors: a NOT NULL failure was injected into every record insert, so nothing could be paid; %d attempts were told \"already paid\" instead of an error: each burst's user was told paid and never paid (LOST)", n))
	}
	if t.provider != nil {
		dropped, replayed := t.provider.stats()
		notes = append(notes, fmt.Sprintf("payment provider (simulated, %s): counted the payments; dropped %d responses after paying, answered %d repeated idempotency keys without paying",
			t.provider.URL(), dropped, replayed))
	}
	if name, tx := t.ledger.Engine(); name != "" {
		if tx {
			notes = append(notes, "reward tables' engine: "+name+" (transactional)")
		} else {
			notes = append(notes, "reward tables' engine: "+name+" — it silently ignores transactions: BEGIN and ROLLBACK succeed and change nothing")
		}
	}
	return notes
}

func (t *rewardTarget) Open(ctx context.Context, _, workers int) (runner.App, error) {
	t.opened.Store(true)
	pool, err := t.ledger.Open(ctx, workers)
	if err != nil {
		return nil, err
	}
	a := &rewardApp{t: t, pool: pool}
	if t.provider != nil {
		a.http = payClient(workers)
	}
	return a, nil
}

type rewardApp struct {
	t    *rewardTarget
	pool ledgerPool
	http *http.Client
}

func (a *rewardApp) Session(ctx context.Context, _ int) (runner.Session, error) {
	c, err := a.pool.Conn(ctx)
	if err != nil {
		return nil, err
	}
	return &rewardSession{a: a, c: c}, nil
}

func (a *rewardApp) Close() error {
	if a.http != nil {
		a.http.CloseIdleConnections()
	}
	return a.pool.Close()
}

type rewardSession struct {
	a *rewardApp
	c ledgerConn
}

func (s *rewardSession) Close() error { return s.c.Close() }

var errAlreadyPaid = errors.New("already paid")

func (s *rewardSession) Attempt(ctx context.Context, subj runner.Subject, w *runner.Worker) runner.Outcome {
	t := s.a.t
	o := t.pattern.attempt(ctx, s, subj.Data.(*rewardBurst), w)
	if o.Class == runner.Declined {
		t.declined.Add(1)
	}
	return o
}

// rewardPattern is one variant of reward-payout: how its attempt pays, and
// what it needs from the store and checks besides the effect count.
type rewardPattern struct {
	attempt func(ctx context.Context, s *rewardSession, b *rewardBurst, w *runner.Worker) runner.Outcome
	// unique: the records table has UNIQUE(user_id, reward_id).
	unique bool
	// external: payments go to the simulated payment provider.
	external bool
	// inject: every burst's record insert fails (a NOT NULL violation).
	inject bool
	checks func(ctx context.Context, t *rewardTarget) []runner.Check
}

// rewardPatterns are reward-payout's variants; their keys are what
// --variant accepts.
var rewardPatterns = map[string]rewardPattern{
	CheckThenPay:       {attempt: checkThenPay},
	RecordThenPay:      {attempt: recordThenPay},
	UniqueRecord:       {attempt: uniqueRecord, unique: true, checks: injectedFailure},
	SwallowErrors:      {attempt: swallowErrors, unique: true, inject: true, checks: injectedFailure},
	OneTransaction:     {attempt: oneTransaction, unique: true, checks: failedPayment},
	External:           {attempt: payThroughProvider(false), unique: true, external: true},
	ExternalIdempotent: {attempt: payThroughProvider(true), unique: true, external: true},
}

func recordAmount(b *rewardBurst) *int {
	if b.inject {
		return nil
	}
	amount := rewardAmount
	return &amount
}

// checkThenPay reads whether the user was paid, then pays and records: two
// attempts both read "not yet".
func checkThenPay(ctx context.Context, s *rewardSession, b *rewardBurst, w *runner.Worker) runner.Outcome {
	return checkFirst(ctx, s, b, w, false)
}

// recordThenPay is checkThenPay writing the record before paying: still no
// constraint, so still twice.
func recordThenPay(ctx context.Context, s *rewardSession, b *rewardBurst, w *runner.Worker) runner.Outcome {
	return checkFirst(ctx, s, b, w, true)
}

func checkFirst(ctx context.Context, s *rewardSession, b *rewardBurst, w *runner.Worker, recordFirst bool) runner.Outcome {
	c := s.c
	amount := rewardAmount
	w.Step(ctx, "check")
	has, err := c.HasRecord(ctx, b.user, rewardID)
	if err != nil {
		return classify(err)
	}
	if has {
		return runner.Refused(errAlreadyPaid)
	}
	steps := []func() error{
		func() error { w.Step(ctx, "pay"); return c.Pay(ctx, b.user, rewardID, &amount) },
		func() error {
			w.Step(ctx, "record")
			_, err := c.Record(ctx, b.user, rewardID, recordAmount(b))
			return err
		},
	}
	if recordFirst {
		steps[0], steps[1] = steps[1], steps[0]
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return classify(err)
		}
	}
	return runner.Done()
}

// uniqueRecord lets the unique key decide: only its duplicate-key error
// means "already paid".
func uniqueRecord(ctx context.Context, s *rewardSession, b *rewardBurst, w *runner.Worker) runner.Outcome {
	return recordThenPayOnce(ctx, s, b, w, false)
}

// swallowErrors is uniqueRecord with the bug: every failure of the insert
// reads as "already paid".
func swallowErrors(ctx context.Context, s *rewardSession, b *rewardBurst, w *runner.Worker) runner.Outcome {
	return recordThenPayOnce(ctx, s, b, w, true)
}

func recordThenPayOnce(ctx context.Context, s *rewardSession, b *rewardBurst, w *runner.Worker, swallow bool) runner.Outcome {
	c := s.c
	w.Step(ctx, "record")
	_, err := c.Record(ctx, b.user, rewardID, recordAmount(b))
	switch {
	case err != nil && swallow:
		return runner.Refused(fmt.Errorf("%w (the insert failed: %v)", errAlreadyPaid, err))
	case errors.Is(err, errDuplicate):
		return runner.Refused(errAlreadyPaid)
	case err != nil:
		return classify(err)
	}
	w.Step(ctx, "pay")
	amount := rewardAmount
	if err := c.Pay(ctx, b.user, rewardID, &amount); err != nil {
		return classify(err)
	}
	return runner.Done()
}

// oneTransaction records and pays in one transaction: a failed payment
// rolls the record back, on an engine that honours transactions.
func oneTransaction(ctx context.Context, s *rewardSession, b *rewardBurst, w *runner.Worker) runner.Outcome {
	tx, err := s.c.Begin(ctx)
	if err != nil {
		return classify(err)
	}
	w.Step(ctx, "record")
	if _, err := tx.Record(ctx, b.user, rewardID, recordAmount(b)); err != nil {
		tx.Rollback()
		if errors.Is(err, errDuplicate) {
			return runner.Refused(errAlreadyPaid)
		}
		return classify(err)
	}
	w.Step(ctx, "pay")
	amount := rewardAmount
	payAmount := &amount
	if b.failPayOnce.CompareAndSwap(true, false) {
		payAmount = nil
	}
	if err := tx.Pay(ctx, b.user, rewardID, payAmount); err != nil {
		tx.Rollback()
		return classify(fmt.Errorf("payment failed, rolled back: %w", err))
	}
	if err := tx.Commit(); err != nil {
		return classify(err)
	}
	return runner.Done()
}

// payThroughProvider records, then pays through the provider, whose first answer
// is lost; idempotent sends a key derived from the record, so the retry is
// answered without paying again.
func payThroughProvider(idempotent bool) func(ctx context.Context, s *rewardSession, b *rewardBurst, w *runner.Worker) runner.Outcome {
	return func(ctx context.Context, s *rewardSession, b *rewardBurst, w *runner.Worker) runner.Outcome {
		w.Step(ctx, "record")
		id, err := s.c.Record(ctx, b.user, rewardID, recordAmount(b))
		if errors.Is(err, errDuplicate) {
			return runner.Refused(errAlreadyPaid)
		}
		if err != nil {
			return classify(err)
		}
		key := ""
		if idempotent {
			key = "reward-record-" + strconv.FormatInt(id, 10) + "-" + b.user
		}
		w.Step(ctx, "pay")
		calls, err := payExternal(ctx, s.a.http, s.a.t.provider.URL(), payRequest{User: b.user, Reward: rewardID, Amount: rewardAmount}, key)
		if err != nil {
			return runner.Failed(fmt.Errorf("after %d calls: %w", calls, err))
		}
		return runner.Done()
	}
}

// classify maps a store error to its outcome: a conflict asks for a retry,
// anything else is an error — never "already paid".
func classify(err error) runner.Outcome {
	if errors.Is(err, errConflict) {
		return runner.Retry(err)
	}
	return runner.Failed(err)
}

func (t *rewardTarget) Checks(ctx context.Context) []runner.Check {
	if t.pattern.checks == nil {
		return nil
	}
	return t.pattern.checks(ctx, t)
}

func injectedFailure(ctx context.Context, t *rewardTarget) []runner.Check {
	return []runner.Check{t.injectedFailureCheck(ctx)}
}

func failedPayment(ctx context.Context, t *rewardTarget) []runner.Check {
	return []runner.Check{t.failedPaymentCheck(ctx)}
}

// scripted runs one attempt of the run's variant at a fresh user, outside
// the bursts.
func (t *rewardTarget) scripted(ctx context.Context, b *rewardBurst) (runner.Outcome, error) {
	pool, err := t.ledger.Open(ctx, 1)
	if err != nil {
		return runner.Outcome{}, err
	}
	defer pool.Close()
	c, err := pool.Conn(ctx)
	if err != nil {
		return runner.Outcome{}, err
	}
	defer c.Close()
	s := &rewardSession{a: &rewardApp{t: t, pool: pool}, c: c}
	return t.pattern.attempt(ctx, s, b, &runner.Worker{}), nil
}

// injectedFailureCheck makes the record insert fail with a NOT NULL
// violation: the strict variant must call it an error, the swallow-all
// variant calls it "already paid" although nothing was recorded or paid.
func (t *rewardTarget) injectedFailureCheck(ctx context.Context) runner.Check {
	user := t.p.Prefix() + "chk-inject"
	out, err := t.scripted(ctx, &rewardBurst{user: user, inject: true})
	c := runner.Check{Name: "only the duplicate-key error means \"already paid\""}
	if t.variant == SwallowErrors {
		c.Name, c.Bug = "swallow-all reports an injected failure as \"already paid\"", true
	}
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	records, paid, err := t.counts(ctx, user)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	want := runner.Error
	if t.variant == SwallowErrors {
		want = runner.Declined
	}
	c.OK = out.Class == want && records == 0 && paid == 0
	c.Detail = fmt.Sprintf("record insert failed with an injected NOT NULL violation: the attempt was %s; recorded %d, paid %d",
		outcomeText(out), records, paid)
	return c
}

// failedPaymentCheck makes the first payment inside the transaction fail,
// then lets the user retry: a transactional engine rolls the record back and
// the retry pays; MyISAM keeps the record, and the retry is told "already
// paid" — an under-pay.
func (t *rewardTarget) failedPaymentCheck(ctx context.Context) runner.Check {
	engine, transactional := t.ledger.Engine()
	c := runner.Check{Name: "a failed payment rolls the record back (" + engine + ")"}
	if !transactional {
		c.Name = "the transaction is ignored: a failed payment's record stays (" + engine + ")"
	}
	user := t.p.Prefix() + "chk-tx"
	b := &rewardBurst{user: user}
	b.failPayOnce.Store(true)
	first, err := t.scripted(ctx, b)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	rec1, paid1, err := t.counts(ctx, user)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	retry, err := t.scripted(ctx, b)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	rec2, paid2, err := t.counts(ctx, user)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	if transactional {
		c.OK = first.Class == runner.Error && rec1 == 0 && paid1 == 0 && retry.Class == runner.Executed && rec2 == 1 && paid2 == 1
	} else {
		c.OK = first.Class == runner.Error && rec1 == 1 && paid1 == 0 && retry.Class == runner.Declined && rec2 == 1 && paid2 == 0
	}
	c.Detail = fmt.Sprintf("payment failed inside the transaction: recorded %d, paid %d; the user's retry was %s: recorded %d, paid %d",
		rec1, paid1, outcomeText(retry), rec2, paid2)
	return c
}
