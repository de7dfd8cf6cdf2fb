// Package explore runs a scenario's attempts step by step, in every order,
// on the real store: two or three attempts, each on its own connection,
// held at every step boundary (runner.Worker.Step) while a controller lets
// exactly one step proceed at a time. Where bursts find races by timing
// luck, an exploration proves which orders break — or that none does, at
// the granularity of the steps the attempts mark.
//
//	res, err := explore.Run(ctx, target, explore.Options{Attempts: 2})
//	if res.Verdict() == explore.Race { … res.Violating() … }
//
// It imports only runner: a target is built elsewhere (scenarios, script,
// the race package) and counted in its own store, as always.
package explore

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/racetest/racetest/runner"
)

// Defaults the command line reuses.
const (
	DefaultAttempts     = 2
	DefaultBlockAfter   = 50 * time.Millisecond
	DefaultMaxSchedules = 10000
	MaxAttempts         = 3
)

// Options shape an exploration.
type Options struct {
	Attempts int // 2 or 3 attempts, each on its own session
	Replicas int // attempt i runs on replica i mod Replicas (default 1)
	// Allowed and Required bound the correct effects per order. Both left
	// at 0, they mean the default, exactly once (1, 1) — unless
	// AllowanceSet says they were given: --allowed 0 (no effect is
	// correct) is 0 and 0, and must not become 1.
	Allowed, Required int
	AllowanceSet      bool
	// BlockAfter: where the server cannot say whether a step waits on a
	// lock (its sessions are no LockWaiter, or asking failed), a step that
	// has not reached the next boundary by then is blocked, and the next
	// step in the order goes.
	BlockAfter time.Duration
	// Timeout bounds each attempt, so no order holds a transaction longer:
	// an attempt past it is abandoned (its code rolls back) and reported.
	Timeout time.Duration
	// MaxSchedules caps the orders run. Past it, Run refuses (a
	// *TooManyError) unless Cap is set, which runs the first MaxSchedules
	// and leaves the rest unexplored (verdict INCONCLUSIVE).
	MaxSchedules int
	Cap          bool
	// Schedule, when set, runs exactly this one order (a replay).
	Schedule []int
	// Independent, when set, says whether two steps of different attempts
	// commute, each judged as its own attempt takes it: of the orders that
	// differ only by swapping such steps, one runs (see enumerate).
	Independent Independent
	// Commute says in a few words which steps Independent lets commute,
	// for the note that says how many orders the reduction spared.
	Commute string
	// Deadlock tells a deadlock from the other conflicts by the error's
	// class (sqldb.IsDeadlock); without it, no conflict is counted as one.
	Deadlock func(error) bool
	// Counted is called once the orders are counted, before they run (the
	// command says the count here); an error stops the run.
	Counted func(*Result) error
	// Progress is called after each order.
	Progress func(done, total int)
	// Pace, when set, is called before each step is let go (a trainer's
	// "press Enter"), from the controller.
	Pace func(Event)
	// Keep leaves what Prepare made (Cleanup is not called).
	Keep bool
}

// Verdict is an exploration's answer.
type Verdict string

const (
	// Race: some order left more effects than allowed.
	Race Verdict = "RACE"
	// Lost: no order over the allowance, but some left fewer than required.
	Lost Verdict = "LOST"
	// Safe: every order stayed within the allowance.
	Safe Verdict = "SAFE"
	// Inconclusive: no order broke, but some were not explored or abandoned.
	Inconclusive Verdict = "INCONCLUSIVE"
)

// SafeScope is what a SAFE verdict's Why begins with: the claim's scope.
// Printed after the verdict, as every verdict's Why is, it reads as
// SafeClaim.
const SafeScope = "for every order at this step granularity"

// SafeClaim is exactly what a SAFE verdict claims.
const SafeClaim = "SAFE " + SafeScope

// Event is one step of an order as it ran.
type Event struct {
	Worker int    `json:"attempt"` // 0 = A
	Step   int    `json:"step"`    // the attempt's step number, from 1
	Name   string `json:"name"`    // the mark: "check", "redeem.sql:2"
	// Blocked: the server said it waited on a lock (or, where it cannot
	// say, it had not reached the next boundary within --block-after); the
	// next step went ahead while it waited.
	Blocked bool `json:"blocked,omitempty"`
	// Extra: a step beyond the order's plan (the attempt took more steps
	// than it took alone), run in attempt order.
	Extra bool `json:"extra,omitempty"`
}

// Label is the event as a schedule names it: "A2".
func (e Event) Label() string { return fmt.Sprintf("%s%d", Letter(e.Worker), e.Step) }

// Attempt is what became of one attempt in one order.
type Attempt struct {
	Outcome runner.Class `json:"-"`
	Class   string       `json:"outcome"`
	Err     string       `json:"error,omitempty"`
	// Deadlock: the server ended it as a deadlock's victim.
	Deadlock bool `json:"deadlock,omitempty"`
}

