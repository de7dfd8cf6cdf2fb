package runner

import (
	"context"
	"fmt"
	"math/big"
	"sort"
	"strings"
	"time"
)

// Snapshot is what a store holds, measured by racetest for --effects auto:
// per watched table its rows (key "grants rows") and the sum of each
// numeric column (key "grants.amount"); per Redis key pattern its keys and
// their numeric values; per MongoDB collection its documents and numeric
// fields. Values are exact.
type Snapshot map[string]*big.Rat

// Snapshotter is a Target that can measure the store its attempts write
// to. With Config.SoloEvery set, the runner measures each burst's change of
// the store and compares it with a solo twin's: the same attempts, one at a
// time, on a fresh subject of their own.
type Snapshotter interface {
	Snapshot(ctx context.Context) (Snapshot, error)
}

// SoloResetter is a Target whose Reset readies its connections for a
// synchronized release (an HTTP target's last-byte holds every request's
// tail until all are ready): a solo twin's subject, whose attempts run one
// at a time, is made with ResetSolo instead, each attempt going out alone.
type SoloResetter interface {
	ResetSolo(ctx context.Context, burst int) (Subject, error)
}

// SnapshotError is a store that cannot be measured as asked: too large to
// read per burst, or nothing named to watch. It is the user's to change.
type SnapshotError struct{ Msg string }

func (e *SnapshotError) Error() string { return e.Msg }

// RowsSuffix ends the key of a table's (or key pattern's, or collection's)
// row count in a Snapshot: "grants rows".
const RowsSuffix = " rows"

// Delta is a change of a Snapshot: after minus before, by key; keys that
// did not change are absent.
type Delta map[string]*big.Rat

// Change is the delta from before to s.
func (s Snapshot) Change(before Snapshot) Delta {
	d := Delta{}
	for k, v := range s {
		if diff := new(big.Rat).Sub(v, orZero(before[k])); diff.Sign() != 0 {
			d[k] = diff
		}
	}
	for k, v := range before {
		if _, ok := s[k]; !ok && v.Sign() != 0 {
			d[k] = new(big.Rat).Neg(v)
		}
	}
	return d
}

func orZero(r *big.Rat) *big.Rat {
	if r == nil {
		return new(big.Rat)
	}
	return r
}

