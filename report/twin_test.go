package report

import (
	"bytes"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/racetest/racetest/runner"
)

func rat(n int64) *big.Rat { return big.NewRat(n, 1) }

// twinCase is a run of 4 bursts judged by solo twins: each burst's change
// is given as grant rows and a qty sum; the solo twin granted 1 and took 5.
func twinCase(together func(i int) runner.Delta) Case {
	r := &runner.Result{Attempts: 8, Allowed: 1, Required: 1, Planned: 4, Errors: map[string]int{}}
	for i := range 4 {
		tw := &runner.Twin{SoloBurst: i, Solo: runner.Delta{"grants rows": rat(1), "stock.qty": rat(-5), "grants.who": rat(int64(i))}, Together: together(i)}
		b := runner.Burst{Index: i, Overlap: 8, Twin: tw}
		b.Outcomes[runner.Executed], b.Outcomes[runner.Declined] = 1, 7
		r.Bursts = append(r.Bursts, b)
	}
	r.Twins = runner.JudgeTwins(r.Bursts)
	return Case{Name: "redeem.sql", Scenario: "script", Backend: "postgres", Expect: Expect{Kind: ExpectSafe}, Result: r}
}

func same(i int) runner.Delta {
	return runner.Delta{"grants rows": rat(1), "stock.qty": rat(-5), "grants.who": rat(int64(3 - i))}
}

func TestTwinVerdicts(t *testing.T) {
	race := twinCase(func(i int) runner.Delta {
		d := same(i)
		if i == 2 {
			d["grants rows"] = rat(7)
		}
		return d
	})
	a := Assess(race)
	if a.Verdict != Race || a.Violations != 1 || a.Met {
		t.Fatalf("race: %+v", a)
	}
	lost := twinCase(func(i int) runner.Delta {
		d := same(i)
		if i == 1 {
			d["stock.qty"] = rat(-2)
		}
		return d
	})
	if a := Assess(lost); a.Verdict != Lost || a.Violations != 1 || a.Why != "expected SAFE, but 1 of 4 bursts changed the database less than the same attempts did one at a time" {
		t.Fatalf("lost: %+v", a)
	}
	safe := twinCase(same)
	if a := Assess(safe); a.Verdict != Safe || a.Tested != 4 {
		t.Fatalf("safe: %+v", a)
	}
	safe.Expect = Expect{Kind: ExpectRace}
	if a := Assess(safe); a.Met || !strings.HasPrefix(a.Why, "expected RACE, but no burst of 4 changed the database more than the same attempts one at a time") {
		t.Fatalf("safe, expected race: %+v", a)
	}
	noisy := twinCase(same)
	noisy.Result.Bursts[3].Twin.Noise = []string{"`audit` +1"}
	noisy.Result.Twins = runner.JudgeTwins(noisy.Result.Bursts)
	if a := Assess(noisy); a.Verdict != Inconclusive || !strings.Contains(a.Why, "another writer") {
		t.Fatalf("noisy: %+v", a)
	}
	// Another writer makes even a run with a violation inconclusive.
	noisyRace := twinCase(func(i int) runner.Delta {
		d := same(i)
		d["grants rows"] = rat(7)
		return d
	})
	noisyRace.Result.Bursts[0].Twin.Noise = []string{"`audit` +1"}
	noisyRace.Result.Twins = runner.JudgeTwins(noisyRace.Result.Bursts)
	if a := Assess(noisyRace); a.Verdict != Inconclusive {
		t.Fatalf("noisy race: %+v", a)
	}
}

func TestTwinTableShowsBothChanges(t *testing.T) {
	c := twinCase(func(i int) runner.Delta {
		d := same(i)
		if i == 2 {
			d["grants rows"] = rat(7)
			d["stock.qty"] = rat(-7)
		}
		return d
	})
	var out bytes.Buffer
	if err := Table(&out, []Case{c}, Options{Width: 300}); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"1 of 4 bursts changed the database more than the same attempts did one at a time; burst 2: `grants`: +1 row solo, +7 together; `stock.qty` (sum): -5 solo, -7 together",
		"burst 2 beside its solo twin (the same 8 attempts one at a time, before burst 2):",
		"grants (rows)       +1        +7  ← differs",
		"grants.who (sum)    +2        +1  (not compared)",
		"stock.qty (sum)     -5        -7  ← differs",
		"expected SAFE, but 1 of 4 bursts changed the database more than the same attempts did one at a time\n",
		"not compared: grants.who",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
	var h bytes.Buffer
	if err := HTML(&h, []Case{c}, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.String(), `<pre class="twin">burst 2 beside its solo twin`) {
		t.Error("the HTML page lacks the side-by-side changes")
	}
}