// Order is one explored interleaving.
type Order struct {
	Index    int       `json:"index"`
	Planned  string    `json:"planned"`  // "A1 B1 A2 B2"
	Schedule string    `json:"schedule"` // as it ran: blocked steps let the next go first
	Ran      []Event   `json:"steps"`
	Effects  int       `json:"effects"`
	Allowed  int       `json:"allowed"`
	Attempts []Attempt `json:"attempts"`
	// Blocked counts steps that waited on a lock; Deadlocked the attempts
	// the server ended with a deadlock; Conflicts the other serialization
	// failures; Abandoned the attempts past --timeout (rolled back).
	Blocked    int `json:"blocked"`
	Deadlocked int `json:"deadlocked"`
	Conflicts  int `json:"conflicts"`
	Abandoned  int `json:"abandoned"`
	Required   int `json:"required"`
	// Broken counts, per invariant of the exploration (Result.Invariants),
	// the violations the order added; nil without invariants.
	Broken  []int `json:"broken,omitempty"`
	planned []int
}

// BrokeInvariant reports an order that broke an invariant: a violation,
// whatever its effects.
func (o Order) BrokeInvariant() bool {
	for _, n := range o.Broken {
		if n > 0 {
			return true
		}
	}
	return false
}

// violates reports an order that broke: over the allowance, under the
// floor, or an invariant broken.
func (o Order) violates() bool { return o.Over() || o.Under() || o.BrokeInvariant() }

// Over reports an order with more effects than allowed.
func (o Order) Over() bool { return o.Effects > o.Allowed }

// Under reports an order with fewer effects than required while an
// attempt claimed the work done (executed, or declined as "already
// done"), as a burst's LOST does: attempts that all failed or timed out
// lost nothing, they decided nothing.
func (o Order) Under() bool { return o.Effects < o.Required && o.claimed() }

// claimed reports whether an attempt of the order executed or declined.
func (o Order) claimed() bool {
	for _, a := range o.Attempts {
		if a.Outcome == runner.Executed || a.Outcome == runner.Declined {
			return true
		}
	}
	return false
}

// Untested reports an order in which nothing took effect and no attempt
// decided anything (every one failed, timed out or conflicted): it put
// the guard to no test, and a SAFE cannot rest on it.
func (o Order) Untested() bool { return o.Effects == 0 && !o.claimed() }

// Result is an exploration.
type Result struct {
	Attempts int `json:"attempts"`
	// Steps are the marks of the attempt with the most steps (the first
	// such attempt: A before B), in order; AttemptSteps each attempt's
	// own, with which its steps are planned: its path alone, unless it
	// took more steps after another.
	Steps        []string   `json:"steps"`
	AttemptSteps [][]string `json:"attempt_steps"`
	// Total is the number of interleavings of those steps; Pruned were
	// skipped as equivalent to a run one; Unexplored were past the cap.
	Total      string        `json:"total"`
	Pruned     int           `json:"pruned"`
	Planned    int           `json:"planned"`
	Unexplored string        `json:"unexplored,omitempty"`
	Orders     []Order       `json:"orders"`
	Allowed    int           `json:"allowed"`
	Required   int           `json:"required"`
	BlockAfter time.Duration `json:"-"`
	Timeout    time.Duration `json:"-"`
	Server     string        `json:"server,omitempty"`
	Notes      []string      `json:"notes,omitempty"`
	Elapsed    time.Duration `json:"-"`
	// Interrupted: Ctrl-C stopped it between orders.
	Interrupted bool `json:"interrupted,omitempty"`
	// Blocking says how a blocked step was told: "server" (its lock
	// tables) or "timer" (--block-after, where the server cannot say).
	Blocking string `json:"blocking,omitempty"`
	// Invariants names what had to hold after every order (the target's
	// runner.Invarianter); Uncounted: no effects check, the invariants
	// and the outcomes alone judge it (runner.Uncounted).
	Invariants []string `json:"invariants,omitempty"`
	Uncounted  bool     `json:"uncounted,omitempty"`
	// Diverged counts orders in which an attempt took other steps than
	// those the reduction judged (its path depends on the others): with
	// orders pruned, a SAFE cannot rest on them.
	Diverged int `json:"diverged,omitempty"`
	// Unplanned counts orders in which an attempt took more steps than its
	// plan (a branch it takes only after another attempt's steps): where
	// those steps fall among the others' was not explored, so no SAFE
	// rests on them. UnplannedStep names the first such step.
	Unplanned     int    `json:"unplanned,omitempty"`
	UnplannedStep string `json:"unplanned_step,omitempty"`
	// Replanned counts the times the attempts were planned again, each
	// with the longest path it took, after one took more steps than its
	// plan (Unplanned): the orders are those of the last plan.
	Replanned int `json:"replanned,omitempty"`
	// Reduction says how many orders the reduction spared, and why that
	// is sound.
	Reduction  string `json:"reduction,omitempty"`
	CleanupErr error  `json:"-"`
	unexplored *big.Int
	note       string
	replan     string
}

