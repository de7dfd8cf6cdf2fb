package report

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/runner"
)

// roundTripCase is a run whose verdict rests on a figure the catalog's
// cases never carry, with the verdict, the why-line and the exit (0 met,
// 1 failed, 4 unproven under --strict) the run gave: each must come back
// the same from its saved JSON (issue 48).
type roundTripCase struct {
	c       Case
	verdict Verdict
	why     string // a part of the why-line
	exit    int
}

// tested is a burst that put the guard to the test: one of four attempts
// executed, three declined, all four in flight at once.
func tested(i int) runner.Burst {
	return runner.Burst{Index: i, Effects: 1, Allowed: 1, Required: 1, Overlap: 4,
		Outcomes: [runner.NumClasses]int{runner.Executed: 1, runner.Declined: 3},
		Spread:   time.Duration(10+i) * time.Microsecond, Duration: time.Duration(400+i) * time.Microsecond}
}

func testedBursts(n int, edit func(b *runner.Burst)) []runner.Burst {
	bs := make([]runner.Burst, n)
	for i := range bs {
		bs[i] = tested(i)
		edit(&bs[i])
	}
	return bs
}

func roundTripResult(bursts []runner.Burst) *runner.Result {
	return &runner.Result{Attempts: 4, Replicas: 1, Waves: 1, Allowed: 1, Required: 1, Planned: len(bursts),
		Bursts: bursts, Errors: map[string]int{}, Elapsed: 3 * time.Millisecond}
}

