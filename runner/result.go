package runner

import (
	"fmt"
	"sort"
	"time"
)

// Result is what a run found. Every figure a report shows comes from here.
type Result struct {
	Attempts int
	Replicas int
	Waves    int
	Deploy   bool
	Allowed  int
	// Required is the fewest effects per burst that are correct.
	Required int
	// Accounting: each burst allowed and required exactly the attempts
	// that reported success (Config.Accounting).
	Accounting bool
	// Baselined: the target's effects check was read before each burst as
	// well as after it (Baseliner), and each burst's effects are the change.
	Baselined bool
	// Uncounted: the target has no effects check (Uncounted); it is judged
	// by its invariants and its attempts' outcomes alone.
	Uncounted bool
	// Invariants names what had to hold after every burst (Invarianter);
	// Burst.Broken counts each one's violations in this order.
	Invariants []string
	// Timeout is the per-attempt timeout the run used (0: none).
	Timeout time.Duration
	// Planned is the number of bursts asked for; len(Bursts) may be fewer
	// when the run was interrupted or stopped at a violation.
	Planned int
	Bursts  []Burst
	// Example is the trace of the burst with the most effects (the first
	// such burst): the one a timeline should show.
	Example *Trace
	// Errors counts distinct error messages seen in attempts (capped).
	Errors map[string]int
	Server string
	// Diagnosis is the target's one-line account of why no attempt took
	// effect, when it can tell ("no request succeeded: 404 ×800").
	Diagnosis   string
	Notes       []string
	Checks      []Check
	Interrupted bool
	Stopped     bool // stopped early at a violation, as asked
	Elapsed     time.Duration
	// Release names how the attempts were released: GateRelease, or the
	// wire release's name.
	Release string
	// ServerProbe is what the target found, before the bursts, of the
	// server's ability to serve two requests at once (a ServerProber's);
	// nil when the target ran no such probe.
	ServerProbe *ServerProbe
	// Twins is what the solo twins showed, in a run judged by them
	// (Config.SoloEvery); nil otherwise.
	Twins *Twins
	// CleanupErr is set when the run's namespaced objects could not be
	// dropped; the report names it so the user can drop them by hand.
	CleanupErr error
}

// Burst is one burst's figures.
type Burst struct {
	Index int
	// Effects is how many times the action took effect in the burst: the
	// target's count, or, when the run is Baselined, its change across the
	// burst (its count after, less Before).
	Effects int
	// Before is what the effects check read right after the subject was
	// made, in a Baselined run (0 otherwise).
	Before int
	// Broken counts, per invariant of the run (Result.Invariants), the
	// violations the burst added to it; nil without invariants.
	Broken []int
	// Unjudged marks, per invariant, one that was already broken before
	// the burst and not scoped to its subject (InvariantScoper), and that
	// the burst did not break further: a boolean that reads false stays
	// false, so the burst could not show whether it held. Such an
	// invariant did not judge the burst. nil: every invariant judged it.
	Unjudged []bool
	// Unobserved: nothing judged the burst: the run has no effects check
	// (Result.Uncounted) and every invariant left it Unjudged. Its
	// attempts' outcomes prove nothing, so it is not Tested, and a rate
	// is taken over the other bursts (Result.Judged).
	Unobserved bool
	Allowed    int
	Required   int
	Outcomes   [NumClasses]int
	// Retries counts the conflicts retried in the burst (Config.Retries).
	Retries int
	// Spread is the time from the first to the last worker released.
	Spread time.Duration
	// Overlap is the most attempts in flight at one instant (the smallest
	// such figure over the burst's waves).
	Overlap  int
	Duration time.Duration
	// Wire counts, in a wire release, how the attempts' first requests left
	// the client: held and released together, late, or not at all.
	Wire WireCounts
	// Twin is the burst's change of the store and its solo twin's, in a
	// run judged by solo twins (Config.SoloEvery); nil otherwise.
	Twin *Twin
	// ServerParallelism estimates how many of the burst's attempts the
	// server handled at once (a ServerParalleler's figure; 0 when the
	// target cannot tell; exactly 1 when its ServerProbe found the server
	// serial). Overlap is measured at the client: a server with one worker
	// takes overlapping requests one at a time, and below SerialBelow the
	// burst counts as served one at a time (Serial).
	ServerParallelism float64
	// LockWaited: a session of the store the run checks waited on a lock
	// while the burst was in flight (a LockWaiter's finding). A burst the
	// server answered one at a time is then not Serial: the database
	// queued the attempts behind a lock, which is the guard under test,
	// not a server that handles one request at a time.
	LockWaited bool
	// Hold is what a database proxy did during the burst (a Holder's
	// account); nil when no proxy stood between the requests and the
	// database.
	Hold *Hold
}