// Verdict is the exploration's answer.
func (r *Result) Verdict() Verdict {
	var lost, untested bool
	for _, o := range r.Orders {
		if o.Over() || o.BrokeInvariant() {
			return Race
		}
		lost = lost || o.Under()
		untested = untested || o.Untested()
	}
	// Ifs, not a switch: gremlins v0.6.0 never mutates a switch's case
	// expressions, and these decide the verdict.
	if lost {
		return Lost
	}
	if untested || r.Interrupted || r.unexplored != nil && r.unexplored.Sign() > 0 || r.Count().Abandoned > 0 || len(r.Orders) == 0 || r.unsound() {
		return Inconclusive
	}
	// An attempt that took steps past its plan while others could go
	// (Unplanned): where those steps fall was never tried.
	if r.Unplanned > 0 && len(r.Orders) > 0 {
		return Inconclusive
	}
	return Safe
}

// Why says in one line what the verdict rests on.
func (r *Result) Why() string {
	c := r.Count()
	switch r.Verdict() {
	case Race:
		var why []string
		if c.Over > 0 {
			why = append(why, fmt.Sprintf("%d of %d orders left more than %d effect(s)", c.Over, c.Explored, r.Allowed))
		}
		for i, name := range r.Invariants {
			n := 0
			for _, o := range r.Orders {
				if i < len(o.Broken) && o.Broken[i] > 0 {
					n++
				}
			}
			if n > 0 {
				why = append(why, fmt.Sprintf("%d of %d orders broke the invariant %s", n, c.Explored, name))
			}
		}
		return strings.Join(why, "; ")
	case Lost:
		return fmt.Sprintf("%d of %d orders left fewer than %d effect(s)", c.Under, c.Explored, r.Required)
	case Safe:
		held := fmt.Sprintf("stayed within %d effect(s)", r.Allowed)
		if len(r.Invariants) > 0 {
			held = fmt.Sprintf("kept %s", plural(len(r.Invariants), "invariant"))
			if !r.Uncounted {
				held = fmt.Sprintf("stayed within %d effect(s) and kept %s", r.Allowed, plural(len(r.Invariants), "invariant"))
			}
		}
		return fmt.Sprintf("%s: all %d orders of %s %s", SafeScope, c.Explored, r.Shape(), held)
	}
	var why []string
	if r.unexplored != nil && r.unexplored.Sign() > 0 {
		why = append(why, fmt.Sprintf("%s of %s orders were not explored (--max-schedules %d)", r.Unexplored, r.Total, r.Planned))
	}
	if c.Abandoned > 0 {
		why = append(why, fmt.Sprintf("%d orders had an attempt abandoned at --timeout %s (rolled back)", c.Abandoned, r.Timeout))
	}
	untested := 0
	for _, o := range r.Orders {
		if o.Untested() {
			untested++
		}
	}
	if untested > 0 {
		why = append(why, fmt.Sprintf("in %d of %d orders nothing took effect and no attempt decided anything (every one failed, timed out or conflicted)", untested, len(r.Orders)))
	}
	if r.Interrupted {
		why = append(why, fmt.Sprintf("interrupted after %d of %d orders", c.Explored, r.Planned))
	}
	if len(r.Orders) == 0 {
		why = append(why, "no order ran")
	}
	if r.unsound() {
		why = append(why, fmt.Sprintf("in %d orders an attempt took other steps than it took alone, so the %d orders pruned as equivalent may not be", r.Diverged, r.Pruned))
	}
	if r.Unplanned > 0 {
		why = append(why, fmt.Sprintf("in %d orders an attempt took steps its plan does not have (first: %s), and where they fall among the other attempts' steps was never tried",
			r.Unplanned, r.UnplannedStep))
	}
	return "no order broke, but " + strings.Join(why, "; ")
}

// unsound: some order left the steps the reduction judged, and orders
// were pruned on that judgement.
func (r *Result) unsound() bool { return r.Diverged > 0 && r.Pruned > 0 }

// Alike reports whether every attempt takes the same steps (or the steps
// are not known yet).
func (r *Result) Alike() bool {
	for _, s := range r.AttemptSteps {
		if !slices.Equal(s, r.AttemptSteps[0]) {
			return false
		}
	}
	return true
}

// Shape says the attempts and their steps: "2 attempts × 2 steps (check,
// act)", or each attempt's own when they differ: "A: 2 steps (…), B: 5
// steps (…)".
func (r *Result) Shape() string {
	if r.Alike() {
		return fmt.Sprintf("%d attempts × %d steps (%s)", r.Attempts, len(r.Steps), strings.Join(r.Steps, ", "))
	}
	parts := make([]string, len(r.AttemptSteps))
	for w, s := range r.AttemptSteps {
		parts[w] = fmt.Sprintf("%s: %d steps (%s)", Letter(w), len(s), strings.Join(s, ", "))
	}
	return strings.Join(parts, "; ")
}

// Counts are the totals over the explored orders.
type Counts struct {
	Explored   int `json:"explored"`
	Violating  int `json:"violating"`
	Over       int `json:"over"`
	Under      int `json:"under"`
	Broken     int `json:"broken"`     // orders that broke an invariant
	Blocked    int `json:"blocked"`    // orders with a blocked step
	Deadlocked int `json:"deadlocked"` // orders with a deadlock
	Conflicts  int `json:"conflicts"`  // orders with another serialization failure
	Abandoned  int `json:"abandoned"`  // orders with an attempt past --timeout
}