// roundTripCases are the runs: an invariant broken after some bursts
// (RACE, though no burst left more effects than allowed), a run judged
// by solo twins with another writer at work in two bursts (INCONCLUSIVE,
// under --strict), one with exactly two solo twins and a burst that
// changed more than its twin (RACE, stopped there), an effects check read as a change
// that never moved (INCONCLUSIVE, not LOST), an accounting run with two
// successes a burst (SAFE, with its caveat), one whose server answered
// one request at a time though its probe found it concurrent, solo twins
// that disagree, bursts whose every attempt timed out or failed, a run
// interrupted, one judged by an invariant alone (no effects check)
// whose objects could not be dropped, one asked to prove a rate its
// bursts cannot bound, one whose check failed, and one interrupted while
// it connected, before it had a result.
func roundTripCases() []roundTripCase {
	inv := roundTripResult(testedBursts(10, func(b *runner.Burst) {
		b.Broken = []int{0, 0}
		if b.Index == 3 || b.Index == 7 {
			b.Broken = []int{0, 3 - b.Index/3}
		}
		b.Retries = b.Index % 2 // --retry
	}))
	inv.Invariants = []string{"stock >= 0", "one payment per order"}
	inv.Server, inv.Notes = "PostgreSQL 16.4", []string{"postgres: isolation read committed"}

	few := roundTripResult(testedBursts(10, func(*runner.Burst) {}))

	lease := roundTripResult(testedBursts(10, func(*runner.Burst) {}))
	lease.Checks = []runner.Check{{Name: "lease liveness", OK: false, Detail: "still held after 2s (TTL 50ms)"}}

	one := big.NewRat(1, 1)
	noisy := roundTripResult(testedBursts(10, func(b *runner.Burst) {
		b.Twin = &runner.Twin{SoloBurst: b.Index / 4 * 4, Solo: runner.Delta{"grants rows": one}, Together: runner.Delta{"grants rows": one},
			Verdict: runner.TwinSame}
		if b.Index == 2 || b.Index == 5 {
			b.Twin.Verdict, b.Twin.Noise = runner.TwinUnjudged, []string{"`audit` +1"}
		}
	}))
	noisy.Twins = &runner.Twins{Solos: 3, Noisy: 2, Noise: "`audit` +1", Varying: []string{"grants.attempt"}}

	twins := roundTripResult(testedBursts(2, func(b *runner.Burst) {
		b.Twin = &runner.Twin{SoloBurst: b.Index, Solo: runner.Delta{"grants rows": one}, Together: runner.Delta{"grants rows": one},
			Verdict: runner.TwinSame}
		if b.Index == 1 {
			three := big.NewRat(3, 1)
			b.Twin.Together, b.Twin.Verdict = runner.Delta{"grants rows": three}, runner.TwinMore
			b.Twin.Diffs = []runner.TwinDiff{{Key: "grants rows", Solo: one, Together: three}}
			b.Outcomes = [runner.NumClasses]int{runner.Executed: 3, runner.Declined: 1}
		}
	}))
	twins.Planned, twins.Stopped = 6, true // --stop-on-violation
	twins.Twins = &runner.Twins{Solos: 2}

	stuck := roundTripResult(testedBursts(10, func(b *runner.Burst) { b.Effects, b.Before = 0, 5 }))
	stuck.Baselined = true

	acct := roundTripResult(testedBursts(10, func(b *runner.Burst) {
		b.Effects, b.Allowed, b.Required = 2, 2, 2
		b.Outcomes = [runner.NumClasses]int{runner.Executed: 2, runner.Declined: 2}
	}))
	acct.Accounting, acct.Release = true, "last-byte"
	for i := range acct.Bursts {
		acct.Bursts[i].Wire = runner.WireCounts{Held: 3, Late: 1}
	}

	serial := roundTripResult(testedBursts(10, func(b *runner.Burst) { b.ServerParallelism = 1.1 }))
	serial.ServerProbe = &runner.ServerProbe{Result: runner.ProbeConcurrent, Detail: "answered a second request while a first was held"}

	// The same, but a session of the checked database waited on a lock in
	// each burst: the database's lock queued the requests, and they count
	// as tested.
	queued := roundTripResult(testedBursts(10, func(b *runner.Burst) { b.ServerParallelism, b.LockWaited = 1.1, true }))
	queued.ServerProbe = serial.ServerProbe

	// Through a database proxy whose hold point the requests of 7 of 10
	// bursts never met: untested, and the run INCONCLUSIVE.
	unheld := roundTripResult(testedBursts(10, func(b *runner.Burst) {
		b.Hold = &runner.Hold{Met: 2, Attempts: 4, Summary: "burst: 2 of 4 met"}
		if b.Index < 7 {
			b.Hold.Met, b.Hold.Untested, b.Hold.Why = 1, true, "no statement reached the proxy"
		}
	}))

	disagree := roundTripResult(testedBursts(6, func(b *runner.Burst) {
		b.Twin = &runner.Twin{SoloBurst: b.Index / 3 * 3, Solo: runner.Delta{"grants rows": big.NewRat(int64(1+b.Index/3), 1)},
			Together: runner.Delta{"grants rows": one}}
	}))
	disagree.Twins = &runner.Twins{Solos: 2, Disagree: "the solo runs differ from each other (`grants`: +1 rows in one, +2 rows in another): the application does not do the same thing twice, so its burst cannot be compared with it"}

	timedOut := roundTripResult(testedBursts(5, func(b *runner.Burst) {
		b.Effects, b.Outcomes = 0, [runner.NumClasses]int{runner.Unknown: 4}
	}))
	timedOut.Timeout = 2 * time.Second

	failed := roundTripResult(testedBursts(5, func(b *runner.Burst) {
		b.Effects, b.Outcomes = 0, [runner.NumClasses]int{runner.Error: 4}
	}))
	failed.Errors = map[string]int{"404 Not Found": 20}
	failed.Diagnosis = "no request succeeded: 404 Not Found ×20"

	cut := roundTripResult(testedBursts(4, func(*runner.Burst) {}))
	cut.Planned, cut.Interrupted = 10, true
	cut.Waves, cut.Deploy = 2, true // --waves 2 --deploy

	held := roundTripResult(testedBursts(10, func(b *runner.Burst) {
		b.Effects, b.Allowed, b.Required, b.Broken = 0, 0, 0, []int{0}
	}))
	held.Allowed, held.Required, held.Uncounted, held.Invariants = 0, 0, true, []string{"balance >= 0"}
	held.CleanupErr = errors.New("DROP TABLE racetest_1a2b_accounts: permission denied")

	safe := Expect{Kind: ExpectSafe}
	return []roundTripCase{
		{Case{Name: "pay", Scenario: "script", Backend: "postgres", Expect: safe, Result: inv},
			Race, "expected SAFE, but invariant one payment per order broken after 2 of 10 bursts (at most 2 violations)", 1},
		{Case{Name: "grant", Scenario: "script", Backend: "mysql", Expect: safe, Strict: true, Result: noisy},
			Inconclusive, "the database changed while no attempt ran (`audit` +1) in 2 bursts: another writer", 4},
		{Case{Name: "grant twice", Scenario: "script", Backend: "mysql", Expect: safe, Result: twins},
			Race, "expected SAFE, but 1 of 2 bursts changed the database more than the same attempts did one at a time", 1},
		{Case{Name: "count", Scenario: "script", Backend: "postgres", Expect: safe, Result: stuck},
			Inconclusive, "the effects check never changed (it read 5 before and after every burst) while 10 attempts reported success", 0},
		{Case{Name: "POST http://127.0.0.1/deposit", Scenario: "http", Backend: "http", Expect: safe, Result: acct},
			Safe, "every reported success landed, and 10 of 10 bursts had more than one (up to 2)", 0},
		{Case{Name: "POST http://127.0.0.1/redeem", Scenario: "http", Backend: "http", Expect: safe, Strict: true, Result: serial},
			Inconclusive, "the endpoint's requests were answered one at a time in 10 of 10 bursts (estimated from the response times: median 1.1 requests at once", 4},
		{Case{Name: "POST http://127.0.0.1/transfer", Scenario: "http", Backend: "http", Expect: safe, Strict: true, Result: queued},
			Safe, "", 0},
		{Case{Name: "POST http://127.0.0.1/redeem-held", Scenario: "http", Backend: "http", Expect: safe, Strict: true, Result: unheld},
			Inconclusive, "the requests of 7 of 10 bursts never met at the database proxy's hold point (burst 0: no statement reached the proxy)", 4},
		{Case{Name: "grant again", Scenario: "script", Backend: "mysql", Expect: safe, Strict: true, Result: disagree},
			Inconclusive, "the solo runs differ from each other (`grants`: +1 rows in one, +2 rows in another)", 4},
		{Case{Name: "reserve", Scenario: "script", Backend: "postgres", Expect: safe, Result: timedOut},
			Inconclusive, "0 of 5 bursts executed anything: every attempt timed out after 2.00s", 0},
		{Case{Name: "POST http://127.0.0.1/missing", Scenario: "http", Backend: "http", Expect: safe, Result: failed},
			Inconclusive, "0 of 5 bursts executed anything: no request succeeded: 404 Not Found ×20", 0},
		{Case{Name: "check-then-write", Scenario: "check-then-write", Backend: "memory", Expect: safe, Result: cut},
			Safe, "interrupted after 4 bursts of 10 planned bursts", 1},
		{Case{Name: "transfer", Scenario: "script", Backend: "postgres", Expect: safe, Result: held},
			Safe, "", 0},
		{Case{Name: "claim", Scenario: "script", Backend: "postgres", Expect: safe, Strict: true, Prove: 0.05, Result: few},
			Inconclusive, "asked to prove a violation rate ≤5.0% at 95%, but only 10 of 10 bursts were tested, which proves ≤26%", 4},
		{Case{Name: "ttl-lease", Scenario: "ttl-lease", Backend: "redis", Expect: safe, Result: lease},
			Safe, "check failed: lease liveness: still held after 2s (TTL 50ms)", 1},
		{Case{Name: "unique-insert", Scenario: "unique-insert", Backend: "mysql", Expect: safe,
			Err: fmt.Errorf("mysql: cannot connect to 127.0.0.1:3306: %w", context.Canceled)},
			Errored, "interrupted after 0 bursts of 0 planned bursts", 1},
	}
}

