package explore

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/racetest/racetest/runner"
)

// op is one step of a generated attempt: a read or a write of one key.
type op struct {
	write bool
	key   string
}

// programs is a generated case: each attempt's steps over a few keys, and
// a store where a read folds the value into what the attempt saw, a write
// stores what it saw, and an attempt that saw an even sum takes effect.
type programs struct {
	progs [][]op
	mu    sync.Mutex
	vals  map[string]map[string]int // subject → key → value
	done  map[string]int            // subject → attempts that took effect
}

func (p *programs) Prepare(context.Context) error { return nil }
func (p *programs) Open(context.Context, int, int) (runner.App, error) {
	return progApp{p}, nil
}
func (p *programs) Reset(_ context.Context, b int) (runner.Subject, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := fmt.Sprint("s", b)
	p.vals[k], p.done[k] = map[string]int{}, 0
	return runner.Subject{Burst: b, Key: k}, nil
}
func (p *programs) Effects(_ context.Context, s runner.Subject) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done[s.Key] + p.vals[s.Key]["x"]%2, nil
}
func (p *programs) Cleanup(context.Context) error { return nil }

type progApp struct{ p *programs }

func (a progApp) Session(context.Context, int) (runner.Session, error) { return progSess(a), nil }
func (progApp) Close() error                                           { return nil }

type progSess struct{ p *programs }

func (s progSess) Attempt(ctx context.Context, subj runner.Subject, w *runner.Worker) runner.Outcome {
	p := s.p
	seen := 0
	for i, o := range p.progs[w.ID] {
		w.Step(ctx, label(w.ID, i, o))
		p.mu.Lock()
		if o.write {
			p.vals[subj.Key][o.key] = seen + w.ID + 1
		} else {
			seen = seen*3 + p.vals[subj.Key][o.key]
		}
		p.mu.Unlock()
	}
	if seen%2 == 0 {
		p.mu.Lock()
		p.done[subj.Key]++
		p.mu.Unlock()
	}
	return runner.Done()
}
func (progSess) Close() error { return nil }

func label(w, i int, o op) string {
	rw := "r"
	if o.write {
		rw = "w"
	}
	return fmt.Sprintf("%s%d:%s %s", Letter(w), i+1, rw, o.key)
}

// commute is the relation a dialect would give for these steps: two reads,
// or two steps on different keys — judged on each attempt's own step.
func (p *programs) commute(a, b StepRef) bool {
	x, y := p.progs[a.Attempt][a.Index], p.progs[b.Attempt][b.Index]
	return x.key != y.key || !x.write && !y.write
}