// Count totals the explored orders.
func (r *Result) Count() Counts {
	c := Counts{Explored: len(r.Orders)}
	for _, o := range r.Orders {
		if o.violates() {
			c.Violating++
		}
		c.Broken += b2i(o.BrokeInvariant())
		if o.Over() {
			c.Over++
		}
		if o.Under() {
			c.Under++
		}
		c.Blocked += b2i(o.Blocked > 0)
		c.Deadlocked += b2i(o.Deadlocked > 0)
		c.Conflicts += b2i(o.Conflicts > 0)
		c.Abandoned += b2i(o.Abandoned > 0)
	}
	return c
}

// plural writes n and its noun: "1 invariant", "2 invariants".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Violating lists the violating orders, one per distinct schedule as it
// ran (orders that ran alike are one schedule), the minimal first: the
// fewest switches from one attempt to another (CHESS's preemptions), then
// the fewest steps, then in the order they ran.
func (r *Result) Violating() []Order {
	var out []Order
	seen := map[string]bool{}
	for _, o := range r.Orders {
		if o.violates() && !seen[o.Schedule] {
			seen[o.Schedule] = true
			out = append(out, o)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		si, sj := out[i].Switches(), out[j].Switches()
		if si != sj {
			return si < sj
		}
		return len(out[i].Ran) < len(out[j].Ran)
	})
	return out
}

// Switches counts the times the order passes from one attempt to another.
func (o Order) Switches() int {
	n := 0
	for i := 1; i < len(o.Ran); i++ {
		if o.Ran[i].Worker != o.Ran[i-1].Worker {
			n++
		}
	}
	return n
}

// NoStepsError is a target whose attempts mark no steps: there is nothing
// to interleave.
type NoStepsError struct{}

func (NoStepsError) Error() string {
	return "its attempts mark no steps (runner.Worker.Step): there is nothing to interleave"
}

// TooManyError is an exploration with more orders than --max-schedules.
type TooManyError struct {
	Orders *big.Int // to run, after pruning
	Total  *big.Int // every interleaving
	Max    int
	Steps  []string
	N      int
	Shape  string // the attempts and their steps, as Result.Shape says them
}

func (e *TooManyError) Error() string {
	count := e.Orders.String() + " orders"
	if e.Total != nil && e.Total.Cmp(e.Orders) != 0 {
		count = fmt.Sprintf("%s orders (%s once those equivalent to another by swapping steps that commute are left out)", e.Total, e.Orders)
	}
	shape := e.Shape
	if shape == "" {
		shape = fmt.Sprintf("%d attempts × %d steps (%s)", e.N, len(e.Steps), strings.Join(e.Steps, ", "))
	}
	return fmt.Sprintf("%s have %s, more than --max-schedules %d: "+
		"raise --max-schedules, use fewer attempts, or add --cap to explore the first %d (verdict INCONCLUSIVE)",
		shape, count, e.Max, e.Max)
}

// StepError is a replay's schedule naming a step its attempt did not take
// in the order named.
type StepError struct {
	Step  string // "A4": the first step named that did not run
	Steps int    // the attempt's steps in that order
}

func (e *StepError) Error() string {
	l := e.Step[:1]
	return fmt.Sprintf("--schedule names %s, but attempt %s takes %d steps (%s1..%s%d), alone and in this order: name only steps it takes (explore prints each order as it ran)",
		e.Step, l, e.Steps, l, l, e.Steps)
}

// hangGrace is how long past the attempt timeout an order waits for
// attempts that ignore their context.
var hangGrace = 5 * time.Second

