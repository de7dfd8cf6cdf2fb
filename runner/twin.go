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
	// Together is the change the burst made.
	Together Delta
	// SoloBurst is the burst whose solo twin Solo is.
	SoloBurst int
	// Noise lists what changed while nothing ran (another writer).
	Noise []string
	// Verdict and Diffs are decided over the whole run (see judgeTwins).
	Verdict TwinVerdict
	Diffs   []TwinDiff
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
	// Disagree says how the solo twins differed in the rows they left (an
	// application that is not deterministic); "" when they agreed.
	Disagree string
	// Varying are the columns whose sums differed between solo twins while
	// their rows agreed: values that record which attempt went first (an
	// attempt number, a serial id). They are not compared.
	Varying []string
	// Noisy counts the bursts in which the store changed while no attempt
	// ran; Noise is the first such change.
	Noisy int
	Noise string
}

// MinSolos is the fewest solo twins a run judges by: one twin cannot show
// that the application does the same thing twice, nor which columns only
// record which attempt went first.
const MinSolos = 2

// judgeTwins decides, over the whole run, which keys the solo twins agree
// on and how each burst compares with its twin on those keys.
func judgeTwins(bursts []Burst) *Twins { return judge(bursts, MinSolos) }

// judge is judgeTwins with the fewest twins it judges by.
func judge(bursts []Burst, minSolos int) *Twins {
	tw := &Twins{}
	solos := map[int]Delta{}
	for _, b := range bursts {
		if b.Twin != nil {
			solos[b.Twin.SoloBurst] = b.Twin.Solo
		}
	}
	tw.Solos = len(solos)
	varying := map[string]bool{}
	var first Delta
	firstSet := false
	for _, idx := range sortedKeys(solos) {
		d := solos[idx]
		if !firstSet {
			first, firstSet = d, true
			continue
		}
		for _, k := range unionKeys(first, d) {
			if orZero(first[k]).Cmp(orZero(d[k])) == 0 {
				continue
			}
			if strings.HasSuffix(k, RowsSuffix) && tw.Disagree == "" {
				tw.Disagree = fmt.Sprintf("the solo runs differ from each other (`%s`: %s in one, %s in another): the application does not do the same thing twice, so its burst cannot be compared with it",
					strings.TrimSuffix(k, RowsSuffix), Signed(orZero(first[k]))+" rows", Signed(orZero(d[k]))+" rows")
			}
			varying[k] = true
		}
	}
	for k := range varying {
		if !strings.HasSuffix(k, RowsSuffix) {
			tw.Varying = append(tw.Varying, k)
		}
	}
	sort.Strings(tw.Varying)
	for i := range bursts {
		t := bursts[i].Twin
		if t == nil {
			continue
		}
		t.Verdict, t.Diffs = TwinUnjudged, nil
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
		for _, k := range unionKeys(t.Solo, t.Together) {
			if varying[k] || orZero(t.Solo[k]).Cmp(orZero(t.Together[k])) == 0 {
				continue
			}
			d := TwinDiff{Key: k, Solo: orZero(t.Solo[k]), Together: orZero(t.Together[k])}
			t.Diffs = append(t.Diffs, d)
			if d.more() {
				t.Verdict = TwinMore
			} else if t.Verdict != TwinMore {
				t.Verdict = TwinFewer
			}
		}
	}
	return tw
}

func sortedKeys(m map[int]Delta) []int {
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
		return fmt.Sprintf("the database changed while no attempt ran (%s) in %s: another writer is at work, so no change can be put down to the attempts — run on a database of its own, or name the tables the action writes with --watch",
			tw.Noise, bursts(tw.Noisy))
	}
	return tw.Disagree
}

// soloIndex is the burst index of burst b's solo twin's subject: past every
// burst a run may fire (TopUp fires up to twice the plan).
func (e *engine) soloIndex(b int) int { return 2*e.cfg.Bursts + b }

// soloTwin resets a fresh subject and runs the burst's attempts on it one
// at a time, in an order that starts one worker later with each twin (so
// that a column recording which attempt went first varies between twins
// and is told from a quantity), and returns the change the attempts made.
//
// A solo twin is the attempts as a team tests them alone: one at a time,
// against one process. With replicas, every attempt runs on the sessions
// of replica 0, never of another: a guard that each replica keeps in its
// own memory (memory-set) holds alone and fails across replicas, and a
// twin spread over the replicas would fail as the burst does, hiding it.
func (e *engine) soloTwin(ctx context.Context, b int) (Delta, error) {
	reset := e.t.Reset
	if sr, ok := e.t.(SoloResetter); ok {
		reset = sr.ResetSolo
	}
	s, err := reset(ctx, e.soloIndex(b))
	if err != nil {
		return nil, fmt.Errorf("burst %d: solo twin: reset: %w", b, err)
	}
	before, err := e.snap.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("burst %d: solo twin: snapshot: %w", b, err)
	}
	n := len(e.workers)
	// Worker i runs on replica i % Replicas: replica 0's are every
	// Replicas-th (workers 0, R, 2R, …).
	one := (n + e.cfg.Replicas - 1) / e.cfg.Replicas
	for range e.cfg.Waves {
		for k := range n {
			i := (k + e.solos) % n
			j := i % one * e.cfg.Replicas // a worker of replica 0
			w := &Worker{ID: i, Replica: 0, Wave: 0}
			w.base = time.Now()
			actx, wc := e.waveContext(ctx)
			wc.arm()
			e.attempt(actx, i, e.sessions[j], s, w)
			wc.release()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
		}
	}
	e.solos++
	after, err := e.snap.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("burst %d: solo twin: snapshot: %w", b, err)
	}
	return after.Change(before), nil
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
	b.Twin = &Twin{Solo: e.lastSolo, SoloBurst: e.soloOf, Together: after.Change(before), Noise: noise(after, quiet)}
	b.Effects = b.Twin.Together.Rows()
	b.Allowed = e.lastSolo.Rows()
	b.Required = b.Allowed
	// The example burst is the one that differs most from its twin.
	judge([]Burst{b}, 1)
	score := len(b.Twin.Diffs)
	if e.res.Example == nil || score > e.maxSeen {
		e.maxSeen = score
		e.res.Example = e.snapshot(b)
	}
	return b, nil
}

// JudgeTwins decides again, over bursts read back from a report or built
// by hand, what judgeTwins decides during a run.
func JudgeTwins(bursts []Burst) *Twins { return judgeTwins(bursts) }
