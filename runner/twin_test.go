package runner

import (
	"context"
	"fmt"
	"math/big"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// ledger is a store a Snapshotter target measures: named numbers ("grants
// rows", "accounts.balance"), changed by the attempts of a pattern.
type ledger struct {
	counter
	mu sync.Mutex
	// vals are the store's figures.
	vals map[string]int64
	// used holds each subject's flag for check-then-write.
	used map[string]bool
	// do is one attempt's action on the store, given the subject.
	do func(l *ledger, s Subject, w *Worker) Outcome
	// onSnapshot, when set, runs before each snapshot (another writer).
	onSnapshot func(l *ledger)
	snaps      int
}

func newLedger(do func(l *ledger, s Subject, w *Worker) Outcome) *ledger {
	l := &ledger{vals: map[string]int64{}, used: map[string]bool{}, do: do}
	l.effects = map[string]int{}
	l.attempt = func(_ context.Context, s Subject, w *Worker) Outcome { return l.do(l, s, w) }
	return l
}

func (l *ledger) add(k string, n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.vals[k] += n
}

func (l *ledger) get(k string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.vals[k]
}

func (l *ledger) Snapshot(context.Context) (Snapshot, error) {
	if l.onSnapshot != nil {
		l.onSnapshot(l)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.snaps++
	s := Snapshot{}
	for k, v := range l.vals {
		s[k] = big.NewRat(v, 1)
	}
	return s, nil
}

// naiveGrant checks the subject's flag, pauses, and grants: together, every
// attempt that checked before the first grant grants too.
func naiveGrant(l *ledger, s Subject, w *Worker) Outcome {
	l.mu.Lock()
	used := l.used[s.Key]
	l.mu.Unlock()
	time.Sleep(3 * time.Millisecond)
	if used {
		return Outcome{Class: Declined}
	}
	l.mu.Lock()
	l.used[s.Key] = true
	l.vals["grants rows"]++
	l.vals["grants.attempt"] += int64(w.ID)
	l.mu.Unlock()
	return Outcome{Class: Executed}
}

// casGrant checks and grants under one lock: exactly one grant.
func casGrant(l *ledger, s Subject, w *Worker) Outcome {
	time.Sleep(3 * time.Millisecond)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.used[s.Key] {
		return Outcome{Class: Declined}
	}
	l.used[s.Key] = true
	l.vals["grants rows"]++
	l.vals["grants.attempt"] += int64(w.ID)
	return Outcome{Class: Executed}
}

// lostDeposit reads the balance, pauses and writes it back plus 10.
func lostDeposit(l *ledger, _ Subject, _ *Worker) Outcome {
	b := l.get("accounts.balance")
	time.Sleep(3 * time.Millisecond)
	l.mu.Lock()
	l.vals["accounts.balance"] = b + 10
	l.mu.Unlock()
	return Outcome{Class: Executed}
}

func runTwins(t *testing.T, l *ledger, opts ...Option) *Result {
	t.Helper()
	opts = append([]Option{Attempts(4), Bursts(6), SoloTwins(1), Timeout(5 * time.Second)}, opts...)
	res, err := Run(context.Background(), l, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if res.Twins == nil {
		t.Fatal("a run with solo twins has no Twins")
	}
	return res
}

func TestSoloTwinFindsTheExtraRows(t *testing.T) {
	l := newLedger(naiveGrant)
	res := runTwins(t, l)
	if res.Violations() == 0 {
		t.Fatalf("no burst differed from its solo twin: %+v", res.Bursts[0].Twin)
	}
	for _, b := range res.Bursts {
		if !b.Violated() {
			continue
		}
		if b.Lost() {
			t.Errorf("burst %d is both RACE and LOST", b.Index)
		}
		if got := b.Twin.Solo["grants rows"]; got.Cmp(big.NewRat(1, 1)) != 0 {
			t.Errorf("burst %d: the solo twin granted %s, want 1", b.Index, got.RatString())
		}
		if len(b.Twin.Diffs) == 0 || b.Twin.Diffs[0].Key != "grants rows" {
			t.Errorf("burst %d: diffs %v, want grants rows", b.Index, b.Twin.Diffs)
		}
		if b.Effects <= b.Allowed || b.Allowed != 1 {
			t.Errorf("burst %d: effects %d allowed %d: want the rows together over the solo's 1", b.Index, b.Effects, b.Allowed)
		}
		if !strings.Contains(b.Twin.Diffs[0].String(), "`grants`: +1 row solo, +") {
			t.Errorf("diff reads %q", b.Twin.Diffs[0])
		}
	}
	// The attempt column records which attempt won: it depends on the
	// order, which the first two twins share, so it does not change with
	// every run and is compared (a serial order explains it or not).
	if len(res.Twins.Varying) != 0 {
		t.Errorf("varying %v, want none", res.Twins.Varying)
	}
	if res.Twins.Solos != 6 || res.Twins.Reason() != "" {
		t.Errorf("solos %d (want 6), reason %q", res.Twins.Solos, res.Twins.Reason())
	}
	if res.Example == nil || !res.Example.Twin {
		t.Error("the example burst of a twin run is not marked as judged by its twin")
	}
	// Every violation equals no serial run, so each was replayed in the
	// order its attempts completed, and differs from that too.
	replays := 0
	for _, b := range res.Bursts {
		if len(b.Twin.Replays) == 0 && b.Violated() {
			t.Errorf("burst %d violated without a replay", b.Index)
		}
		if len(b.Twin.Replays) > MaxReplays+1 {
			t.Errorf("burst %d replayed %d times, more than MaxReplays and the repeat", b.Index, len(b.Twin.Replays))
		}
		replays += len(b.Twin.Replays)
	}
	if res.Twins.Replays != replays || replays < res.Violations() {
		t.Errorf("Twins.Replays %d, replays %d, violations %d", res.Twins.Replays, replays, res.Violations())
	}
	// Solo twin, burst, replay: 2 + 3 + 2 snapshots each.
	if want := 6*5 + 2*replays; l.snaps != want {
		t.Errorf("%d snapshots, want %d", l.snaps, want)
	}
}

func TestSoloTwinSameChangeIsNoViolation(t *testing.T) {
	res := runTwins(t, newLedger(casGrant))
	if res.Violations() != 0 || res.Lost() != 0 {
		t.Fatalf("violations %d lost %d on a compare-and-set", res.Violations(), res.Lost())
	}
	for _, b := range res.Bursts {
		if b.Twin.Verdict != TwinSame {
			t.Errorf("burst %d: %s, want same", b.Index, b.Twin.Verdict)
		}
		if !b.TookEffect() {
			t.Errorf("burst %d took no effect", b.Index)
		}
	}
	if res.Tested() == 0 {
		t.Error("no burst tested")
	}
}

func TestSoloTwinFindsTheLostUpdate(t *testing.T) {
	res := runTwins(t, newLedger(lostDeposit))
	if res.Lost() == 0 || res.Violations() != 0 {
		t.Fatalf("lost %d, violations %d: want LOST only", res.Lost(), res.Violations())
	}
	b := res.Bursts[0]
	if got := b.Twin.Solo["accounts.balance"]; got.Cmp(big.NewRat(40, 1)) != 0 {
		t.Errorf("solo change %s, want +40", got.RatString())
	}
	if !b.TookEffect() {
		t.Error("a burst that changed a balance took no effect")
	}
}

func TestSoloTwinsThatDisagreeJudgeNothing(t *testing.T) {
	n := 0
	l := newLedger(func(l *ledger, s Subject, w *Worker) Outcome {
		n++ // serial in the solo twins, where it matters
		l.add("grants rows", int64(1+n%3))
		return Outcome{Class: Executed}
	})
	res := runTwins(t, l, Attempts(1))
	if !strings.Contains(res.Twins.Reason(), "solo runs differ") {
		t.Fatalf("reason %q", res.Twins.Reason())
	}
	for _, b := range res.Bursts {
		if b.Twin.Verdict != TwinUnjudged || b.Violated() || b.Lost() || b.Tested() {
			t.Errorf("burst %d judged %s", b.Index, b.Twin.Verdict)
		}
	}
}

func TestAnotherWriterMakesBurstsUnjudged(t *testing.T) {
	l := newLedger(casGrant)
	l.onSnapshot = func(l *ledger) { l.add("audit rows", 1) }
	res := runTwins(t, l)
	if res.Twins.Noisy != 6 || !strings.Contains(res.Twins.Reason(), "another writer") ||
		!strings.Contains(res.Twins.Reason(), "`audit` +1") {
		t.Fatalf("noisy %d, reason %q", res.Twins.Noisy, res.Twins.Reason())
	}
	if res.Tested() != 0 {
		t.Error("a burst with another writer was tested")
	}
}

func TestSoloEverySharesTheLatestTwin(t *testing.T) {
	l := newLedger(casGrant)
	res := runTwins(t, l, SoloTwins(3), Bursts(7))
	want := []int{0, 0, 0, 3, 3, 3, 6}
	for i, b := range res.Bursts {
		if b.Twin.SoloBurst != want[i] {
			t.Errorf("burst %d compared with the twin of %d, want %d", i, b.Twin.SoloBurst, want[i])
		}
	}
	if res.Twins.Solos != 3 {
		t.Errorf("%d solo twins, want 3", res.Twins.Solos)
	}
	// 3 twins × 2 snapshots + 7 bursts × 3, and 2 for each burst whose
	// winner no solo twin's order had first, replayed.
	if want := 3*2 + 7*3 + 2*res.Twins.Replays; l.snaps != want {
		t.Errorf("%d snapshots, want %d", l.snaps, want)
	}
	if res.Violations() != 0 || res.Lost() != 0 || res.Tested() != 7 {
		t.Errorf("a compare-and-set: violations %d, lost %d, tested %d of 7", res.Violations(), res.Lost(), res.Tested())
	}
}

func TestSoloTwinsNeedASnapshotter(t *testing.T) {
	_, err := Run(context.Background(), newCounter(), SoloTwins(1))
	if err == nil || !strings.Contains(err.Error(), "measure its store") {
		t.Fatalf("err %v", err)
	}
	if err := (&Config{Attempts: 1, Bursts: 1, Replicas: 1, Waves: 1, Allowed: 1, SoloEvery: -1}).Validate(); err == nil {
		t.Fatal("SoloEvery -1 accepted")
	}
	if err := (&Config{Attempts: 1, Bursts: 1, Replicas: 1, Waves: 1, Allowed: 1, SoloEvery: 0}).Validate(); err != nil {
		t.Fatal(err)
	}
}

func rat(n int64) *big.Rat { return big.NewRat(n, 1) }

func TestJudgeTwins(t *testing.T) {
	solo := Delta{"t rows": rat(1), "t.qty": rat(-5)}
	cases := []struct {
		name     string
		together Delta
		want     TwinVerdict
		diffs    int
	}{
		{"same", Delta{"t rows": rat(1), "t.qty": rat(-5)}, TwinSame, 0},
		{"more rows", Delta{"t rows": rat(3), "t.qty": rat(-5)}, TwinMore, 1},
		{"larger decrease", Delta{"t rows": rat(1), "t.qty": rat(-7)}, TwinMore, 1},
		{"smaller decrease", Delta{"t rows": rat(1), "t.qty": rat(-4)}, TwinFewer, 1},
		{"fewer rows", Delta{"t.qty": rat(-5)}, TwinFewer, 1},
		{"the other way", Delta{"t rows": rat(1), "t.qty": rat(5)}, TwinMore, 1},
		{"fewer and more", Delta{"t rows": rat(0), "t.qty": rat(-9)}, TwinMore, 2},
		{"a new key", Delta{"t rows": rat(1), "t.qty": rat(-5), "u rows": rat(1)}, TwinMore, 1},
	}
	for _, c := range cases {
		bs := []Burst{{Twin: &Twin{Solo: solo, Together: c.together}}}
		judge(bs, 1)
		if got := bs[0].Twin.Verdict; got != c.want || len(bs[0].Twin.Diffs) != c.diffs {
			t.Errorf("%s: %s with %d diffs, want %s with %d", c.name, got, len(bs[0].Twin.Diffs), c.want, c.diffs)
		}
	}
}

func TestJudgeTwinsSetsAsideWhatVaries(t *testing.T) {
	bs := []Burst{
		{Index: 0, Twin: &Twin{SoloBurst: 0, Solo: Delta{"t rows": rat(1), "t.who": rat(0)}, Together: Delta{"t rows": rat(1), "t.who": rat(3)}}},
		{Index: 1, Twin: &Twin{SoloBurst: 1, Solo: Delta{"t rows": rat(1), "t.who": rat(1)}, Together: Delta{"t rows": rat(1), "t.who": rat(2)}}},
	}
	tw := judgeTwins(bs)
	if len(tw.Varying) != 1 || tw.Disagree != "" {
		t.Fatalf("varying %v disagree %q", tw.Varying, tw.Disagree)
	}
	for _, b := range bs {
		if b.Twin.Verdict != TwinSame {
			t.Errorf("burst %d: %s", b.Index, b.Twin.Verdict)
		}
	}
	// Rows that differ between twins judge nothing.
	bs[1].Twin.Solo = Delta{"t rows": rat(2)}
	tw = judgeTwins(bs)
	if !strings.Contains(tw.Disagree, "`t`: +1 rows in one, +2 rows in another") {
		t.Errorf("disagree %q", tw.Disagree)
	}
	if bs[0].Twin.Verdict != TwinUnjudged {
		t.Errorf("burst 0: %s", bs[0].Twin.Verdict)
	}
	// The same twin twice is not a disagreement, but one twin judges
	// nothing.
	bs[1].Twin.SoloBurst = 0
	bs[1].Twin.Solo = bs[0].Twin.Solo
	if tw = judgeTwins(bs); tw.Disagree != "" || tw.Solos != 1 || !strings.Contains(tw.Reason(), "only 1 solo twin ran") {
		t.Errorf("one twin: disagree %q solos %d reason %q", tw.Disagree, tw.Solos, tw.Reason())
	}
	if bs[0].Twin.Verdict != TwinUnjudged {
		t.Errorf("one twin judged %s", bs[0].Twin.Verdict)
	}
	if judge(bs, 1); bs[0].Twin.Verdict != TwinMore {
		t.Errorf("judged with one twin allowed: %s", bs[0].Twin.Verdict)
	}
}

// Exactly MinSolos solo twins judge: two twins that agree show the
// application does the same thing twice, and a burst that granted more
// than its twin is a violation, with no reason to set the run aside
// (issue 48: at <= every run of two twins read INCONCLUSIVE, RACE too).
func TestExactlyTwoSoloTwinsJudge(t *testing.T) {
	solo := Delta{"t rows": rat(1)}
	bs := []Burst{
		{Index: 0, Twin: &Twin{SoloBurst: 0, Solo: solo, Together: Delta{"t rows": rat(3)}}},
		{Index: 1, Twin: &Twin{SoloBurst: 1, Solo: solo, Together: Delta{"t rows": rat(1)}}},
	}
	tw := judgeTwins(bs)
	if tw.Solos != MinSolos || MinSolos != 2 {
		t.Fatalf("%d solo twins (MinSolos %d), want 2", tw.Solos, MinSolos)
	}
	if why := tw.Reason(); why != "" {
		t.Errorf("two agreeing solo twins set the run aside: %q", why)
	}
	if bs[0].Twin.Verdict != TwinMore || !bs[0].Violated() {
		t.Errorf("burst 0 granted 3 rows beside its twin's 1: %s, violated %v", bs[0].Twin.Verdict, bs[0].Violated())
	}
	if bs[1].Twin.Verdict != TwinSame {
		t.Errorf("burst 1 did as its twin: %s", bs[1].Twin.Verdict)
	}
}

func TestDeltaAndSigned(t *testing.T) {
	before := Snapshot{"a rows": rat(2), "gone rows": rat(3), "a.x": big.NewRat(3, 2)}
	after := Snapshot{"a rows": rat(2), "new rows": rat(1), "a.x": big.NewRat(1, 1)}
	d := after.Change(before)
	if got := strings.Join(d.Keys(), ","); got != "a.x,gone rows,new rows" {
		t.Fatalf("keys %s", got)
	}
	if Signed(d["a.x"]) != "-0.5" || Signed(d["gone rows"]) != "-3" || Signed(d["new rows"]) != "+1" || Signed(nil) != "0" {
		t.Errorf("signed: %s %s %s", Signed(d["a.x"]), Signed(d["gone rows"]), Signed(d["new rows"]))
	}
	if d.Rows() != 4 {
		t.Errorf("rows %d, want 4", d.Rows())
	}
	if got := (TwinDiff{Key: "t.qty", Solo: rat(-5), Together: rat(-7)}).String(); got != "`t.qty` (sum): -5 solo, -7 together" {
		t.Errorf("diff %q", got)
	}
	if got := (TwinDiff{Key: "t rows", Solo: rat(2), Together: rat(7)}).String(); got != "`t`: +2 rows solo, +7 together" {
		t.Errorf("diff %q", got)
	}
}

// soloLedger makes its twins' subjects apart, as an HTTP target does.
type soloLedger struct {
	*ledger
	solo, reset []int
	effects     int
}

func (l *soloLedger) ResetSolo(_ context.Context, b int) (Subject, error) {
	l.solo = append(l.solo, b)
	return Subject{Burst: b, Key: "solo"}, nil
}

func (l *soloLedger) Reset(ctx context.Context, b int) (Subject, error) {
	l.reset = append(l.reset, b)
	return l.ledger.Reset(ctx, b)
}

func (l *soloLedger) Effects(ctx context.Context, s Subject) (int, error) {
	l.effects++
	return 99, nil
}

func TestSoloTwinSubjectsComeFromResetSolo(t *testing.T) {
	l := &soloLedger{ledger: newLedger(casGrant)}
	res, err := Run(context.Background(), l, Attempts(3), Bursts(3), SoloTwins(2))
	if err != nil {
		t.Fatal(err)
	}
	// Twins past every burst a run may fire (2 × 3 with TopUp), replays
	// past every twin (4 × 3 on), a burst's later replays past its earlier
	// ones (2 × 3 apart).
	want := []int{6, 8}
	for _, b := range res.Bursts {
		for k := range b.Twin.Replays {
			want = append(want, 12+b.Index+k*6)
		}
	}
	sort.Ints(l.solo)
	sort.Ints(want)
	if fmt.Sprint(l.solo) != fmt.Sprint(want) {
		t.Errorf("solo subjects %v, want %v", l.solo, want)
	}
	if len(l.reset) != 3 {
		t.Errorf("resets %v, want the 3 bursts only", l.reset)
	}
	// Effects is called for each burst, and its count is not the verdict.
	if l.effects != 3 {
		t.Errorf("Effects called %d times, want 3", l.effects)
	}
	for _, b := range res.Bursts {
		if b.Effects == 99 {
			t.Errorf("burst %d took the Effects count", b.Index)
		}
	}
}

func TestNoSoloTwinsWithoutSoloEvery(t *testing.T) {
	l := newLedger(casGrant)
	res, err := Run(context.Background(), l, Attempts(2), Bursts(2))
	if err != nil {
		t.Fatal(err)
	}
	if l.snaps != 0 || res.Twins != nil || res.Bursts[0].Twin != nil || res.Example.Twin {
		t.Errorf("a run without SoloEvery took %d snapshots", l.snaps)
	}
}

// parLedger says the server ran the burst's attempts one at a time.
type parLedger struct{ *ledger }

func (parLedger) ServerParallelism(Subject) float64 { return 1 }

func TestATwinBurstServedOneAtATimeIsUntested(t *testing.T) {
	res, err := Run(context.Background(), parLedger{newLedger(naiveGrant)}, Attempts(4), Bursts(3), SoloTwins(1))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range res.Bursts {
		if b.ServerParallelism != 1 || b.Tested() {
			t.Errorf("burst %d: server parallelism %v, tested %v", b.Index, b.ServerParallelism, b.Tested())
		}
	}
}

func TestTookEffectInATwinBurst(t *testing.T) {
	b := Burst{Effects: 5, Overlap: 2, Twin: &Twin{Verdict: TwinSame, Together: Delta{}}}
	b.Outcomes[Executed] = 2
	if b.TookEffect() || b.Tested() {
		t.Error("a burst that changed nothing took effect (its Effects count is not what a twin burst is judged by)")
	}
	b.Twin.Together = Delta{"t rows": rat(1)}
	if !b.TookEffect() || !b.Tested() {
		t.Error("a judged burst that changed the store did not take effect")
	}
	b.Twin.Verdict = TwinUnjudged
	if b.TookEffect() {
		t.Error("an unjudged burst took effect")
	}
	b.Twin = nil
	if !b.TookEffect() {
		t.Error("a counted burst with 5 effects did not take effect")
	}
}

// invLedger is a ledger with one invariant, broken (twice) by burst bad
// only: Broken's second call for a subject is its reading after the burst.
type invLedger struct {
	*ledger
	bad   int
	calls map[string]int
}

func (l *invLedger) Invariants() []string { return []string{"stock never below 0"} }
func (l *invLedger) Broken(_ context.Context, s Subject) ([]int, error) {
	l.calls[s.Key]++
	if l.calls[s.Key] > 1 && s.Burst == l.bad {
		return []int{2}, nil
	}
	return []int{0}, nil
}

// A twin run still checks its invariants: a burst that changed the store
// as its twin did but broke an invariant is a violation, and the example.
func TestTwinRunChecksInvariants(t *testing.T) {
	l := &invLedger{ledger: newLedger(casGrant), bad: 3, calls: map[string]int{}}
	res, err := Run(context.Background(), l, Attempts(4), Bursts(6), SoloTwins(1), Timeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if res.Violations() != 1 {
		t.Fatalf("%d violations, want 1: burst 3 broke the invariant", res.Violations())
	}
	b := res.Bursts[3]
	if !b.Violated() || !b.BrokeInvariant() || b.Twin.Verdict != TwinSame {
		t.Errorf("burst 3: violated %v, broke %v, twin %s: want violated by the invariant beside the same change", b.Violated(), b.BrokeInvariant(), b.Twin.Verdict)
	}
	if res.Example == nil || res.Example.Burst != 3 || !res.Example.Twin {
		t.Errorf("example %+v, want burst 3 (the first to break an invariant), marked as a twin burst", res.Example)
	}
	if l.calls["k3"] != 2 {
		t.Errorf("burst 3's invariant read %d times, want before and after", l.calls["k3"])
	}
}

func TestTwinVerdictOrBrokenInvariant(t *testing.T) {
	b := Burst{Effects: 5, Allowed: 1, Twin: &Twin{Verdict: TwinSame}}
	if b.Violated() {
		t.Error("a twin burst was judged by its counted effects")
	}
	b.Broken = []int{1}
	if !b.Violated() {
		t.Error("a twin burst that broke an invariant is no violation")
	}
	b.Broken, b.Twin.Verdict = nil, TwinMore
	if !b.Violated() {
		t.Error("a twin burst that changed more than its twin is no violation")
	}
}

// replicaLedger is a ledger whose replicas each keep their own memory of
// the subjects they granted (memory-set's guard): its sessions know their
// replica from Open, not from the worker.
type replicaLedger struct{ *ledger }

func (r replicaLedger) Open(_ context.Context, replica, _ int) (App, error) {
	return replicaApp{r.ledger, replica}, nil
}

type replicaApp struct {
	l       *ledger
	replica int
}

func (a replicaApp) Session(context.Context, int) (Session, error) { return a, nil }
func (replicaApp) Close() error                                    { return nil }
func (a replicaApp) Attempt(_ context.Context, s Subject, _ *Worker) Outcome {
	key := fmt.Sprint("r", a.replica, "/", s.Key)
	a.l.mu.Lock()
	defer a.l.mu.Unlock()
	if a.l.used[key] {
		return Outcome{Class: Declined}
	}
	a.l.used[key] = true
	a.l.vals["grants rows"]++
	return Outcome{Class: Executed}
}

// A solo twin runs on one replica, as a team tests alone: a guard kept in
// each replica's own memory grants once alone and once per replica
// together, and only a twin on one replica shows the difference (issue 30).
func TestSoloTwinRunsOnOneReplica(t *testing.T) {
	l := replicaLedger{newLedger(nil)}
	res, err := Run(context.Background(), l, Attempts(6), Replicas(3), Bursts(4), SoloTwins(1), Timeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range res.Bursts {
		if b.Twin == nil || b.Twin.Solo["grants rows"].Cmp(rat(1)) != 0 || b.Twin.Together["grants rows"].Cmp(rat(3)) != 0 {
			t.Fatalf("burst %d: twin %+v, want +1 grant solo (one replica) and +3 together (three)", b.Index, b.Twin)
		}
	}
	if res.Violations() != len(res.Bursts) {
		t.Errorf("%d of %d bursts violated, want every one", res.Violations(), len(res.Bursts))
	}
}

// stockShop sells worker i's quantity qty[i] from a subject's stock of 6
// units, checking and selling under one lock when guarded (a conditional
// UPDATE, or SELECT … FOR UPDATE), or checking, pausing and selling when
// not. Together, worker i reaches the shop after (n-i)×gap: the last
// worker first, the reverse of every solo twin's turned order.
func stockShop(qty []int64, gap time.Duration, guarded bool) *ledger {
	stock := map[string]int64{}
	return newLedger(func(l *ledger, s Subject, w *Worker) Outcome {
		// One at a time (a solo twin, a replay) the pause changes nothing.
		time.Sleep(time.Duration(len(qty)-w.ID) * gap)
		q := qty[w.ID]
		l.mu.Lock()
		if _, seen := stock[s.Key]; !seen {
			stock[s.Key] = 6
		}
		if stock[s.Key] < q {
			l.mu.Unlock()
			return Outcome{Class: Declined}
		}
		if !guarded {
			// Checked, then sold after a pause: the others check meanwhile.
			l.mu.Unlock()
			time.Sleep(2 * gap)
			l.mu.Lock()
		}
		stock[s.Key] -= q
		l.vals["orders rows"]++
		l.vals["stock.units"] -= q
		l.mu.Unlock()
		return Outcome{Class: Executed}
	})
}

// Correct code whose outcome depends on the order of the requests: stock
// of 6 sold in quantities 1, 2, 3, 4 sells 3 orders in the solo twins'
// turned orders (1+2+3, 2+3+1, 3+1+2) or 2 (4+1), and 2 orders of 4+2 in
// the reverse order the burst's attempts take here. Compared with its solo
// twin alone, every burst read LOST or RACE ("orders: +3 rows solo, +2
// together"), and the turned solo twins disagreed, setting the run aside;
// a serializable store leaves the change of some serial order, and the
// replay of the order the attempts completed in finds it.
func TestOrderDependentOutcomeIsSafe(t *testing.T) {
	res := runTwins(t, stockShop([]int64{1, 2, 3, 4}, 4*time.Millisecond, true))
	if res.Violations() != 0 || res.Lost() != 0 || res.Tested() != len(res.Bursts) || res.Twins.Reason() != "" {
		t.Fatalf("violations %d, lost %d, tested %d of %d, reason %q: want every burst the same as a serial order",
			res.Violations(), res.Lost(), res.Tested(), len(res.Bursts), res.Twins.Reason())
	}
	if res.Twins.Reordered == 0 || res.Twins.Replays == 0 || res.Twins.Orders < 3 {
		t.Errorf("reordered %d, replays %d, orders %d: want bursts explained by a replay, among several orders",
			res.Twins.Reordered, res.Twins.Replays, res.Twins.Orders)
	}
	for _, b := range res.Bursts {
		if len(b.Twin.Replays) > 0 && !b.Twin.Reordered {
			t.Errorf("burst %d was replayed (order %v, %v) but not explained by it: together %v", b.Index, b.Twin.Replays[0].Order, b.Twin.Replays[0].Delta, b.Twin.Together)
		}
	}
}

// The naive shop checks, pauses and sells: together every attempt passes
// the check and the stock goes below zero, which no serial order does.
func TestOrderDependentNaiveRaces(t *testing.T) {
	res := runTwins(t, stockShop([]int64{1, 2, 3, 4}, 4*time.Millisecond, false))
	if res.Violations() == 0 {
		t.Fatalf("the naive shop never oversold: %+v", res.Bursts[0].Twin)
	}
	for _, b := range res.Bursts {
		if b.Violated() && len(b.Twin.Replays) == 0 {
			t.Errorf("burst %d read RACE without its completion order replayed", b.Index)
		}
	}
}

// Transfers of 40 between two accounts of 100, alternating directions,
// each under a lock (SELECT … FOR UPDATE): every transfer is serialized,
// yet the number that succeed depends on the order (A→B three times in a
// row empties A). Compared with the solo twin alone this read LOST.
func TestAlternatingTransfersAreSafe(t *testing.T) {
	bal := map[string]*[2]int64{}
	l := newLedger(func(l *ledger, s Subject, w *Worker) Outcome {
		// Together, the transfers out of A (even workers) arrive first.
		time.Sleep(time.Duration(w.ID%2*6+w.ID/2) * time.Millisecond)
		from, to := w.ID%2, 1-w.ID%2
		l.mu.Lock()
		defer l.mu.Unlock()
		b := bal[s.Key]
		if b == nil {
			b = &[2]int64{100, 100}
			bal[s.Key] = b
		}
		if b[from] < 40 {
			return Outcome{Class: Declined}
		}
		b[from] -= 40
		b[to] += 40
		l.vals["transfers rows"]++
		l.vals["accounts.a"] += []int64{-40, 40}[from]
		return Outcome{Class: Executed}
	})
	res := runTwins(t, l, Attempts(6))
	if res.Violations() != 0 || res.Lost() != 0 || res.Tested() != len(res.Bursts) {
		t.Fatalf("violations %d, lost %d, tested %d of %d (%q): want SAFE", res.Violations(), res.Lost(), res.Tested(), len(res.Bursts), res.Twins.Reason())
	}
	if res.Twins.Reordered == 0 {
		t.Error("no burst was explained by another order than its solo twin's")
	}
}

// A burst that equals a serial order other than its solo twin's is the
// same; one that equals none differs from its replay, not from its twin.
func TestJudgeAgainstSerialOrders(t *testing.T) {
	twin0 := Delta{"t rows": rat(3), "t.qty": rat(-6)}
	bs := []Burst{
		{Index: 0, Twin: &Twin{SoloBurst: 0, SoloOrder: []int{0, 1, 2}, Solo: twin0, Together: twin0}},
		{Index: 1, Twin: &Twin{SoloBurst: 1, SoloOrder: []int{0, 1, 2}, Solo: twin0, Together: Delta{"t rows": rat(2), "t.qty": rat(-6)},
			Replays: []Serial{{Order: []int{2, 1, 0}, Delta: Delta{"t rows": rat(2), "t.qty": rat(-6)}}}}},
		{Index: 2, Twin: &Twin{SoloBurst: 2, SoloOrder: []int{1, 2, 0}, Solo: Delta{"t rows": rat(2), "t.qty": rat(-5)}, Together: Delta{"t rows": rat(2), "t.qty": rat(-6)}}},
		{Index: 3, Twin: &Twin{SoloBurst: 2, SoloOrder: []int{1, 2, 0}, Solo: Delta{"t rows": rat(2), "t.qty": rat(-5)}, Together: Delta{"t rows": rat(4), "t.qty": rat(-9)},
			Replays: []Serial{{Order: []int{0, 2, 1}, Delta: Delta{"t rows": rat(3), "t.qty": rat(-6)}}}}},
	}
	tw := judgeTwins(bs)
	if tw.Disagree != "" || len(tw.Varying) != 0 || tw.Solos != 3 || tw.Replays != 2 || tw.Orders != 4 {
		t.Fatalf("twins %+v", tw)
	}
	want := []struct {
		v         TwinVerdict
		reordered bool
	}{{TwinSame, false}, {TwinSame, true}, {TwinSame, true}, {TwinMore, false}}
	for i, w := range want {
		if got := bs[i].Twin; got.Verdict != w.v || got.Reordered != w.reordered {
			t.Errorf("burst %d: %s reordered %v, want %s reordered %v", i, got.Verdict, got.Reordered, w.v, w.reordered)
		}
	}
	if tw.Reordered != 2 {
		t.Errorf("reordered %d, want 2", tw.Reordered)
	}
	// Burst 3 is shown beside its replay: rows +3 alone (not its twin's +2).
	if d := bs[3].Twin.Diffs; len(d) != 2 || d[0].Key != "t rows" || d[0].Solo.Cmp(rat(3)) != 0 {
		t.Errorf("burst 3 diffs %v, want against the replay's +3 rows", d)
	}
	// The same order twice with different rows: not deterministic, nothing
	// is judged; with different sums only, the sum is set aside.
	bs[2].Twin.SoloOrder = []int{0, 1, 2}
	bs[3].Twin.SoloOrder = []int{0, 1, 2}
	if tw = judgeTwins(bs); !strings.Contains(tw.Disagree, "the attempts in the same order") || bs[0].Twin.Verdict != TwinUnjudged {
		t.Errorf("same order, other rows: disagree %q, burst 0 %s", tw.Disagree, bs[0].Twin.Verdict)
	}
	bs[2].Twin.Solo = Delta{"t rows": rat(3), "t.qty": rat(-7)}
	bs[3].Twin.Solo = bs[2].Twin.Solo
	if tw = judgeTwins(bs); tw.Disagree != "" || fmt.Sprint(tw.Varying) != "[t.qty]" {
		t.Errorf("same order, other sums: disagree %q, varying %v", tw.Disagree, tw.Varying)
	}
}

// The orders a replay tries, from the burst's trace: completion order,
// wave after wave; those that took effect first; then one near tie (within
// TieGap) swapped at a time, at most MaxReplays orders.
func TestReplayOrders(t *testing.T) {
	ms := time.Millisecond
	tr := func(worker, wave int, done time.Duration, o Class) WorkerTrace {
		return WorkerTrace{Worker: worker, Wave: wave, Outcome: o, Marks: []Mark{{"released", 0}, {"done", done}}}
	}
	cases := []struct {
		name  string
		cur   []WorkerTrace
		waves int
		want  string
	}{
		{"apart, all executed", []WorkerTrace{tr(0, 0, 30*ms, Executed), tr(1, 0, 10*ms, Executed), tr(2, 0, 20*ms, Executed)}, 1,
			"[[1 2 0]]"},
		{"a declined one answered first", []WorkerTrace{tr(0, 0, 30*ms, Executed), tr(1, 0, 10*ms, Declined), tr(2, 0, 20*ms, Executed)}, 1,
			"[[1 2 0] [2 0 1]]"},
		{"a near tie", []WorkerTrace{tr(0, 0, 30*ms, Executed), tr(1, 0, 10*ms, Executed), tr(2, 0, 10*ms+TieGap, Executed)}, 1,
			"[[1 2 0] [2 1 0]]"},
		{"just over a tie", []WorkerTrace{tr(0, 0, 30*ms, Executed), tr(1, 0, 10*ms, Executed), tr(2, 0, 10*ms+TieGap+1, Executed)}, 1,
			"[[1 2 0]]"},
		{"ties past the most replays", []WorkerTrace{tr(0, 0, 1*ms, Declined), tr(1, 0, 2*ms, Executed), tr(2, 0, 3*ms, Executed), tr(3, 0, 4*ms, Executed), tr(4, 0, 5*ms, Executed)}, 1,
			"[[0 1 2 3 4] [1 2 3 4 0] [1 0 2 3 4] [0 2 1 3 4]]"},
		{"no tie across waves", []WorkerTrace{tr(0, 0, 5*ms, Executed), tr(1, 0, 1*ms, Executed), tr(0, 1, 1*ms, Executed), tr(1, 1, 9*ms, Executed)}, 2,
			"[[1 0 0 1]]"},
		{"effect first within each wave", []WorkerTrace{tr(0, 0, 1*ms, Declined), tr(1, 0, 9*ms, Executed), tr(0, 1, 1*ms, Declined), tr(1, 1, 9*ms, Executed)}, 2,
			"[[0 1 0 1] [1 0 1 0]]"},
	}
	for _, c := range cases {
		if got := fmt.Sprint(replayOrders(c.cur, c.waves)); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	if MaxReplays != 4 || TieGap != 2*time.Millisecond {
		t.Errorf("MaxReplays %d, TieGap %s: the docs say 4 and 2 ms", MaxReplays, TieGap)
	}
}

// The first two solo twins run the attempts in worker order (a column
// that changes with every run shows as such between them); each later
// one starts one worker later.
func TestSoloTwinOrders(t *testing.T) {
	res := runTwins(t, newLedger(casGrant), Attempts(3), Bursts(5))
	want := []string{"[0 1 2]", "[0 1 2]", "[1 2 0]", "[2 0 1]", "[0 1 2]"}
	for i, b := range res.Bursts {
		if got := fmt.Sprint(b.Twin.SoloOrder); got != want[i] {
			t.Errorf("burst %d's solo twin ran %s, want %s", i, got, want[i])
		}
	}
	res = runTwins(t, newLedger(casGrant), Attempts(2), Bursts(2), Waves(2))
	if got := fmt.Sprint(res.Bursts[1].Twin.SoloOrder); got != "[0 1 0 1]" {
		t.Errorf("two waves: the solo twin ran %s, want each wave's attempts in turn", got)
	}
}

// sessionLedger records the session (its worker) each solo attempt ran on.
type sessionLedger struct {
	*ledger
	bursts int
	mu     sync.Mutex
	used   map[int]bool
}

func (s *sessionLedger) Open(_ context.Context, replica, _ int) (App, error) {
	return sessionApp{s, replica}, nil
}

type sessionApp struct {
	s       *sessionLedger
	replica int
}

func (a sessionApp) Session(_ context.Context, worker int) (Session, error) {
	return sessionOf{a, worker}, nil
}
func (sessionApp) Close() error { return nil }

type sessionOf struct {
	a      sessionApp
	worker int
}

func (sessionOf) Close() error { return nil }

func (s sessionOf) Attempt(ctx context.Context, sub Subject, w *Worker) Outcome {
	if sub.Burst >= 2*s.a.s.bursts { // a solo twin's or a replay's subject
		s.a.s.mu.Lock()
		s.a.s.used[s.worker*10+s.a.replica] = true
		s.a.s.mu.Unlock()
	}
	return casGrant(s.a.s.ledger, sub, w)
}

// A solo twin runs each attempt on a session of replica 0, the sessions of
// replica 0's workers (0 and 3 of 6 on 3 replicas), not on one session.
func TestSoloTwinUsesReplicaZerosSessions(t *testing.T) {
	l := &sessionLedger{ledger: newLedger(nil), bursts: 2, used: map[int]bool{}}
	if _, err := Run(context.Background(), l, Attempts(6), Replicas(3), Bursts(2), SoloTwins(1), Timeout(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	var got []int
	for k := range l.used {
		got = append(got, k)
	}
	sort.Ints(got)
	// worker×10 + replica: workers 0 and 3, replica 0.
	if fmt.Sprint(got) != "[0 30]" {
		t.Errorf("solo attempts ran on sessions %v (worker×10+replica), want [0 30]", got)
	}
}

// The example burst of a twin run is the one that differs most from its
// serial runs, the first of equals, and one that broke an invariant stays.
func TestTwinExampleDiffersMost(t *testing.T) {
	l := newLedger(func(l *ledger, s Subject, w *Worker) Outcome {
		l.mu.Lock()
		defer l.mu.Unlock()
		if s.Burst < 5 && w.ID == 0 {
			// Together, burst b writes extra rows to b of the tables t0…:
			// burst 2 and 3 differ in two, burst 1 in one.
			for k := range []int{0, 0, 2, 2, 0}[s.Burst] + []int{0, 1, 0, 0, 0}[s.Burst] {
				l.vals[fmt.Sprint("t", k, " rows")]++
			}
		}
		l.vals["grants rows"]++
		return Outcome{Class: Executed}
	})
	res := runTwins(t, l, Attempts(2), Bursts(5))
	if res.Example == nil || res.Example.Burst != 2 {
		t.Errorf("example %+v, want burst 2 (the first to differ in two keys)", res.Example)
	}
}

// A value that changes from run to run (a stamp, a random pick) though
// the first two solo twins happened to agree on it: the burst that
// differs in it alone is replayed, its completion order once more, and
// the value, different between the two runs of one order, is set aside,
// not read as the burst's difference.
func TestReplayRepeatSetsAsideWhatChangesEveryRun(t *testing.T) {
	grants := 0
	l := newLedger(func(l *ledger, s Subject, w *Worker) Outcome {
		// Together the last worker arrives first: the burst's orders are
		// none of the solo twins'.
		time.Sleep(time.Duration(6-w.ID) * time.Millisecond)
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.used[s.Key] {
			return Outcome{Class: Declined}
		}
		l.used[s.Key] = true
		l.vals["grants rows"]++
		// The same in the two solo twins (subjects 4 and 5 of 2 bursts)
		// and the first burst; another in every later run.
		stamp := int64(5)
		if s.Burst != 4 && s.Burst != 5 && s.Burst != 0 {
			stamp = int64(100 + grants)
		}
		grants++
		l.vals["grants.stamp"] += stamp
		return Outcome{Class: Executed}
	})
	res := runTwins(t, l, Attempts(6), Bursts(2))
	if res.Violations() != 0 || res.Lost() != 0 {
		t.Fatalf("violations %d, lost %d: the stamp read as the bursts' difference", res.Violations(), res.Lost())
	}
	if fmt.Sprint(res.Twins.Varying) != "[grants.stamp]" {
		t.Errorf("varying %v, want the stamp", res.Twins.Varying)
	}
	rs := res.Bursts[1].Twin.Replays
	if len(rs) < 2 || fmt.Sprint(rs[len(rs)-1].Order) != fmt.Sprint(rs[0].Order) {
		t.Errorf("burst 1's replays %v: want its completion order run again last", rs)
	}
}

// A burst that changed less than its reference is LOST only when its
// attempts' answers do not explain it: when some executed, but fewer than
// did one at a time, the others were turned away together and not alone
// (a rate limiter), and the burst is unjudged, never LOST.
func TestJudgeTurnedAwayIsUnjudged(t *testing.T) {
	solo := Delta{"hits rows": rat(3)}
	cases := []struct {
		name             string
		together         Delta
		executed, soloEx int
		replay           *Serial
		want             TwinVerdict
		turned           bool
	}{
		{"one of three", Delta{"hits rows": rat(1)}, 1, 3, nil, TwinUnjudged, true},
		{"two of three", Delta{"hits rows": rat(2)}, 2, 3, nil, TwinUnjudged, true},
		{"none executed", Delta{}, 0, 3, nil, TwinFewer, false},
		{"as many as alone", Delta{"hits rows": rat(1)}, 3, 3, nil, TwinFewer, false},
		{"more than alone", Delta{"hits rows": rat(1)}, 4, 3, nil, TwinFewer, false},
		{"not known alone", Delta{"hits rows": rat(1)}, 1, 0, nil, TwinFewer, false},
		{"more is a race", Delta{"hits rows": rat(5)}, 1, 3, nil, TwinMore, false},
		{"the replay decides", Delta{"hits rows": rat(1)}, 1, 3, &Serial{Order: []int{1, 0}, Delta: Delta{"hits rows": rat(2)}, Executed: 1}, TwinFewer, false},
		{"the replay turns", Delta{"hits rows": rat(1)}, 1, 1, &Serial{Order: []int{1, 0}, Delta: Delta{"hits rows": rat(2)}, Executed: 2}, TwinUnjudged, true},
	}
	for _, c := range cases {
		b := Burst{Twin: &Twin{Solo: solo, SoloExecuted: c.soloEx, Together: c.together}}
		if c.replay != nil {
			b.Twin.Replays = []Serial{*c.replay}
		}
		b.Outcomes[Executed], b.Outcomes[Declined] = c.executed, max(0, 4-c.executed)
		bs := []Burst{b}
		tw := judge(bs, 1)
		got := bs[0].Twin
		if got.Verdict != c.want || got.Turned != c.turned || (tw.Turned == 1) != c.turned {
			t.Errorf("%s: %s, turned %v (%d in the run); want %s, turned %v", c.name, got.Verdict, got.Turned, tw.Turned, c.want, c.turned)
		}
		if bs[0].Lost() != (c.want == TwinFewer) {
			t.Errorf("%s: Lost() = %v", c.name, bs[0].Lost())
		}
	}
}

// A correct rate limiter (one grant per window per subject) grants every
// attempt one at a time, each attempt taking longer than the window, and
// one of a burst that arrives together: the burst changes less than its
// solo twin while fewer of its attempts executed. It read LOST; it is
// unjudged now, with the reason, and no burst is a RACE or LOST.
func TestRateLimiterIsNeitherLostNorRace(t *testing.T) {
	const window = 60 * time.Millisecond
	last := map[string]time.Time{}
	l := newLedger(func(l *ledger, s Subject, _ *Worker) Outcome {
		l.mu.Lock()
		now := time.Now()
		if t, ok := last[s.Key]; ok && now.Sub(t) < window {
			l.mu.Unlock()
			return Outcome{Class: Declined}
		}
		last[s.Key] = now
		l.vals["hits rows"]++
		l.mu.Unlock()
		time.Sleep(window + 5*time.Millisecond)
		return Outcome{Class: Executed}
	})
	res := runTwins(t, l, Bursts(3))
	if res.Lost() != 0 || res.Violations() != 0 {
		t.Fatalf("lost %d, violations %d: a correct rate limiter read LOST or RACE", res.Lost(), res.Violations())
	}
	if res.Twins.Turned == 0 {
		t.Fatalf("no burst was turned away together: %+v", res.Bursts[0].Twin)
	}
	for _, b := range res.Bursts {
		if b.Twin.Turned && b.Tested() {
			t.Errorf("burst %d was turned away and still counts as tested", b.Index)
		}
	}
}