// Hold is a database proxy's account of one burst (racetest http --proxy):
// it held each request's first statement that writes or locks until the
// burst's requests had all reached one, then let them go on together.
type Hold struct {
	// Met is how many requests reached the hold point together, of
	// Attempts.
	Met      int `json:"met"`
	Attempts int `json:"attempts"`
	// Untested: the requests did not meet at the hold point (fewer than
	// two met, the hold timed out, or no statement reached the proxy);
	// Why says which. Such a burst tested nothing.
	Untested bool   `json:"untested,omitempty"`
	Why      string `json:"why,omitempty"`
	// Summary is the proxy's account in one line.
	Summary string `json:"summary"`
	// Conns are the connections the burst used, each with its statements
	// in order (normalized: literals as placeholders), grouped by
	// transaction.
	Conns []HoldConn `json:"conns,omitempty"`
}

// HoldConn is one connection's statements in a burst held by a proxy.
type HoldConn struct {
	Conn int `json:"conn"`
	// Transactions are its statements, one list per transaction.
	Transactions [][]HoldStatement `json:"transactions"`
}

// HoldStatement is one statement a proxy saw: its normalized text, whether
// it writes or locks, and whether the proxy held it.
type HoldStatement struct {
	Text   string `json:"text"`
	Writes bool   `json:"writes,omitempty"`
	Held   bool   `json:"held,omitempty"`
}

// ServerProbe is what a probe of the server found, once, before the
// bursts: whether it answers a second request while a first one is
// unfinished. Unlike ServerParallelism it does not depend on how long the
// endpoint's requests take.
type ServerProbe struct {
	// Result is ProbeConcurrent, ProbeSerial or ProbeNotRun.
	Result string `json:"result"`
	// Detail says what was sent and seen, or why the probe could not run.
	Detail string `json:"detail"`
}

// The results of a ServerProbe.
const (
	// ProbeConcurrent: the server answered the second request while the
	// first was held unfinished.
	ProbeConcurrent = "concurrent"
	// ProbeSerial: it answered the second only once the first connection
	// closed; a target that finds this reports ServerParallelism 1 for
	// every burst.
	ProbeSerial = "serial"
	// ProbeNotRun: the probe could not be carried out (Detail says why);
	// the bursts are judged by their ServerParallelism alone.
	ProbeNotRun = "not run"
)

// Serial reports whether the probe found a server that serves one request
// at a time.
func (p *ServerProbe) Serial() bool { return p != nil && p.Result == ProbeSerial }

// Concurrent reports whether the probe found a server that serves two
// requests at once.
func (p *ServerProbe) Concurrent() bool { return p != nil && p.Result == ProbeConcurrent }

// SerialBelow is the server parallelism under which a burst counts as served
// one request at a time: a one-worker server measures about 1, two workers
// about 2.
const SerialBelow = 1.5

// Serial reports whether the server answered the burst's attempts one at a
// time (ServerParallelism measured, and below SerialBelow) while no session
// of the store waited on a lock: however much they overlapped at the
// client, none ran beside another, so the burst tested nothing. Answered
// one at a time while a session waited on a lock (LockSerialized), the
// attempts did run together, as far as the database's lock.
func (b Burst) Serial() bool {
	return b.answeredInTurn() && !b.LockWaited
}

// LockSerialized reports whether the server answered the burst one at a
// time because a lock in the database queued its attempts: they reached
// the store together and one waited for another's lock.
func (b Burst) LockSerialized() bool {
	return b.answeredInTurn() && b.LockWaited
}

// answeredInTurn: ServerParallelism measured, and below SerialBelow.
func (b Burst) answeredInTurn() bool {
	return b.ServerParallelism > 0 && b.ServerParallelism < SerialBelow
}