// Run explores t. The first orders run the attempts one after the other,
// each attempt first once (A's steps, then B's; B's, then A's; …): they
// learn each attempt's steps when it runs alone, and so the count of
// orders, which Counted hears before the others run. On error the Result
// holds the orders that ran.
func Run(ctx context.Context, t runner.Target, o Options) (res *Result, err error) {
	o = o.withDefaults()
	start := time.Now()
	res = &Result{Attempts: o.Attempts, Allowed: o.Allowed, Required: min(o.Required, o.Allowed),
		BlockAfter: o.BlockAfter, Timeout: o.Timeout}
	defer func() { res.Elapsed = time.Since(start) }()
	if err := t.Prepare(ctx); err != nil {
		return res, fmt.Errorf("prepare: %w", err)
	}
	describe(t, res)
	if !o.Keep {
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			res.CleanupErr = t.Cleanup(cctx)
		}()
	}
	f := &fleet{t: t, o: o}
	if u, ok := t.(runner.Uncounted); ok && u.Uncounted() {
		f.uncounted, res.Uncounted = true, true
	}
	if inv, ok := t.(runner.Invarianter); ok && len(inv.Invariants()) > 0 {
		f.inv, res.Invariants = inv, inv.Invariants()
	}
	defer f.close()
	if err := f.open(ctx); err != nil {
		return res, err
	}
	res.Blocking, res.note = "timer", fmt.Sprintf("blocked steps: this server shows no lock waits, so a step not back within --block-after %s counts as blocked", o.BlockAfter)
	if f.waiters != nil {
		res.Blocking, res.note = "server", "blocked steps: only those the server's lock tables show waiting (--block-after applies only when they cannot be read)"
	}
	// The first orders: each attempt first once, alone on a fresh subject.
	var firsts []Order
	for lead := range o.Attempts {
		ord, err := f.order(ctx, len(firsts), nil, lead, nil)
		if err != nil {
			return res, err
		}
		firsts = append(firsts, ord)
	}
	// Each attempt's steps: those of its run with the most (alone, unless
	// the others change its path). On a tie the path alone stands: after
	// another attempt it may take as many steps by another path (it found
	// the work done), and Diverged counts the orders whose paths differ
	// from the plan's.
	paths := make([][][]string, len(firsts))
	for lead, ord := range firsts {
		paths[lead] = make([][]string, o.Attempts)
		for _, ev := range ord.Ran {
			paths[lead][ev.Worker] = append(paths[lead][ev.Worker], ev.Name)
		}
	}
	steps := make([][]string, o.Attempts)
	for w := range steps {
		steps[w] = paths[w][w]
		for lead := range paths {
			if len(paths[lead][w]) > len(steps[w]) {
				steps[w] = paths[lead][w]
			}
		}
	}
	// An attempt whose steps begin another's runs the same code and
	// stopped early (it found the work done, or lost a lock taken before
	// its first step): it is planned with the longer path.
	for w := range steps {
		for v := range steps {
			if len(steps[v]) > len(steps[w]) && slices.Equal(steps[w], steps[v][:len(steps[w])]) {
				steps[w] = steps[v]
			}
		}
	}
	ks := make([]int, o.Attempts)
	for w, s := range steps {
		ks[w] = len(s)
		if len(s) > len(res.Steps) {
			res.Steps = s
		}
	}
	res.AttemptSteps = steps
	if len(res.Steps) == 0 {
		return res, NoStepsError{}
	}
	// The plan of each first order is its lead's steps, then the others'.
	ran := map[string]bool{}
	for lead := range firsts {
		firsts[lead].planned = serial(ks, lead)
		firsts[lead].Planned = Format(firsts[lead].planned)
	}
	res.Total = Interleavings(ks).String()
	if o.Schedule != nil {
		// A replay: the order named. A step past an attempt's plan may be
		// a branch it takes only after another's steps (explore found it
		// there): it runs, and a step past the plan that the attempt did
		// not take in this order is refused once the order has run.
		ord, err := f.order(ctx, len(firsts), o.Schedule, 0, o.Pace)
		if err != nil {
			return res, err
		}
		named, took := make([]int, o.Attempts), make([]int, o.Attempts)
		for _, w := range o.Schedule {
			named[w]++
		}
		for _, ev := range ord.Ran {
			took[ev.Worker] = max(took[ev.Worker], ev.Step)
		}
		for w := range named {
			// A step of the plan the attempt did not reach is void (it
			// returned early: it found the work done); past the plan, a
			// step it did not take is no step at all.
			if most := max(ks[w], took[w]); named[w] > most {
				return res, &StepError{Step: fmt.Sprintf("%s%d", Letter(w), most+1), Steps: most}
			}
		}
		res.Orders = append(res.Orders, ord)
		res.Total, res.Planned = "1", 1
		describe(t, res)
		return res, nil
	}
	for _, ord := range firsts {
		if !ran[ord.Planned] {
			ran[ord.Planned] = true
			res.Orders = append(res.Orders, ord)
		}
	}
	res.check(steps)
	res, err = planAndRun(ctx, f, o, res, steps, ran)
	// An attempt that took more steps than its plan where the others
	// could have gone in between (a branch it takes only after their
	// steps) is planned again with the longest path each attempt took,
	// and every order of those runs, until no attempt leaves its plan. A
	// violation found stands as it is.
	for round := 1; err == nil && res.Unplanned > 0 && round < MaxRounds; round++ {
		if v := res.Verdict(); v == Race || v == Lost {
			break
		}
		longer := longestPaths(res.Orders, steps)
		if longer == nil {
			break
		}
		prev := *res
		why := res.UnplannedStep
		res.Orders, res.Pruned, res.Reduction, res.unexplored, res.Unexplored, res.Replanned = nil, 0, "", nil, "", round
		res.setSteps(longer)
		res.replan = fmt.Sprintf("planned again (round %d): %s, so each attempt is planned with the longest path it took (%s) and every order of those ran",
			round+1, why, res.Shape())
		var again *Result
		again, err = planAndRun(ctx, f, o, res, longer, map[string]bool{})
		var tm *TooManyError
		if errors.As(err, &tm) {
			// Too many to explore again: the orders that ran stand, and
			// their unplanned steps keep the verdict INCONCLUSIVE.
			*res, err = prev, nil
			res.replan = fmt.Sprintf("not planned again: %s, and with the longest path each attempt took %s", why, tm.Error())
			describe(t, res)
			break
		}
		res, steps = again, longer
	}
	return res, err
}

// MaxRounds bounds how many times an exploration plans its attempts
// again after one took more steps than planned.
const MaxRounds = 4

// setSteps records each attempt's planned steps, and the longest of them.
func (r *Result) setSteps(steps [][]string) {
	r.AttemptSteps, r.Steps = steps, nil
	for _, s := range steps {
		if len(s) > len(r.Steps) {
			r.Steps = s
		}
	}
}