// exitOf is the exit code cmd gives runs' assessments (cmd.verdictError):
// 1 when one failed its expectation, else 4 when one failed it for want
// of proof (--strict on INCONCLUSIVE), else 0.
func exitOf(as ...Assessment) int {
	exit := 0
	for _, a := range as {
		if !a.Met && !a.Unproven {
			return 1
		}
		if !a.Met {
			exit = 4
		}
	}
	return exit
}

// The runs are what the test says they are, before any JSON.
func TestRoundTripCasesShowWhatTheySay(t *testing.T) {
	for _, rc := range roundTripCases() {
		a := Assess(rc.c)
		if a.Verdict != rc.verdict || !strings.Contains(a.Why, rc.why) || exitOf(a) != rc.exit {
			t.Errorf("%s: %s (exit %d), why %q; want %s (exit %d) with %q", rc.c.Name, a.Verdict, exitOf(a), a.Why, rc.verdict, rc.exit, rc.why)
		}
	}
}

// roundTripParts writes each run as its own part of a sharded suite run,
// as 'racetest suite --shard K/N --json' does.
func roundTripParts(t *testing.T) [][]byte {
	t.Helper()
	rcs := roundTripCases()
	var parts [][]byte
	for k, rc := range rcs {
		var b bytes.Buffer
		shard := &ShardJSON{Suite: "ci.yaml", Digest: "0123abcd", K: k + 1, N: len(rcs), Cases: 1}
		if err := JSON(&b, []Case{rc.c}, Options{Version: "test", Title: "racetest suite ci.yaml", Shard: shard}); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, b.Bytes())
	}
	return parts
}