// Keys are the delta's keys, sorted.
func (d Delta) Keys() []string {
	ks := make([]string, 0, len(d))
	for k := range d {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Rows is how many rows (keys, documents) the change added or removed,
// over all watched tables.
func (d Delta) Rows() int {
	n := new(big.Rat)
	for k, v := range d {
		if strings.HasSuffix(k, RowsSuffix) {
			n.Add(n, new(big.Rat).Abs(v))
		}
	}
	f, _ := n.Float64()
	return int(f)
}

// Signed writes a change as people read it: "+7", "-1.5", "0".
func Signed(r *big.Rat) string {
	if r == nil || r.Sign() == 0 {
		return "0"
	}
	s := r.RatString()
	if !r.IsInt() {
		s = strings.TrimRight(strings.TrimRight(r.FloatString(6), "0"), ".")
	}
	if r.Sign() > 0 {
		return "+" + s
	}
	return s
}

// TwinVerdict is how a burst's change compares with its solo twin's.
type TwinVerdict uint8

const (
	// TwinUnjudged: the burst could not be compared (the solo twins
	// disagree with each other, or the store changed while nothing ran).
	TwinUnjudged TwinVerdict = iota
	// TwinSame: the burst changed the store as the attempts did alone.
	TwinSame
	// TwinMore: more rows, or a larger change of a column, than alone: RACE.
	TwinMore
	// TwinFewer: fewer rows, or a smaller change, than alone: LOST.
	TwinFewer
)

func (v TwinVerdict) String() string {
	return [...]string{"unjudged", "same", "more", "fewer"}[v]
}

// Twin is what --effects auto measured of one burst.
type Twin struct {
	// Solo is the change its solo twin made: the twin that ran before this
	// burst, or the latest one (Config.SoloEvery).
	Solo Delta
	// SoloOrder is the order the solo twin ran the attempts in (worker IDs,
	// wave after wave); nil in a report written before orders were kept.
	SoloOrder []int
	// SoloExecuted is how many of the solo twin's attempts reported that
	// they executed the action; 0 in a report written before it was kept.
	SoloExecuted int
	// Together is the change the burst made.
	Together Delta
	// SoloBurst is the burst whose solo twin Solo is.
	SoloBurst int
	// Replays, when the burst's change equalled no serial run before it,
	// are the same attempts run one at a time in the order they completed
	// together (the serial order a store that serializes them most likely
	// chose), then in orders near it (see replay).
	Replays []Serial
	// Noise lists what changed while nothing ran (another writer).
	Noise []string
	// Verdict and Diffs are decided over the whole run (see judgeTwins).
	Verdict TwinVerdict
	Diffs   []TwinDiff
	// Reordered: the change equals a serial run in an order other than
	// the solo twin's (Verdict is TwinSame).
	Reordered bool
	// Turned: the burst changed less than its reference, and fewer of its
	// attempts executed than did one at a time (Verdict is TwinUnjudged;
	// see turnedAway).
	Turned bool
}

// Serial is a burst's attempts run one at a time: the order they ran in
// (worker IDs, wave after wave), the change they made, and how many of
// them reported that they executed the action (0 when not known).
type Serial struct {
	Order    []int
	Delta    Delta
	Executed int
}

// Reference is the serial run a burst is shown beside: its replay in the
// order its attempts completed, if it has one, else its solo twin.
func (t *Twin) Reference() (Delta, bool) {
	if len(t.Replays) > 0 {
		return t.Replays[0].Delta, true
	}
	return t.Solo, false
}

// ReferenceExecuted is how many attempts of the reference (Reference)
// executed.
func (t *Twin) ReferenceExecuted() int {
	if len(t.Replays) > 0 {
		return t.Replays[0].Executed
	}
	return t.SoloExecuted
}

// turnedAway reports whether a burst that changed less than its
// reference is explained by its own attempts' answers: some executed, but
// fewer than did one at a time, so the others did not execute together
// (turned away, in conflict, failed) and did alone. A guard whose answer
// depends on time does that when it is correct (a rate limiter, a window:
// one at a time, the window passes between attempts), so does a deadlock,
// and so does a guard that wrongly says no. The change
// cannot tell the two apart, so the burst is neither LOST nor SAFE:
// unjudged. A burst whose every attempt was turned away while the change
// is smaller stays LOST: something claimed it done and nothing was.
func turnedAway(executed, reference int) bool {
	return executed > 0 && executed < reference
}

// TwinDiff is one key whose change differs between a burst and its twin.
type TwinDiff struct {
	Key            string
	Solo, Together *big.Rat
}

// String reads "`grants`: +1 row solo, +7 together".
func (d TwinDiff) String() string {
	if t, ok := strings.CutSuffix(d.Key, RowsSuffix); ok {
		unit := " rows"
		if d.Solo.Cmp(big.NewRat(1, 1)) == 0 || d.Solo.Cmp(big.NewRat(-1, 1)) == 0 {
			unit = " row"
		}
		return fmt.Sprintf("`%s`: %s%s solo, %s together", t, Signed(d.Solo), unit, Signed(d.Together))
	}
	return fmt.Sprintf("`%s` (sum): %s solo, %s together", d.Key, Signed(d.Solo), Signed(d.Together))
}

// more reports whether the burst's change is larger than the twin's: a
// larger magnitude, or the same magnitude the other way.
func (d TwinDiff) more() bool {
	a, b := new(big.Rat).Abs(d.Together), new(big.Rat).Abs(d.Solo)
	if c := a.Cmp(b); c != 0 {
		return c > 0
	}
	return true
}

// Twins is what the run's solo twins showed as a whole.
type Twins struct {
	// Solos counts the solo twins that ran.
	Solos int
	// Replays counts the replays of bursts one at a time in the order
	// their attempts completed (see Twin.Replays); Orders counts the
	// distinct orders of every serial run (solo twins and replays).
	Replays, Orders int
	// Reordered counts the bursts whose change equals a serial run in an
	// order other than their solo twin's: correct code whose outcome
	// depends on the order of the requests.
	Reordered int
	// Disagree says how two serial runs in the same order differed in the
	// rows they left (an application that is not deterministic); "" when
	// none did.
	Disagree string
	// Varying are the columns whose sums differed between serial runs in
	// the same order while their rows agreed: values that change with
	// every run (a serial id, a timestamp). They are not compared.
	Varying []string
	// Noisy counts the bursts in which the store changed while no attempt
	// ran; Noise is the first such change.
	Noisy int
	Noise string
	// Turned counts the bursts left unjudged because fewer of their
	// attempts executed than one at a time, and their change was smaller
	// (Twin.Turned).
	Turned int
}

// MinSolos is the fewest solo twins a run judges by: one twin cannot show
// that the application does the same thing twice, nor which columns change
// with every run. The first two twins run the attempts in the same order.
const MinSolos = 2

// judgeTwins decides, over the whole run, which keys the serial runs agree
// on and how each burst compares with them.
func judgeTwins(bursts []Burst) *Twins { return judge(bursts, MinSolos) }

// judge is judgeTwins with the fewest twins it judges by.
//
// A store that serializes the attempts leaves the change of some serial
// order of them, not necessarily of the order the solo twin ran (stock
// sold in unequal quantities, transfers between two accounts). So a
// burst's change is compared with every serial run of the run, its solo
// twins and replays: equal to one of them (but for the columns that
// change with every run), it is the same; equal to none, it differs from
// its reference (Twin.Reference): more is a RACE, less is LOST.
func judge(bursts []Burst, minSolos int) *Twins {
	tw := &Twins{}
	serials, solos := serialRuns(bursts)
	tw.Solos = solos
	var varying map[string]bool
	varying, tw.Disagree = drift(serials)
	for k := range varying {
		if !strings.HasSuffix(k, RowsSuffix) {
			tw.Varying = append(tw.Varying, k)
		}
	}
	sort.Strings(tw.Varying)
	orders := map[string]bool{}
	for _, s := range serials {
		orders[fmt.Sprint(s.Order)] = true
	}
	tw.Orders = len(orders)
	for i := range bursts {
		t := bursts[i].Twin
		if t == nil {
			continue
		}
		tw.Replays += len(t.Replays)
		t.Verdict, t.Diffs, t.Reordered, t.Turned = TwinUnjudged, nil, false, false
		if len(t.Noise) > 0 {
			tw.Noisy++
			if tw.Noise == "" {
				tw.Noise = strings.Join(t.Noise, ", ")
			}
			continue
		}
		if tw.Disagree != "" || tw.Solos < minSolos {
			continue
		}
		t.Verdict = TwinSame
		if equal(t.Together, t.Solo, varying) {
			continue
		}
		if matches(t.Together, serials, varying) {
			t.Reordered = true
			tw.Reordered++
			continue
		}
		ref, _ := t.Reference()
		for _, k := range unionKeys(ref, t.Together) {
			if varying[k] || orZero(ref[k]).Cmp(orZero(t.Together[k])) == 0 {
				continue
			}
			d := TwinDiff{Key: k, Solo: orZero(ref[k]), Together: orZero(t.Together[k])}
			t.Diffs = append(t.Diffs, d)
			if d.more() {
				t.Verdict = TwinMore
			} else if t.Verdict != TwinMore {
				t.Verdict = TwinFewer
			}
		}
		if t.Verdict == TwinFewer && turnedAway(bursts[i].Outcomes[Executed], t.ReferenceExecuted()) {
			t.Verdict, t.Turned = TwinUnjudged, true
			tw.Turned++
		}
	}
	return tw
}

// serialRuns are the bursts' serial runs: each solo twin once (by the
// burst it ran for), then each replay; solos counts the solo twins.
func serialRuns(bursts []Burst) (runs []Serial, solos int) {
	byBurst := map[int]Serial{}
	for _, b := range bursts {
		if b.Twin != nil {
			byBurst[b.Twin.SoloBurst] = Serial{Order: b.Twin.SoloOrder, Delta: b.Twin.Solo, Executed: b.Twin.SoloExecuted}
		}
	}
	for _, idx := range sortedBursts(byBurst) {
		runs = append(runs, byBurst[idx])
	}
	for _, b := range bursts {
		if b.Twin != nil {
			runs = append(runs, b.Twin.Replays...)
		}
	}
	return runs, len(byBurst)
}

// drift compares the serial runs made in the same order: a key whose
// change differs between two of them changes with every run (varying),
// and rows that differ mean the application does not do the same thing
// twice (disagree says where). Runs in different orders may differ: that
// is what the order of the requests decides.
func drift(runs []Serial) (varying map[string]bool, disagree string) {
	varying = map[string]bool{}
	first := map[string]Delta{}
	for _, r := range runs {
		o := fmt.Sprint(r.Order)
		f, seen := first[o]
		if !seen {
			first[o] = r.Delta
			continue
		}
		for _, k := range unionKeys(f, r.Delta) {
			if orZero(f[k]).Cmp(orZero(r.Delta[k])) == 0 {
				continue
			}
			if strings.HasSuffix(k, RowsSuffix) && disagree == "" {
				disagree = fmt.Sprintf("the solo runs differ from each other (`%s`: %s in one, %s in another, the attempts in the same order): the application does not do the same thing twice, so its burst cannot be compared with it",
					strings.TrimSuffix(k, RowsSuffix), Signed(orZero(f[k]))+" rows", Signed(orZero(r.Delta[k]))+" rows")
			}
			varying[k] = true
		}
	}
	return varying, disagree
}

// equal reports whether two changes agree on every key but those set
// aside.
func equal(a, b Delta, aside map[string]bool) bool {
	for _, k := range unionKeys(a, b) {
		if !aside[k] && orZero(a[k]).Cmp(orZero(b[k])) != 0 {
			return false
		}
	}
	return true
}

// matches reports whether d equals the change of one of the serial runs.
func matches(d Delta, runs []Serial, aside map[string]bool) bool {
	for _, r := range runs {
		if equal(d, r.Delta, aside) {
			return true
		}
	}
	return false
}

func sortedBursts(m map[int]Serial) []int {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	return ks
}

func unionKeys(a, b Delta) []string {
	seen := map[string]bool{}
	var ks []string
	for _, d := range []Delta{a, b} {
		for k := range d {
			if !seen[k] {
				seen[k] = true
				ks = append(ks, k)
			}
		}
	}
	sort.Strings(ks)
	return ks
}

// Reason is why the run's twins cannot support a verdict, or "".
func (tw *Twins) Reason() string {
	if tw == nil {
		return ""
	}
	if tw.Solos < MinSolos {
		return fmt.Sprintf("only %d solo twin ran, and one cannot show that the application does the same thing twice: run more bursts (2 or more; with --solo-every K, K+1 or more)", tw.Solos)
	}
	if tw.Noisy > 0 {
		return fmt.Sprintf("the database changed while no attempt ran (%s) in %s: another writer is at work, so no change can be put down to the attempts — run on a database of its own, or watch only what the action writes, scoped to this run with {{.RunID}} in the names: --watch 'coupons_{{.RunID}},redemptions_{{.RunID}}' (tables, collections) or --watch 'coupon:{{.RunID}}-*' (Redis keys)",
			tw.Noise, bursts(tw.Noisy))
	}
	return tw.Disagree
}

// soloIndex is the burst index of burst b's solo twin's subject: past every
// burst a run may fire (TopUp fires up to twice the plan); replayIndex is
// its replay's, past every solo twin's.
func (e *engine) soloIndex(b int) int   { return 2*e.cfg.Bursts + b }
func (e *engine) replayIndex(b int) int { return 4*e.cfg.Bursts + b }

// A burst's k-th replay's subject is replayIndex(b) + k×2×Bursts: past
// every earlier replay's.

// soloTwin runs the burst's attempts one at a time on a fresh subject, in
// an order that starts one worker later with each twin from the third on,
// and returns the change the attempts made. The first two twins run the
// same order, so that a column that changes with every run (a serial id, a
// timestamp) shows as such; the later ones turn the order, so that a burst
// whose outcome depends on the order of its attempts finds more serial
// orders to be compared with.
//
// A solo twin is the attempts as a team tests them alone: one at a time,
// against one process. With replicas, every attempt runs on the sessions
// of replica 0, never of another: a guard that each replica keeps in its
// own memory (memory-set) holds alone and fails across replicas, and a
// twin spread over the replicas would fail as the burst does, hiding it.
func (e *engine) soloTwin(ctx context.Context, b int) (Serial, error) {
	n := len(e.workers)
	turn := max(0, e.solos-1)
	order := make([]int, 0, n*e.cfg.Waves)
	for range e.cfg.Waves {
		for k := range n {
			order = append(order, (k+turn)%n)
		}
	}
	sr, err := e.serial(ctx, e.soloIndex(b), order)
	if err != nil {
		return sr, fmt.Errorf("burst %d: solo twin: %w", b, err)
	}
	e.solos++
	e.serials = append(e.serials, sr)
	return sr, nil
}

// replay runs the burst's attempts one at a time on a fresh subject in the
// order they completed together (wave after wave), for a burst whose
// change equals no serial run so far: if the store serialized them, it
// most likely did so in that order. But an attempt completes some time
// after the store ordered it: one turned away answers at once, one that
// took effect only after its last statements and its commit, and a
// response can come back a hair after the next one's although its
// transaction committed first. So while the replay differs, two more
// kinds of order are run, up to MaxReplays runs in all: the attempts
// that took effect in the order they completed, then the others; and the
// completion order with one pair that completed within TieGap of each
// other swapped. Each run is kept (Twin.Replays); the first is the
// completion order.
//
// When none of them explains the burst, the completion order runs once
// more: a value that differs between the two runs of one order (a random
// pick, a clock) changes with every run and is set aside (drift), where
// it would otherwise read as the burst's difference.
func (e *engine) replay(ctx context.Context, b Burst) ([]Serial, error) {
	orders := replayOrders(e.cur, e.cfg.Waves)
	orders = append(orders, orders[0])
	var runs []Serial
	for _, o := range orders {
		sr, err := e.serial(ctx, e.replayIndex(b.Index)+len(runs)*2*e.cfg.Bursts, o)
		if err != nil {
			return runs, fmt.Errorf("burst %d: replay in the order the attempts completed: %w", b.Index, err)
		}
		e.serials = append(e.serials, sr)
		runs = append(runs, sr)
		varying, _ := drift(e.serials)
		if matches(b.Twin.Together, runs, varying) {
			break
		}
	}
	return runs, nil
}

// MaxReplays is the most orders a burst's replay tries (see replay), each
// run once, and the first once more.
// TieGap is how close two completions are for their order to be in doubt.
const (
	MaxReplays = 4
	TieGap     = 2 * time.Millisecond
)

// replayOrders are the orders a burst's replay tries (see replay), from
// its trace: the completion order, wave after wave; the attempts that
// took effect in that order, then the others, if that differs; then the
// completion order with one pair of neighbours that completed within
// TieGap swapped, the earliest pairs first; MaxReplays orders at most.
func replayOrders(cur []WorkerTrace, waves int) [][]int {
	var order, effectFirst []int
	var gap []time.Duration
	for wave := range waves {
		var tr []WorkerTrace
		for _, w := range cur {
			if w.Wave == wave {
				tr = append(tr, w)
			}
		}
		sort.SliceStable(tr, func(i, j int) bool { return finished(tr[i]) < finished(tr[j]) })
		var rest []int
		for k, w := range tr {
			order = append(order, w.Worker)
			if w.Outcome == Executed {
				effectFirst = append(effectFirst, w.Worker)
			} else {
				rest = append(rest, w.Worker)
			}
			if k == 0 {
				gap = append(gap, 1<<62) // no tie across waves
			} else {
				gap = append(gap, finished(w)-finished(tr[k-1]))
			}
		}
		effectFirst = append(effectFirst, rest...)
	}
	orders := [][]int{order}
	if fmt.Sprint(effectFirst) != fmt.Sprint(order) {
		orders = append(orders, effectFirst)
	}
	for k := 1; k < len(order) && len(orders) < MaxReplays; k++ {
		if gap[k] <= TieGap {
			o := append([]int(nil), order...)
			o[k-1], o[k] = o[k], o[k-1]
			orders = append(orders, o)
		}
	}
	return orders
}

// finished is when an attempt's trace ends (its "done" mark).
func finished(w WorkerTrace) time.Duration {
	if len(w.Marks) == 0 {
		return time.Duration(1 << 62)
	}
	return w.Marks[len(w.Marks)-1].At
}

// serial resets subject index and runs the attempts of order on it one at
// a time, each on a session of replica 0 (see soloTwin).
func (e *engine) serial(ctx context.Context, index int, order []int) (Serial, error) {
	sr := Serial{Order: order}
	reset := e.t.Reset
	if r, ok := e.t.(SoloResetter); ok {
		reset = r.ResetSolo
	}
	s, err := reset(ctx, index)
	if err != nil {
		return sr, fmt.Errorf("reset: %w", err)
	}
	before, err := e.snap.Snapshot(ctx)
	if err != nil {
		return sr, fmt.Errorf("snapshot: %w", err)
	}
	// Worker i runs on replica i % Replicas: replica 0's are every
	// Replicas-th (workers 0, R, 2R, …).
	one := (len(e.workers) + e.cfg.Replicas - 1) / e.cfg.Replicas
	for _, i := range order {
		j := i % one * e.cfg.Replicas // a worker of replica 0
		w := &Worker{ID: i, Replica: 0, Wave: 0}
		w.base = time.Now()
		actx, wc := e.waveContext(ctx)
		wc.arm()
		if o := e.attempt(actx, i, e.sessions[j], s, w); o.Class == Executed {
			sr.Executed++
		}
		wc.release()
		if ctx.Err() != nil {
			return sr, ctx.Err()
		}
	}
	after, err := e.snap.Snapshot(ctx)
	if err != nil {
		return sr, fmt.Errorf("snapshot: %w", err)
	}
	sr.Delta = after.Change(before)
	return sr, nil
}

// noise names what changed between two snapshots taken with nothing
// running in between.
func noise(a, b Snapshot) []string {
	d := b.Change(a)
	var out []string
	for _, k := range d.Keys() {
		out = append(out, fmt.Sprintf("`%s` %s", strings.TrimSuffix(k, RowsSuffix), Signed(d[k])))
	}
	return out
}

// twinBurst measures what burst b changed, and what changed right after it
// while nothing ran; its effects are the rows it changed, its allowance the
// rows its solo twin changed (what the reports show as EFFECTS and
// ALLOWED); the verdict is judgeTwins'.
//
// The target's Effects is still called, after the snapshots, for what it
// checks and keeps besides its count (a script's first burst, an HTTP
// target's responses); the count is not used.
func (e *engine) twinBurst(ctx context.Context, b Burst, s Subject, before Snapshot) (Burst, error) {
	after, err := e.snap.Snapshot(ctx)
	if err != nil {
		return b, fmt.Errorf("burst %d: snapshot: %w", b.Index, err)
	}
	quiet, err := e.snap.Snapshot(ctx)
	if err != nil {
		return b, fmt.Errorf("burst %d: snapshot: %w", b.Index, err)
	}
	if _, err := e.t.Effects(ctx, s); err != nil {
		return b, fmt.Errorf("burst %d: %w", b.Index, err)
	}
	e.serverFigures(s, &b)
	b.Twin = &Twin{Solo: e.lastSolo, SoloOrder: e.soloOrder, SoloExecuted: e.soloExecuted, SoloBurst: e.soloOf, Together: after.Change(before), Noise: noise(after, quiet)}
	if len(b.Twin.Noise) == 0 {
		// Judged at the end against every serial run (judgeTwins); what
		// varies can only grow, so a change equal to a serial run now
		// stays so, and one equal to none is replayed while its trace
		// still says the order its attempts completed in.
		varying, _ := drift(e.serials)
		if !matches(b.Twin.Together, e.serials, varying) {
			if b.Twin.Replays, err = e.replay(ctx, b); err != nil {
				return b, err
			}
		}
	}
	b.Effects = b.Twin.Together.Rows()
	b.Allowed = e.lastSolo.Rows()
	b.Required = b.Allowed
	// The example burst is the one that differs most from its twin.
	judge([]Burst{b}, 1)
	score := len(b.Twin.Diffs)
	// One that broke an invariant stays the example (see burst).
	if !e.exampleBroke && (e.res.Example == nil || score > e.maxSeen) {
		e.maxSeen = score
		e.res.Example = e.snapshot(b)
	}
	return b, nil
}

// JudgeTwins decides again, over bursts read back from a report or built
// by hand, what judgeTwins decides during a run.
func JudgeTwins(bursts []Burst) *Twins { return judgeTwins(bursts) }