// longestPaths is each attempt's longest path in orders, where one is
// longer than its plan in steps; nil when none is.
func longestPaths(orders []Order, steps [][]string) [][]string {
	out := make([][]string, len(steps))
	copy(out, steps)
	longer := false
	for _, o := range orders {
		paths := make([][]string, len(steps))
		for _, ev := range o.Ran {
			paths[ev.Worker] = append(paths[ev.Worker], ev.Name)
		}
		for w, p := range paths {
			if len(p) > len(out[w]) {
				out[w], longer = p, true
			}
		}
	}
	if !longer {
		return nil
	}
	return out
}

// planAndRun counts every order of the attempts' planned steps (but those
// in ran, which ran already), then runs them.
func planAndRun(ctx context.Context, f *fleet, o Options, res *Result, steps [][]string, ran map[string]bool) (*Result, error) {
	ks := make([]int, len(steps))
	for w, s := range steps {
		ks[w] = len(s)
	}
	total := Interleavings(ks)
	res.Total = total.String()
	room := o.MaxSchedules - len(res.Orders)
	// Count, then run, every other order.
	var seqs [][]int
	limit := big.NewInt(int64(o.MaxSchedules))
	tooMany := func(orders *big.Int) error {
		return &TooManyError{Orders: orders, Total: total, Max: o.MaxSchedules, Steps: res.Steps, N: o.Attempts, Shape: res.Shape()}
	}
	if total.Cmp(big.NewInt(1<<22)) > 0 {
		// Too many even to enumerate: pruning is not tried.
		if !o.Cap {
			return res, tooMany(total)
		}
		enumerate(ks, nil, func(seq []int) bool {
			if !ran[Format(seq)] {
				seqs = append(seqs, seq)
			}
			return len(seqs) < room
		})
		res.unexplored = new(big.Int).Sub(total, big.NewInt(int64(len(seqs)+len(res.Orders))))
		res.Unexplored = res.unexplored.String()
		return runOrders(ctx, f, o, res, seqs, steps)
	}
	var indep func(a, i, b, j int) bool
	if o.Independent != nil {
		memo := map[[4]int]bool{}
		indep = func(a, i, b, j int) bool {
			key := [4]int{a, i, b, j}
			v, ok := memo[key]
			if !ok {
				v = o.Independent(StepRef{a, i, steps[a][i], steps[a][:i]}, StepRef{b, j, steps[b][j], steps[b][:j]})
				memo[key] = v
			}
			return v
		}
	}
	// Only the orders that will run are kept; the rest are counted. The
	// first orders ran whether or not the reduction keeps them.
	kept, extra := 0, 0
	res.Pruned = enumerate(ks, indep, func(seq []int) bool {
		kept++
		if ran[Format(seq)] {
			return true
		}
		if extra++; len(seqs) < room {
			seqs = append(seqs, seq)
		}
		return true
	})
	// The first orders the reduction left out were run all the same.
	res.Pruned -= len(res.Orders) - (kept - extra)
	if res.Pruned > 0 {
		commute := o.Commute
		if commute == "" {
			commute = "steps that commute"
		}
		res.Reduction = fmt.Sprintf("reduction: %d of %s orders spared, each equivalent to one that runs: it differs from it only by swapping adjacent "+
			"steps of different attempts that commute (%s), so it runs the same conflicting steps in the same order; of each class "+
			"of such orders exactly one runs (see docs/verdicts.md)", res.Pruned, res.Total, commute)
	}
	left := big.NewInt(int64(extra + len(res.Orders)))
	if left.Cmp(limit) > 0 {
		if !o.Cap {
			return res, tooMany(left)
		}
		res.unexplored = new(big.Int).Sub(left, limit)
		res.Unexplored = res.unexplored.String()
	}
	return runOrders(ctx, f, o, res, seqs, steps)
}

// serial is the order that runs attempt lead's steps, then every other
// attempt's in turn.
func serial(ks []int, lead int) []int {
	var seq []int
	for _, w := range append([]int{lead}, others(len(ks), lead)...) {
		for range ks[w] {
			seq = append(seq, w)
		}
	}
	return seq
}

func others(n, lead int) []int {
	var out []int
	for w := range n {
		if w != lead {
			out = append(out, w)
		}
	}
	return out
}

// check counts the orders in which an attempt took other steps than
// those its plan was judged on (Diverged), and those in which it took
// more steps than its plan has (Unplanned, extra ones included: they ran
// after the order's planned steps, never among them).
func (r *Result) check(steps [][]string) {
	r.Diverged, r.Unplanned, r.UnplannedStep = 0, 0, ""
	for _, o := range r.Orders {
		for _, ev := range o.Ran {
			if !ev.Extra && (ev.Step > len(steps[ev.Worker]) || steps[ev.Worker][ev.Step-1] != ev.Name) {
				r.Diverged++
				break
			}
		}
		for i, ev := range o.Ran {
			if ev.Step > len(steps[ev.Worker]) && overtaken(o.Ran, i) {
				if r.Unplanned++; r.UnplannedStep == "" {
					r.UnplannedStep = fmt.Sprintf("attempt %s's step %s (%s) in the order %s, where its plan has %d steps",
						Letter(ev.Worker), ev.Label(), ev.Name, o.Schedule, len(steps[ev.Worker]))
				}
				break
			}
		}
	}
}