func TestTwinSafeAndLostLines(t *testing.T) {
	var out bytes.Buffer
	if err := Table(&out, []Case{twinCase(same)}, Options{Width: 200}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "0 of 4 tested bursts changed the database otherwise than the same attempts one at a time (4 solo twins compared)") {
		t.Errorf("safe table:\n%s", out.String())
	}
	lost := twinCase(func(i int) runner.Delta {
		d := same(i)
		d["stock.qty"] = rat(-2)
		return d
	})
	out.Reset()
	if err := Table(&out, []Case{lost}, Options{Width: 200}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "4 of 4 bursts changed the database less than the same attempts did one at a time, while an attempt claimed it done; burst 0: `stock.qty` (sum): -5 solo, -2 together") {
		t.Errorf("lost table:\n%s", out.String())
	}
}

func TestTwinJSONRoundTrip(t *testing.T) {
	c := twinCase(func(i int) runner.Delta {
		d := same(i)
		if i == 2 {
			d["grants rows"] = rat(7)
		}
		d["stock.qty"] = big.NewRat(-11, 2)
		return d
	})
	var saved bytes.Buffer
	if err := JSON(&saved, []Case{c}, Options{Version: "test"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(saved.String(), `"solo_twins"`) || !strings.Contains(saved.String(), `"grants rows": "7"`) {
		t.Fatalf("json lacks the twins:\n%s", saved.String())
	}
	doc, err := ReadDocument(bytes.NewReader(saved.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	again, err := doc.Cases()
	if err != nil {
		t.Fatal(err)
	}
	a, b := Assess(c), Assess(again[0])
	if a.Verdict != b.Verdict || a.Violations != b.Violations || a.Tested != b.Tested {
		t.Fatalf("re-read %+v, want %+v", b, a)
	}
	var t1, t2 bytes.Buffer
	_ = Table(&t1, []Case{c}, Options{Width: 120})
	_ = Table(&t2, again, Options{Width: 120})
	if t1.String() != t2.String() {
		t.Errorf("the re-read table differs:\n%s\nwant\n%s", t2.String(), t1.String())
	}
	bad := strings.Replace(saved.String(), `"verdict": "more"`, `"verdict": "bigger"`, 1)
	if doc, err := ReadDocument(strings.NewReader(bad)); err == nil {
		if _, err := doc.Cases(); err == nil {
			t.Error("an unknown twin verdict was read")
		}
	}
}

// A twin run's bursts that changed nothing watched tested nothing, and the
// reason says so beside issue 25's causes.
func TestTwinBurstsThatChangedNothingAreUntested(t *testing.T) {
	c := twinCase(func(int) runner.Delta { return runner.Delta{} })
	for i := range c.Result.Bursts {
		c.Result.Bursts[i].Twin.Solo = runner.Delta{}
	}
	c.Result.Twins = runner.JudgeTwins(c.Result.Bursts)
	a := Assess(c)
	want := "only 0 of 4 bursts put the guard to the test (need 50%): 0 executed nothing, 0 never had two attempts in flight at once, 0 had fewer than two answered attempts, 4 changed nothing that racetest watches (in a run judged by solo twins)"
	if a.Verdict != Inconclusive || a.Why != want {
		t.Errorf("got %s %q\nwant INCONCLUSIVE %q", a.Verdict, a.Why, want)
	}
}

// A twin run whose bursts changed the store as their twins did, but broke
// an invariant, is a RACE named after the invariant, not after the twins.
func TestTwinRunWithABrokenInvariant(t *testing.T) {
	c := twinCase(same)
	c.Result.Invariants = []string{"stock never below 0"}
	for i := range c.Result.Bursts {
		c.Result.Bursts[i].Broken = []int{0}
	}
	c.Result.Bursts[1].Broken = []int{2}
	a := Assess(c)
	want := "expected SAFE, but invariant stock never below 0 broken after 1 of 4 bursts (at most 2 violations)"
	if a.Verdict != Race || a.Violations != 1 || a.Why != want {
		t.Fatalf("got %s (%d) %q\nwant RACE %q", a.Verdict, a.Violations, a.Why, want)
	}
	var buf strings.Builder
	if err := Table(&buf, []Case{c}, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "invariant stock never below 0 broken after 1 of 4 bursts") {
		t.Errorf("the details do not name the broken invariant:\n%s", buf.String())
	}
}

// The burst a twin run shows is its worst: a violation before a burst
// that did as its twin, and of two violations the one with more keys
// that differ, even one that only broke an invariant (no key differs)
// over a burst that did as its twin; with no violation, the first
// burst compared. A burst that changed less while no attempt claimed
// anything (not LOST) is no violation, however many keys differ.
func TestWorstTwinIsTheWorstBurst(t *testing.T) {
	diffs := func(n int) []runner.TwinDiff {
		var ds []runner.TwinDiff
		for i := range n {
			ds = append(ds, runner.TwinDiff{Key: string(rune('a'+i)) + " rows", Solo: rat(1), Together: rat(2)})
		}
		return ds
	}
	burst := func(v runner.TwinVerdict, n int) runner.Burst {
		b := runner.Burst{Twin: &runner.Twin{Verdict: v, Diffs: diffs(n)}}
		b.Outcomes[runner.Executed], b.Outcomes[runner.Declined] = 1, 3
		return b
	}
	broken := burst(runner.TwinSame, 0)
	broken.Broken = []int{1}
	quiet := burst(runner.TwinFewer, 3)
	quiet.Outcomes = [runner.NumClasses]int{runner.Error: 4} // claimed nothing: not LOST
	for _, tc := range []struct {
		name   string
		bursts []runner.Burst
		want   int
	}{
		{"two that did as their twins", []runner.Burst{burst(runner.TwinSame, 0), burst(runner.TwinSame, 0)}, 0},
		{"the violations, the one with more keys", []runner.Burst{burst(runner.TwinSame, 0), burst(runner.TwinMore, 1), burst(runner.TwinMore, 2), burst(runner.TwinSame, 0)}, 2},
		{"an invariant broken", []runner.Burst{burst(runner.TwinSame, 0), broken}, 1},
		{"less, claimed by nobody", []runner.Burst{burst(runner.TwinMore, 1), quiet}, 0},
	} {
		for i := range tc.bursts {
			tc.bursts[i].Index = i
		}
		if w := worstTwin(&runner.Result{Bursts: tc.bursts}); w == nil || w.Index != tc.want {
			t.Errorf("%s: worst %+v, want burst %d", tc.name, w, tc.want)
		}
	}
}

// Only a run whose twins set keys aside says it did.
func TestTwinNotesOnlyWhatWasSetAside(t *testing.T) {
	if lines := twinNotes(&runner.Result{Twins: &runner.Twins{Solos: 2}}); len(lines) != 0 {
		t.Errorf("nothing set aside: %q", lines)
	}
	if lines := twinNotes(&runner.Result{Twins: &runner.Twins{Solos: 2, Varying: []string{"grants.who"}}}); len(lines) != 1 || !strings.Contains(lines[0], "not compared: grants.who") {
		t.Errorf("grants.who set aside: %q", lines)
	}
}

// The one-line headline (-q, suite, JUnit) and the Markdown row of a run
// judged by solo twins say so, with the difference that decided it: not
// "over 1 effect" and "8 effects", counts that judged nothing.
func TestTwinHeadlineAndMarkdownSayWhatJudged(t *testing.T) {
	race := twinCase(func(i int) runner.Delta {
		d := same(i)
		if i == 2 {
			d["grants rows"] = rat(7)
		}
		return d
	})
	race.Expect = Expect{Kind: ExpectRace}
	if h := Headline(race); !strings.Contains(h, "(1 of 4 bursts changed the database otherwise than the same attempts one at a time; burst 2: `grants`: +1 row solo, +7 together)") {
		t.Errorf("race headline: %s", h)
	}
	var md bytes.Buffer
	if err := Markdown(&md, []Case{race}, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| 1/4 | \\`grants\\`: +1 row solo, +7 together | RACE") {
		t.Errorf("race markdown:\n%s", md.String())
	}
	safe := twinCase(same)
	if h := Headline(safe); !strings.Contains(h, "(0 of 4 bursts changed the database otherwise than the same attempts one at a time)") || strings.Contains(h, "effect") {
		t.Errorf("safe headline: %s", h)
	}
	md.Reset()
	if err := Markdown(&md, []Case{safe}, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| 0/4 | as one at a time | SAFE") {
		t.Errorf("safe markdown:\n%s", md.String())
	}
}

// A run judged by its invariants alone (no effects count) says which
// invariant it held or broke, never "0 effects".
func TestUncountedHeadlineAndMarkdown(t *testing.T) {
	mk := func(broken int) Case {
		r := &runner.Result{Attempts: 4, Planned: 3, Uncounted: true, Invariants: []string{"stock >= 0"}, Errors: map[string]int{}}
		for i := range 3 {
			b := runner.Burst{Index: i, Overlap: 4, Broken: []int{0}, Unjudged: []bool{false}}
			if i == 1 {
				b.Broken[0] = broken
			}
			b.Outcomes[runner.Executed], b.Outcomes[runner.Declined] = 1, 3
			r.Bursts = append(r.Bursts, b)
		}
		return Case{Name: "buy.sql", Scenario: "script", Backend: "postgres", Expect: Expect{Kind: ExpectSafe}, Result: r}
	}
	held, broke := mk(0), mk(2)
	if h := Headline(held); !strings.Contains(h, "(0 of 3 bursts broke invariant stock >= 0)") {
		t.Errorf("held: %s", h)
	}
	broke.Expect = Expect{Kind: ExpectRace}
	if h := Headline(broke); !strings.Contains(h, "(invariant stock >= 0 broken after 1 of 3 bursts (at most 2 violations))") {
		t.Errorf("broke: %s", h)
	}
	var md bytes.Buffer
	if err := Markdown(&md, []Case{held, broke}, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| 0/3 | no invariant broken |") || !strings.Contains(md.String(), "| 1/3 | 2 violations of an invariant |") {
		t.Errorf("markdown:\n%s", md.String())
	}
}

// A burst replayed in the order its attempts completed keeps its replays
// through JSON: re-read, it is shown beside its replay, with the same
// verdict and difference, and a replay whose change is not a number is
// refused.
func TestTwinReplaysRoundTrip(t *testing.T) {
	c := twinCase(func(i int) runner.Delta {
		d := same(i)
		if i == 2 {
			d["grants rows"] = rat(7)
		}
		return d
	})
	b := &c.Result.Bursts[2]
	b.Twin.SoloOrder = []int{0, 1, 2, 3, 4, 5, 6, 7}
	b.Twin.Replays = []runner.Serial{{Order: []int{7, 6, 5, 4, 3, 2, 1, 0}, Delta: runner.Delta{"grants rows": rat(2), "stock.qty": rat(-5), "grants.who": rat(1)}}}
	c.Result.Twins = runner.JudgeTwins(c.Result.Bursts)
	if d := b.Twin.Diffs; len(d) != 1 || d[0].Solo.Cmp(rat(2)) != 0 {
		t.Fatalf("diffs %v, want against the replay's 2 rows", d)
	}
	back, json := reread(t, c)
	again := []Case{back}
	saved := bytes.NewBuffer(json)
	tw := again[0].Result.Bursts[2].Twin
	if len(tw.Replays) != 1 || fmt.Sprint(tw.Replays[0].Order) != "[7 6 5 4 3 2 1 0]" || fmt.Sprint(tw.SoloOrder) != "[0 1 2 3 4 5 6 7]" {
		t.Fatalf("re-read twin: replays %+v, solo order %v", tw.Replays, tw.SoloOrder)
	}
	if len(tw.Diffs) != 1 || tw.Diffs[0].String() != "`grants`: +2 rows solo, +7 together" {
		t.Errorf("re-read diffs %v, want against the replay", tw.Diffs)
	}
	var t1, t2 bytes.Buffer
	_ = Table(&t1, []Case{c}, Options{Width: 200})
	_ = Table(&t2, again, Options{Width: 200})
	if t1.String() != t2.String() || !strings.Contains(t1.String(), "burst 2 beside its replay (the same 8 attempts one at a time, in the order they completed together: 7, 6, 5, 4, 3, 2, 1, 0)") {
		t.Errorf("re-read table:\n%s\nwant\n%s", t2.String(), t1.String())
	}
	bad := strings.Replace(saved.String(), `"change": {`, `"change": {"x rows": "many", `, 1)
	if bad == saved.String() {
		t.Fatal("no replay in the JSON")
	}
	if doc, err := ReadDocument(strings.NewReader(bad)); err == nil {
		if _, err := doc.Cases(); err == nil {
			t.Error("a replay's change that is not a number was read")
		}
	}
}

// turnedCase is a twin run of four bursts of 8 attempts, each burst of the
// kind named: "turned" (+1 row together with 1 executed, +3 alone with 3),
// "nothing" (no change alone or together) or "same" (+2 rows either way,
// 2 executed: no serial run explains a turned burst).
// Each solo twin runs its own order, so that they need not agree.
func turnedCase(kinds ...string) Case {
	r := &runner.Result{Attempts: 8, Allowed: 1, Required: 1, Planned: 4, Errors: map[string]int{}}
	for i, k := range kinds {
		tw := &runner.Twin{SoloBurst: i, SoloOrder: []int{i}}
		b := runner.Burst{Index: i, Overlap: 8, Twin: tw}
		b.Outcomes[runner.Executed], b.Outcomes[runner.Declined] = 1, 7
		switch k {
		case "turned":
			tw.Solo, tw.SoloExecuted, tw.Together = runner.Delta{"hits rows": rat(3)}, 3, runner.Delta{"hits rows": rat(1)}
		case "nothing":
			tw.Solo, tw.SoloExecuted, tw.Together = runner.Delta{}, 1, runner.Delta{}
		case "same":
			tw.Solo, tw.SoloExecuted, tw.Together = runner.Delta{"hits rows": rat(2)}, 2, runner.Delta{"hits rows": rat(2)}
			b.Outcomes[runner.Executed], b.Outcomes[runner.Declined] = 2, 6
		}
		r.Bursts = append(r.Bursts, b)
	}
	r.Twins = runner.JudgeTwins(r.Bursts)
	return Case{Name: "limit.sql", Scenario: "script", Backend: "postgres", Expect: Expect{Kind: ExpectSafe}, Result: r}
}

// A twin run whose bursts were turned away together (fewer executed than
// one at a time, a smaller change: a rate limiter) is INCONCLUSIVE with
// that reason, never LOST; the reason and the counts survive the JSON.
func TestTwinBurstsTurnedAwayAreInconclusive(t *testing.T) {
	c := turnedCase("turned", "turned", "turned", "turned")
	a := Assess(c)
	want := "in 4 of 4 bursts fewer attempts executed together than one at a time (burst 0: 1 executed together, 7 declined; 3 executed one at a time) and the database changed less"
	if a.Verdict != Inconclusive || !strings.HasPrefix(a.Why, want) || !strings.Contains(a.Why, "--allowed") {
		t.Fatalf("got %s %q\nwant INCONCLUSIVE %q…", a.Verdict, a.Why, want)
	}
	// Two turned, one that changed nothing watched, one tested: the
	// general line counts each kind.
	a2 := Assess(turnedCase("turned", "nothing", "turned", "same"))
	for _, w := range []string{"only 1 of 4 bursts put the guard to the test", ", 1 changed nothing that racetest watches", ", 2 had fewer attempts execute than one at a time"} {
		if !strings.Contains(a2.Why, w) {
			t.Errorf("mixed: %q lacks %q", a2.Why, w)
		}
	}
	// Three turned beside one tested: the turned line, counted over all.
	if a3 := Assess(turnedCase("turned", "same", "turned", "turned")); a3.Tested != 1 || !strings.HasPrefix(a3.Why, "in 3 of 4 bursts fewer attempts executed together") {
		t.Errorf("three turned, one tested: tested %d, %q", a3.Tested, a3.Why)
	}
	// The example is the first burst turned away, not the first burst.
	want3 := "in 3 of 4 bursts fewer attempts executed together than one at a time (burst 1: 1 executed together, 7 declined; 3 executed one at a time)"
	if a3 := Assess(turnedCase("same", "turned", "turned", "turned")); !strings.HasPrefix(a3.Why, want3) {
		t.Errorf("the first burst tested: %q\nwant %q…", a3.Why, want3)
	}
	back, saved := reread(t, c)
	for _, s := range []string{`"turned_bursts": 4`, `"turned": true`, `"solo_executed": 3`} {
		if !strings.Contains(string(saved), s) {
			t.Errorf("the JSON lacks %s", s)
		}
	}
	if b := Assess(back); b.Verdict != a.Verdict || b.Why != a.Why {
		t.Errorf("re-read: %s %q, want %s %q", b.Verdict, b.Why, a.Verdict, a.Why)
	}
	// Judged again from what was read back (report merge), the same.
	back.Result.Twins = runner.JudgeTwins(back.Result.Bursts)
	if back.Result.Twins.Turned != 4 {
		t.Errorf("judged again after the JSON: %d turned, want 4", back.Result.Twins.Turned)
	}
}