// Violated reports whether the burst left more effects than allowed, or
// broke an invariant. In a run judged by solo twins, more is a larger
// change of the store than its twin's.
func (b Burst) Violated() bool {
	if b.Twin != nil {
		return b.Twin.Verdict == TwinMore || b.BrokeInvariant()
	}
	return b.Effects > b.Allowed || b.BrokeInvariant()
}

// BrokeInvariant reports whether some invariant was broken after the burst.
func (b Burst) BrokeInvariant() bool {
	for _, n := range b.Broken {
		if n > 0 {
			return true
		}
	}
	return false
}

// Lost reports whether the burst left fewer effects than required while
// some attempt claimed the action was done (executed, or declined as
// "already done"): a user told "paid" or "already paid" and never paid.
// A burst whose every attempt failed or timed out claimed nothing; it
// only tested nothing.
// In a run judged by solo twins, fewer is a smaller change than its twin's.
func (b Burst) Lost() bool {
	fewer := b.Effects < b.Required
	if b.Twin != nil {
		fewer = b.Twin.Verdict == TwinFewer
	}
	return fewer && b.Outcomes[Executed]+b.Outcomes[Declined] > 0
}

// Answered is how many attempts the guard decided: executed, declined or
// refused with a conflict. Errors and timeouts decided nothing.
func (b Burst) Answered() int {
	return b.Outcomes[Executed] + b.Outcomes[Declined] + b.Outcomes[Conflict]
}

// Tested reports whether the burst put the guard to the test, judged from
// its attempts' outcomes alone and never from its effects (a check may
// count an anomaly that a correct guard never lets happen, or count
// nothing at all): at least one attempt reported that it executed the
// action, at least two got an answer (executed, declined or conflict), at
// least two were in flight at one instant, and the server did not answer
// them one at a time (Serial). Only such bursts can support SAFE.
// A burst judged by a solo twin must besides have been compared with its
// twin and have changed the store (TookEffect): the snapshots, not a
// check, are then what saw the action, and a change they never saw (the
// action writes where nothing is watched) tested nothing.
// A burst nothing judged (Unobserved) tested nothing either, nor one whose
// requests never met at a database proxy's hold point (Hold.Untested).
func (b Burst) Tested() bool {
	if b.Unobserved {
		return false
	}
	if b.Twin != nil && !b.TookEffect() {
		return false
	}
	if b.Hold != nil && b.Hold.Untested {
		return false
	}
	return b.Outcomes[Executed] >= 1 && b.Answered() >= 2 && b.Overlap >= 2 && !b.Serial()
}

// TookEffect reports whether the guarded action took effect in the burst:
// an effect counted, or, in a run judged by solo twins, a burst that could
// be compared with its twin and changed the store.
func (b Burst) TookEffect() bool {
	if b.Twin != nil {
		return b.Twin.Verdict != TwinUnjudged && len(b.Twin.Together) > 0
	}
	return b.Effects > 0
}

// Trace is every worker's marks in one burst, for a timeline.
type Trace struct {
	Burst   int
	Effects int
	Allowed int
	// Twin: the burst was judged against a solo twin (Effects and Allowed
	// are the rows it and its twin changed).
	Twin    bool
	Workers []WorkerTrace
}

// WorkerTrace is one attempt of a traced burst.
type WorkerTrace struct {
	Worker  int
	Replica int
	Wave    int
	Outcome Class
	Err     string
	Marks   []Mark // includes "released" first and "done" last
}

// Violations counts the bursts over their allowance.
func (r *Result) Violations() int {
	n := 0
	for _, b := range r.Bursts {
		if b.Violated() {
			n++
		}
	}
	return n
}

// BrokenBursts counts the bursts after which invariant i was broken, and
// the most violations one of them showed.
func (r *Result) BrokenBursts(i int) (bursts, most int) {
	for _, b := range r.Bursts {
		if i < len(b.Broken) && b.Broken[i] > 0 {
			bursts++
			most = max(most, b.Broken[i])
		}
	}
	return bursts, most
}

// UnjudgedBursts counts the bursts that invariant i did not judge: it was
// already broken before them (Burst.Unjudged).
func (r *Result) UnjudgedBursts(i int) int {
	n := 0
	for _, b := range r.Bursts {
		if i < len(b.Unjudged) && b.Unjudged[i] {
			n++
		}
	}
	return n
}