// overtaken reports whether another attempt's step ran between step i of
// ran and its attempt's step before it: the attempt waited at step i's
// boundary (or was blocked) while another went, so the order in which
// step i went first was another order. A step that went as soon as its
// attempt reached it had no other place.
func overtaken(ran []Event, i int) bool {
	return i > 0 && ran[i-1].Worker != ran[i].Worker
}

// runOrders says the count, then runs seqs after the first orders.
func runOrders(ctx context.Context, f *fleet, o Options, res *Result, seqs [][]int, steps [][]string) (*Result, error) {
	firsts := len(res.Orders)
	res.Planned = len(seqs) + firsts
	if o.Counted != nil {
		if err := o.Counted(res); err != nil {
			return res, err
		}
	}
	if o.Progress != nil {
		o.Progress(firsts, res.Planned)
	}
	defer res.check(steps)
	for i, seq := range seqs {
		if ctx.Err() != nil {
			res.Interrupted = true
			return res, context.Cause(ctx)
		}
		ord, err := f.order(ctx, i+firsts, seq, 0, o.Pace)
		if ctx.Err() != nil {
			res.Interrupted = true
			return res, context.Cause(ctx)
		}
		if err != nil {
			return res, err
		}
		res.Orders = append(res.Orders, ord)
		if o.Progress != nil {
			o.Progress(i+firsts+1, res.Planned)
		}
	}
	describe(f.t, res)
	return res, nil
}