func explorePrograms(t *testing.T, progs [][]op, allowed int, indep Independent) *Result {
	t.Helper()
	p := &programs{progs: progs, vals: map[string]map[string]int{}, done: map[string]int{}}
	res, err := Run(context.Background(), p, Options{Attempts: len(progs), Allowed: allowed, Required: 0,
		BlockAfter: time.Second, Independent: indep, MaxSchedules: 100000})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// outcomes are the distinct effect counts an exploration saw.
func outcomes(r *Result) []int {
	var out []int
	for _, o := range r.Orders {
		if !slices.Contains(out, o.Effects) {
			out = append(out, o.Effects)
		}
	}
	slices.Sort(out)
	return out
}

// The reduction is sound: over generated cases of two and three attempts
// running different steps, the pruned exploration gives the verdict, and
// every effect count, of the whole one — and it prunes something.
func TestReductionGivesTheVerdictOfEveryOrder(t *testing.T) {
	rng := rand.New(rand.NewSource(26))
	keys := []string{"x", "y"}
	pruned := 0
	for c := range 150 {
		n := 2 + c%2
		progs := make([][]op, n)
		for w := range progs {
			steps := 1 + rng.Intn(5-n)
			for range steps {
				progs[w] = append(progs[w], op{write: rng.Intn(3) == 0, key: keys[rng.Intn(len(keys))]})
			}
		}
		allowed := 1 + rng.Intn(n)
		p := &programs{progs: progs}
		full := explorePrograms(t, progs, allowed, nil)
		reduced := explorePrograms(t, progs, allowed, p.commute)
		if full.Verdict() != reduced.Verdict() || !slices.Equal(outcomes(full), outcomes(reduced)) {
			t.Fatalf("case %d %v (allowed %d): every order gives %s %v, the reduction %s %v",
				c, progs, allowed, full.Verdict(), outcomes(full), reduced.Verdict(), outcomes(reduced))
		}
		if len(full.Orders) != int(Interleavings(ks(progs)).Int64()) || full.Total != reduced.Total {
			t.Fatalf("case %d: %d orders of %s, want all of them", c, len(full.Orders), full.Total)
		}
		if len(reduced.Orders)+reduced.Pruned != len(full.Orders) {
			t.Fatalf("case %d: %d run + %d pruned, want %d", c, len(reduced.Orders), reduced.Pruned, len(full.Orders))
		}
		// The result says what the reduction spared, and only when it
		// spared something; the rule it used is named, "steps that
		// commute" when the caller gave none.
		if full.Reduction != "" || (reduced.Reduction != "") != (reduced.Pruned > 0) ||
			reduced.Pruned > 0 && !strings.Contains(reduced.Reduction, fmt.Sprintf("reduction: %d of %s orders spared", reduced.Pruned, reduced.Total)) ||
			reduced.Pruned > 0 && !strings.Contains(reduced.Reduction, "commute (steps that commute)") {
			t.Fatalf("case %d: %d pruned, reduction %q (without one: %q)", c, reduced.Pruned, reduced.Reduction, full.Reduction)
		}
		// Each class of equivalent orders is run as its normal form, where
		// of two neighbouring steps that commute the earlier attempt's
		// comes first (A1 B1, not B1 A1): the orders a reader sees. The
		// first orders, serial, are run whatever their form.
		for _, o := range reduced.Orders {
			if o.Index < n {
				continue
			}
			idx, seen := make([]int, len(o.planned)), make([]int, n)
			for q, w := range o.planned {
				idx[q], seen[w] = seen[w], seen[w]+1
			}
			for q := 0; q+1 < len(o.planned); q++ {
				a, b := o.planned[q], o.planned[q+1]
				if a > b && p.commute(StepRef{Attempt: a, Index: idx[q]}, StepRef{Attempt: b, Index: idx[q+1]}) {
					t.Fatalf("case %d: order %s runs %s%d before %s%d, which commute: not its class's normal form",
						c, o.Planned, Letter(a), idx[q]+1, Letter(b), idx[q+1]+1)
				}
			}
		}
		// The notes a reader sees carry that line, and no empty one.
		for _, r := range []*Result{full, reduced} {
			if slices.Contains(r.Notes, "") || (r.Reduction != "") != slices.Contains(r.Notes, r.Reduction) {
				t.Fatalf("case %d: notes %q, reduction %q", c, r.Notes, r.Reduction)
			}
		}
		pruned += reduced.Pruned
	}
	if pruned == 0 {
		t.Error("the reduction never pruned an order")
	}
}

func ks(progs [][]op) []int {
	out := make([]int, len(progs))
	for i, p := range progs {
		out[i] = len(p)
	}
	return out
}

// The false SAFE: attempt A reads twice, attempt B writes and
// puts the value back (an UPDATE rolled back). A's reads commute with each
// other, not with B's writes: the orders where A reads between B's two
// writes must run, and they see the dirty value.
func TestAReaderAndAWriterAreNotTwoReaders(t *testing.T) {
	progs := [][]op{{{false, "x"}, {false, "x"}}, {{true, "x"}, {true, "x"}}}
	p := &programs{progs: progs}
	res := explorePrograms(t, progs, 1, p.commute)
	full := explorePrograms(t, progs, 1, nil)
	if res.Verdict() != full.Verdict() || len(res.AttemptSteps) != 2 || res.AttemptSteps[1][0] != "B1:w x" {
		t.Fatalf("reduced %s (%d orders, steps %v), every order %s", res.Verdict(), len(res.Orders), res.AttemptSteps, full.Verdict())
	}
}

// Attempts of 2 and 5 steps have C(7,2) = 21 orders, not C(10,5) = 252:
// each attempt is planned with its own steps.
func TestOrdersAreCountedOverEachAttemptsOwnSteps(t *testing.T) {
	progs := [][]op{{{false, "x"}, {true, "x"}}, {{false, "y"}, {false, "x"}, {true, "y"}, {false, "y"}, {true, "x"}}}
	res := explorePrograms(t, progs, 2, nil)
	if res.Total != "21" || len(res.Orders) != 21 {
		t.Fatalf("%s orders, %d ran: want C(7,2) = 21", res.Total, len(res.Orders))
	}
	if got := fmt.Sprint(len(res.AttemptSteps[0]), len(res.AttemptSteps[1])); got != "2 5" {
		t.Errorf("steps per attempt %s, want 2 5", got)
	}
	seen := map[string]bool{}
	for _, o := range res.Orders {
		if seen[o.Planned] {
			t.Errorf("order %s ran twice", o.Planned)
		}
		seen[o.Planned] = true
	}
}

// An attempt that never runs its whole path in the first orders (the
// other always takes a lock before its first step, and it then finds the
// work done) is planned with the path of the attempt whose steps it
// begins: the same code, stopped early.
func TestAnAttemptThatStopsEarlyIsPlannedWithTheLongerPath(t *testing.T) {
	st := newStore(func(ctx context.Context, st *store, s runner.Subject, w *runner.Worker) runner.Outcome {
		if w.ID == 0 {
			time.Sleep(20 * time.Millisecond) // B always takes the lock first
		}
		l := st.lock(s.Key)
		select {
		case l <- struct{}{}:
		case <-ctx.Done():
			return runner.Failed(context.Cause(ctx))
		}
		defer func() { <-l }()
		w.Step(ctx, "check")
		if st.count(s.Key) > 0 {
			return runner.Refused(errors.New("already"))
		}
		w.Step(ctx, "act")
		st.add(s.Key)
		return runner.Done()
	})
	res, err := Run(context.Background(), st, Options{Attempts: 2, BlockAfter: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Total != "6" || fmt.Sprint(res.AttemptSteps) != "[[check act] [check act]]" {
		t.Fatalf("%s orders of steps %v: want both attempts planned with check, act (6 orders)", res.Total, res.AttemptSteps)
	}
}

// txOp is one step of a generated transactional attempt: a read or a
// write of one row ("t1": table t, row 1) or of a whole table ("t"), or
// the end of its transaction (COMMIT).
type txOp struct {
	write, end bool
	key        string
}

// txPrograms is a generated case of transactions: a write is the
// attempt's own until its transaction ends, when it becomes everyone's
// (what is not ended is rolled back); a read sees what is everyone's and
// the attempt's own writes. An attempt that saw an even sum takes effect.
type txPrograms struct {
	progs [][]txOp
	mu    sync.Mutex
	vals  map[string]map[string]int
	done  map[string]int
}

var txRows = map[string][]string{"t": {"t1", "t2"}, "u": {"u1"}, "t1": {"t1"}, "t2": {"t2"}, "u1": {"u1"}}

func (p *txPrograms) Prepare(context.Context) error { return nil }
func (p *txPrograms) Open(context.Context, int, int) (runner.App, error) {
	return txApp{p}, nil
}
func (p *txPrograms) Reset(_ context.Context, b int) (runner.Subject, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := fmt.Sprint("s", b)
	p.vals[k], p.done[k] = map[string]int{}, 0
	return runner.Subject{Burst: b, Key: k}, nil
}
func (p *txPrograms) Effects(_ context.Context, s runner.Subject) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done[s.Key] + p.vals[s.Key]["t1"]%2 + 2*(p.vals[s.Key]["u1"]%2), nil
}
func (p *txPrograms) Cleanup(context.Context) error { return nil }

type txApp struct{ p *txPrograms }

func (a txApp) Session(context.Context, int) (runner.Session, error) { return txSess(a), nil }
func (txApp) Close() error                                           { return nil }

type txSess struct{ p *txPrograms }

func (s txSess) Attempt(ctx context.Context, subj runner.Subject, w *runner.Worker) runner.Outcome {
	p := s.p
	seen, own := 0, map[string]int{}
	for i, o := range p.progs[w.ID] {
		w.Step(ctx, fmt.Sprintf("%s%d", Letter(w.ID), i+1))
		p.mu.Lock()
		switch {
		case o.end:
			for k, v := range own {
				p.vals[subj.Key][k] = v
			}
			own = map[string]int{}
		case o.write:
			for _, r := range txRows[o.key] {
				own[r] = seen + w.ID + 1
			}
		default:
			for _, r := range txRows[o.key] {
				v, mine := own[r]
				if !mine {
					v = p.vals[subj.Key][r]
				}
				seen = seen*3 + v
			}
		}
		p.mu.Unlock()
	}
	if seen%2 == 0 {
		p.mu.Lock()
		p.done[subj.Key]++
		p.mu.Unlock()
	}
	return runner.Done()
}
func (txSess) Close() error { return nil }

// footprint is what a dialect would say of each step: its table and row,
// read or written, and the end of a transaction.
func (p *txPrograms) footprint(attempt int, name string) Footprint {
	var i int
	fmt.Sscanf(name[1:], "%d", &i)
	o := p.progs[attempt][i-1]
	if o.end {
		return Footprint{Ends: true}
	}
	// A read holds nothing here (no lock; an end publishes only writes).
	return Footprint{Accesses: []Access{{Table: o.key[:1], Key: o.key[1:], Write: o.write}}, Fleeting: !o.write}
}

func exploreTx(t *testing.T, progs [][]txOp, allowed int, indep Independent) *Result {
	t.Helper()
	p := &txPrograms{progs: progs, vals: map[string]map[string]int{}, done: map[string]int{}}
	res, err := Run(context.Background(), p, Options{Attempts: len(progs), Allowed: allowed, Required: 0, AllowanceSet: true,
		BlockAfter: time.Second, Independent: indep, MaxSchedules: 100000})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// The reduction by what steps touch is sound: over generated
// transactions of two and three attempts, on rows and whole tables of
// two tables, the reduced exploration gives the verdict and every effect
// count of the whole one. A transaction's end publishes its writes, so it
// is judged with everything the transaction touched: judged alone, as
// touching nothing, it would commute with the reads that see its writes,
// and orders that show them would be skipped.
func TestReductionByAccessGivesTheVerdictOfEveryOrder(t *testing.T) {
	rng := rand.New(rand.NewSource(2026))
	keys := []string{"t1", "t2", "t", "u1"}
	pruned := 0
	for c := range 200 {
		n := 2 + c%2
		progs := make([][]txOp, n)
		for w := range progs {
			for range 1 + rng.Intn(6-n) {
				progs[w] = append(progs[w], txOp{write: rng.Intn(2) == 0, end: rng.Intn(4) == 0, key: keys[rng.Intn(len(keys))]})
			}
		}
		p := &txPrograms{progs: progs}
		for _, allowed := range []int{0, 1, 2} {
			full := exploreTx(t, progs, allowed, nil)
			reduced := exploreTx(t, progs, allowed, ByAccess(p.footprint))
			if full.Verdict() != reduced.Verdict() || !slices.Equal(outcomes(full), outcomes(reduced)) {
				t.Fatalf("case %d %v (allowed %d): every order gives %s %v, the reduction %s %v",
					c, progs, allowed, full.Verdict(), outcomes(full), reduced.Verdict(), outcomes(reduced))
			}
			if len(reduced.Orders)+reduced.Pruned != len(full.Orders) {
				t.Fatalf("case %d: %d run + %d pruned, want %d", c, len(reduced.Orders), reduced.Pruned, len(full.Orders))
			}
			pruned += reduced.Pruned
		}
	}
	if pruned == 0 {
		t.Error("the reduction never pruned an order")
	}
	t.Logf("pruned %d orders over the generated cases", pruned)
}