// Each run, written as JSON and read again, gives the verdict, the
// why-line and the exit it gave, alone ('racetest report FILE') and merged
// with the others ('racetest report merge'): a figure dropped on the way
// (a broken invariant, a baselined check, another writer) would turn
// RACE into SAFE, INCONCLUSIVE into LOST or SAFE.
func TestRoundTripKeepsEveryVerdict(t *testing.T) {
	rcs := roundTripCases()
	var docs []Document
	var names []string
	for k, part := range roundTripParts(t) {
		name := fmt.Sprintf("roundtrip/part-%d.json", k+1)
		golden(t, name, part) // cmd's tests read these files
		d, err := ReadDocument(bytes.NewReader(part))
		if err != nil {
			t.Fatal(err)
		}
		docs, names = append(docs, d), append(names, name)
	}
	check := func(how string, doc Document, rcs []roundTripCase) {
		t.Helper()
		again, err := doc.Cases()
		if err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		if len(again) != len(rcs) {
			t.Fatalf("%s: %d runs, want %d", how, len(again), len(rcs))
		}
		var got, want []Assessment
		for i, rc := range rcs {
			a, w := Assess(again[i]), Assess(rc.c)
			if a.Verdict != w.Verdict || a.Why != w.Why || exitOf(a) != exitOf(w) {
				t.Errorf("%s: %s reads %s (exit %d), why %q; the run gave %s (exit %d), why %q",
					how, rc.c.Name, a.Verdict, exitOf(a), a.Why, w.Verdict, exitOf(w), w.Why)
			}
			got, want = append(got, a), append(want, w)
		}
		if g, w := exitOf(got...), exitOf(want...); g != w {
			t.Errorf("%s: exit %d, the run's %d", how, g, w)
		}
		// The lines beside the verdict too: what a SAFE run held to, a
		// cleanup that failed, a stop at the first violation, each burst's
		// figures (-v).
		var orig []Case
		for _, rc := range rcs {
			orig = append(orig, rc.c)
		}
		var wantTable, gotTable bytes.Buffer
		if err := Table(&wantTable, orig, Options{Verbose: true}); err != nil {
			t.Fatal(err)
		}
		if err := Table(&gotTable, again, Options{Verbose: true}); err != nil {
			t.Fatal(err)
		}
		if gotTable.String() != wantTable.String() {
			t.Errorf("%s: the table differs from the run's:\n--- got\n%s\n--- want\n%s", how, gotTable.String(), wantTable.String())
		}
		// And the JSON written again is the JSON read: what 'report FILE
		// -o json' passes on.
		var wantJSON, gotJSON bytes.Buffer
		if err := JSON(&wantJSON, orig, Options{Version: "test"}); err != nil {
			t.Fatal(err)
		}
		if err := JSON(&gotJSON, again, Options{Version: "test"}); err != nil {
			t.Fatal(err)
		}
		if gotJSON.String() != wantJSON.String() {
			t.Errorf("%s: the JSON written again differs from the run's:\n--- got\n%s\n--- want\n%s", how, gotJSON.String(), wantJSON.String())
		}
	}
	for i, d := range docs {
		check(names[i], d, rcs[i:i+1])
	}
	whole, err := Merge(docs, names)
	if err != nil {
		t.Fatal(err)
	}
	check("merged", whole, rcs)
	if exit := exitOf(assessAll(rcs)...); exit != 1 {
		t.Errorf("the runs together exit %d, want 1: some failed their expectation", exit)
	}
}

func assessAll(rcs []roundTripCase) []Assessment {
	var as []Assessment
	for _, rc := range rcs {
		as = append(as, Assess(rc.c))
	}
	return as
}

// reread writes c as JSON and reads it back, as 'racetest report FILE'
// does: the case again, and the JSON it went through.
func reread(t *testing.T, c Case) (Case, []byte) {
	t.Helper()
	var saved bytes.Buffer
	if err := JSON(&saved, []Case{c}, Options{Version: "test"}); err != nil {
		t.Fatal(err)
	}
	doc, err := ReadDocument(bytes.NewReader(saved.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	again, err := doc.Cases()
	if err != nil {
		t.Fatal(err)
	}
	return again[0], saved.Bytes()
}