func (o Options) withDefaults() Options {
	if o.Attempts == 0 {
		o.Attempts = DefaultAttempts
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.Allowed == 0 && o.Required == 0 && !o.AllowanceSet {
		o.Allowed, o.Required = runner.DefaultAllowed, runner.DefaultRequired
	}
	if o.BlockAfter == 0 {
		o.BlockAfter = DefaultBlockAfter
	}
	if o.Timeout == 0 {
		o.Timeout = runner.DefaultTimeout
	}
	if o.MaxSchedules == 0 {
		o.MaxSchedules = DefaultMaxSchedules
	}
	return o
}

// Validate reports options no exploration can use.
func (o Options) Validate() error {
	o = o.withDefaults()
	// Ifs, not a switch: gremlins v0.6.0 never mutates a switch's case
	// expressions, and these refuse a user's bad flags.
	if o.Attempts < 2 || o.Attempts > MaxAttempts {
		return fmt.Errorf("--attempts must be 2 or 3 (got %d): every order of more attempts is too many to run", o.Attempts)
	}
	if o.BlockAfter < 0 {
		return fmt.Errorf("--block-after cannot be negative (got %s)", o.BlockAfter)
	}
	if o.Timeout < 0 {
		return fmt.Errorf("--timeout cannot be negative (got %s)", o.Timeout)
	}
	if o.BlockAfter >= o.Timeout {
		return fmt.Errorf("--block-after %s must be shorter than --timeout %s", o.BlockAfter, o.Timeout)
	}
	if o.MaxSchedules < 1 {
		return fmt.Errorf("--max-schedules must be at least 1 (got %d)", o.MaxSchedules)
	}
	return nil
}

func describe(t runner.Target, res *Result) {
	if d, ok := t.(runner.Describer); ok {
		res.Server = d.Server()
	}
	res.Notes = nil
	if n, ok := t.(runner.Noter); ok {
		res.Notes = n.Notes()
	}
	if res.note != "" {
		res.Notes = append(res.Notes, res.note)
	}
	if res.replan != "" {
		res.Notes = append(res.Notes, res.replan)
	}
	if res.Reduction != "" {
		res.Notes = append(res.Notes, res.Reduction)
	}
}

// LockWaiter is a session that can ask its server whether the statement
// it is running waits on a lock (PostgreSQL's pg_blocking_pids, InnoDB's
// lock waits). When every session of an exploration is one, a step is
// blocked only when the server says so, and the next step goes the
// moment it does; --block-after is then only the fallback for a failed
// question.
type LockWaiter interface {
	LockWait(ctx context.Context) (bool, error)
}

// fleet is the attempts' replicas and sessions, open for the whole
// exploration: each attempt keeps its own connection.
type fleet struct {
	t        runner.Target
	o        Options
	apps     []runner.App
	sessions []runner.Session
	waiters  []LockWaiter // nil unless every session is one
	// inv checks the invariants before and after each order (nil: none);
	// uncounted: the target has no effects check (runner.Uncounted).
	inv       runner.Invarianter
	uncounted bool
	// subjects counts the subjects made: each order's is fresh, also when
	// the attempts are planned again and the orders count from 0 again.
	subjects int
}

func (f *fleet) open(ctx context.Context) error {
	n, r := f.o.Attempts, f.o.Replicas
	for i := range r {
		app, err := f.t.Open(ctx, i, (n-i+r-1)/r)
		if err != nil {
			return fmt.Errorf("open replica %d: %w", i, err)
		}
		f.apps = append(f.apps, app)
	}
	for i := range n {
		s, err := f.apps[i%r].Session(ctx, i)
		if err != nil {
			return fmt.Errorf("replica %d, attempt %s: %w", i%r, Letter(i), err)
		}
		f.sessions = append(f.sessions, s)
	}
	for _, s := range f.sessions {
		lw, ok := s.(LockWaiter)
		if !ok {
			f.waiters = nil
			break
		}
		f.waiters = append(f.waiters, lw)
	}
	return nil
}

// probe asks the server whether attempt w waits on a lock; nil when the
// sessions cannot ask.
func (f *fleet) probe() func(ctx context.Context, w int) (bool, error) {
	if f.waiters == nil {
		return nil
	}
	return func(ctx context.Context, w int) (bool, error) {
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		defer cancel()
		return f.waiters[w].LockWait(pctx)
	}
}

// probeTimeout bounds one question to the server about a lock wait.
const probeTimeout = 2 * time.Second

func (f *fleet) close() {
	for _, s := range f.sessions {
		s.Close()
	}
	for _, a := range f.apps {
		a.Close()
	}
}

// order runs one order at a fresh subject and counts its effects. Past
// seq's steps (all of them, when seq is nil), attempt lead goes first.
func (f *fleet) order(ctx context.Context, index int, seq []int, lead int, pace func(Event)) (Order, error) {
	s, err := f.t.Reset(ctx, f.subjects)
	f.subjects++
	if err != nil {
		return Order{}, fmt.Errorf("order %d: reset: %w", index+1, err)
	}
	// What the subject broke before the order, as a burst does (runner):
	// an order is judged by the violations it adds.
	var held []int
	if f.inv != nil {
		if held, err = f.inv.Broken(ctx, s); err != nil {
			return Order{}, fmt.Errorf("order %d: check the invariants before: %w", index+1, err)
		}
	}
	n := f.o.Attempts
	c := newController(n)
	outs := make([]runner.Outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		w := runner.NewWorker(i, i%f.o.Replicas, c)
		actx, cancel := context.WithTimeoutCause(ctx, f.o.Timeout, runner.ErrTimeout)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel()
			o := f.sessions[i].Attempt(actx, s, w)
			if o.Class == runner.Error && errors.Is(context.Cause(actx), runner.ErrTimeout) {
				o = runner.Outcome{Class: runner.Unknown, Err: o.Err}
			}
			outs[i] = o
			c.Done(i)
		}()
	}
	dctx, cancel := context.WithTimeout(ctx, f.o.Timeout+hangGrace)
	ran := c.drive(dctx, seq, lead, f.o.BlockAfter, f.probe(), pace)
	cancel()
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(f.o.Timeout + hangGrace):
		return Order{}, fmt.Errorf("order %d: %w", index+1, runner.ErrHung)
	}
	if ctx.Err() != nil {
		return Order{}, ctx.Err()
	}
	ord := Order{Index: index, Ran: ran, Required: f.o.Required, Allowed: f.o.Allowed, planned: seq}
	if seq == nil {
		// The serial order: what ran is the plan.
		for i := range ran {
			ran[i].Extra = false
			ord.planned = append(ord.planned, ran[i].Worker)
		}
	}
	ord.Planned = Format(ord.planned)
	labels := make([]string, len(ran))
	for i, ev := range ran {
		labels[i] = ev.Label()
		ord.Blocked += b2i(ev.Blocked)
	}
	ord.Schedule = strings.Join(labels, " ")
	for _, o := range outs {
		a := Attempt{Outcome: o.Class, Class: o.Class.String()}
		if o.Err != nil {
			a.Err = o.Err.Error()
		}
		a.Deadlock = o.Class == runner.Conflict && f.o.Deadlock != nil && f.o.Deadlock(o.Err)
		switch {
		case a.Deadlock:
			ord.Deadlocked++
		case o.Class == runner.Conflict:
			ord.Conflicts++
		case o.Class == runner.Unknown:
			ord.Abandoned++
		}
		ord.Attempts = append(ord.Attempts, a)
	}
	if f.inv != nil {
		now, err := f.inv.Broken(ctx, s)
		if err == nil && len(now) != len(held) {
			err = fmt.Errorf("%d counts for %d invariants", len(now), len(held))
		}
		if err != nil {
			return ord, fmt.Errorf("order %d: check the invariants: %w", index+1, err)
		}
		ord.Broken = make([]int, len(now))
		for i := range now {
			ord.Broken[i] = max(0, now[i]-held[i])
		}
	}
	if f.uncounted {
		// No effects check: the invariants and the outcomes judge the
		// order, and no count of effects is right or wrong.
		ord.Allowed, ord.Required = 0, 0
		return ord, nil
	}
	ord.Effects, err = f.t.Effects(ctx, s)
	if err != nil {
		return ord, fmt.Errorf("order %d: count effects: %w", index+1, err)
	}
	var classes [runner.NumClasses]int
	for _, o := range outs {
		classes[o.Class]++
	}
	if a, ok := f.t.(runner.Allowancer); ok {
		ord.Allowed = a.Allowed(s, classes)
		ord.Required = min(ord.Required, ord.Allowed)
	}
	// As a burst does (runner): a target that knows from what committed
	// how many effects must have landed sets the order's floor.
	if r, ok := f.t.(runner.Requirer); ok {
		ord.Required = r.Required(s, classes)
	}
	return ord, nil
}