// Judged counts the bursts that something judged: all but the Unobserved
// ones. A violation rate is taken over them.
func (r *Result) Judged() int {
	n := 0
	for _, b := range r.Bursts {
		if !b.Unobserved {
			n++
		}
	}
	return n
}

// Stuck reports whether a Baselined run's effects check never moved while
// attempts reported that they did what it counts: no burst changed it, and
// some burst that allowed effects had an attempt that executed. Such a
// check observes nothing (a constant, a typo that always counts 0), and its
// zeros prove neither SAFE nor LOST. A run that allows no effect at all
// counts an anomaly, which a correct guard never moves: not stuck.
func (r *Result) Stuck() bool {
	if !r.Baselined {
		return false
	}
	claimed := false
	for _, b := range r.Bursts {
		if b.Effects != 0 {
			return false
		}
		if b.Allowed > 0 && b.Outcomes[Executed] > 0 {
			claimed = true
		}
	}
	return claimed
}

// Retries counts the conflicts retried over the run.
func (r *Result) Retries() int {
	n := 0
	for _, b := range r.Bursts {
		n += b.Retries
	}
	return n
}

// Lost counts the bursts under their floor (see Burst.Lost).
func (r *Result) Lost() int {
	n := 0
	for _, b := range r.Bursts {
		if b.Lost() {
			n++
		}
	}
	return n
}

// Tested counts the bursts that put the guard to the test (Burst.Tested).
func (r *Result) Tested() int {
	n := 0
	for _, b := range r.Bursts {
		if b.Tested() {
			n++
		}
	}
	return n
}

// Serial counts the bursts the server answered one at a time (Burst.Serial).
func (r *Result) Serial() int {
	n := 0
	for _, b := range r.Bursts {
		if b.Serial() {
			n++
		}
	}
	return n
}

// LockSerialized counts the bursts a lock in the database queued
// (Burst.LockSerialized).
func (r *Result) LockSerialized() int {
	n := 0
	for _, b := range r.Bursts {
		if b.LockSerialized() {
			n++
		}
	}
	return n
}

// Outcomes sums the outcome classes over all bursts.
func (r *Result) Outcomes() [NumClasses]int {
	var sum [NumClasses]int
	for _, b := range r.Bursts {
		for i, n := range b.Outcomes {
			sum[i] += n
		}
	}
	return sum
}

// Overlapped counts the bursts in which at least two attempts were in flight
// at the same instant: only those can show a race.
func (r *Result) Overlapped() int {
	n := 0
	for _, b := range r.Bursts {
		if b.Overlap >= 2 {
			n++
		}
	}
	return n
}

// Summary is min, median and max of a series.
type Summary[T int | time.Duration] struct {
	Min, Median, Max T
}

func summarize[T int | time.Duration](xs []T) Summary[T] {
	if len(xs) == 0 {
		return Summary[T]{}
	}
	s := append([]T(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return Summary[T]{Min: s[0], Median: s[len(s)/2], Max: s[len(s)-1]}
}

// EffectsSummary is min/median/max effects per burst.
func (r *Result) EffectsSummary() Summary[int] {
	return summarize(collect(r.Bursts, func(b Burst) int { return b.Effects }))
}

// OverlapSummary is min/median/max overlap per burst.
func (r *Result) OverlapSummary() Summary[int] {
	return summarize(collect(r.Bursts, func(b Burst) int { return b.Overlap }))
}

// SpreadSummary is min/median/max release spread per burst.
func (r *Result) SpreadSummary() Summary[time.Duration] {
	return summarize(collect(r.Bursts, func(b Burst) time.Duration { return b.Spread }))
}

func collect[T any](bs []Burst, f func(Burst) T) []T {
	out := make([]T, len(bs))
	for i, b := range bs {
		out[i] = f(b)
	}
	return out
}

// retryNote says what retrying conflicts did over the run.
func retryNote(k, retried, gaveUp int) string {
	s := fmt.Sprintf("retry: %d conflicts retried (up to %d per attempt)", retried, k)
	if gaveUp > 0 {
		what := "attempts"
		if gaveUp == 1 {
			what = "attempt"
		}
		return s + fmt.Sprintf("; %d %s still in conflict after %d retries", gaveUp, what, k)
	}
	return s + "; every attempt reached a decision"
}
