package incidents

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/conformance"
)

var memParams = scenarios.Params{Latency: scenarios.DefaultLatency, TTL: scenarios.DefaultTTL}

// TestConformanceMemory runs every incident's demo cases on the embedded
// backend and asserts the catalog's expectation for each.
func TestConformanceMemory(t *testing.T) {
	conformance.Run(t, conformance.Suite{Registry: registry("memory"), Backend: "memory", Params: memParams, Bursts: 15})
}

func TestAlertNaiveSendsOncePerReplicaInstance(t *testing.T) {
	const replicas = 3
	res, _ := runCase(t, "memory", AlertDedupe, memParams, shape{variant: Naive, replicas: replicas, waves: 2, deploy: true})
	// R per wave, and the deploy's fresh replicas send the whole set again.
	everyBurst(t, res, "want 6 sends: 3 replicas × 2 waves (a deploy between)", func(b runner.Burst) bool {
		return b.Effects == replicas*2 && b.Allowed == 1
	})
	checkOK(t, res, "prune by age forgets")
	checkOK(t, res, "prune by each entry's expiry keeps it")
}

func TestAlertNaiveOneReplicaNoDeployHolds(t *testing.T) {
	res, _ := runCase(t, "memory", AlertDedupe, memParams, shape{variant: Naive})
	everyBurst(t, res, "one replica's table sends once", func(b runner.Burst) bool { return b.Effects == 1 })
}

func TestAlertFixedSendsOncePerWindowAcrossDeploys(t *testing.T) {
	res, _ := runCase(t, "memory", AlertDedupe, memParams, shape{variant: Fixed, replicas: 3, waves: 3, deploy: true})
	everyBurst(t, res, "want exactly one send", func(b runner.Burst) bool { return b.Effects == 1 })
	checkOK(t, res, "a freshly started replica sees the claim")
}

func TestAlertFailOpenIsAllowedByPolicy(t *testing.T) {
	const replicas = 3
	res, _ := runCase(t, "memory", AlertDedupe, memParams, shape{variant: FailOpen, replicas: replicas})
	// Each replica's first trigger fails to claim and sends; the policy
	// allows exactly those sends, so the run is within its allowance.
	everyBurst(t, res, "want one allowed send per replica", func(b runner.Burst) bool {
		return b.Effects == replicas && b.Allowed == replicas && b.Outcomes[runner.Error] == 0
	})
	if res.Violations() != 0 {
		t.Errorf("%d violations, want none: fail-open sends are allowed by policy", res.Violations())
	}
	noteWith(t, res, "allowed by policy")
	checkOK(t, res, "a hung store")
}

func TestAlertFailOpenHangSendsAtTheDeadline(t *testing.T) {
	res, _ := runCase(t, "memory", AlertDedupe, memParams, shape{variant: FailOpenHang, replicas: 2, bursts: 2, attempts: 4})
	everyBurst(t, res, "a hung store: each replica sends, allowed by policy", func(b runner.Burst) bool {
		// The embedded store's hang ends exactly at the deadline, so the
		// burst cannot be shorter than it.
		return b.Effects == 2 && b.Allowed == 2 && b.Duration >= ClaimDeadline
	})
	noteWith(t, res, "did not answer within the 1.5s deadline")
}

func TestAlertP0IsSentByEveryReplica(t *testing.T) {
	res, _ := runCase(t, "memory", AlertDedupe, memParams, shape{variant: P0, replicas: 3, waves: 2, deploy: true})
	everyBurst(t, res, "P0: one send per replica instance, all allowed", func(b runner.Burst) bool {
		return b.Effects == 6 && b.Allowed == 6
	})
	noteWith(t, res, "P0 skips the shared claim")
}

func TestPruneReplay(t *testing.T) {
	if got := pruneReplay(pruneByAge); got != 2 {
		t.Errorf("prune by age: the 24h alert was sent %d times after 20 minutes and 600 others, want 2 (the bug)", got)
	}
	if got := pruneReplay(pruneByExpiry); got != 1 {
		t.Errorf("prune by expiry: sent %d times, want 1", got)
	}
}

func TestDedupeTableWindows(t *testing.T) {
	tbl := newDedupeTable(pruneByExpiry)
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		at   time.Duration
		want bool
	}{{0, true}, {time.Minute, false}, {23 * time.Hour, false}, {24 * time.Hour, true}, {24*time.Hour + time.Second, false}}
	for _, s := range steps {
		if got := tbl.Admit("k", AlertWindow, t0.Add(s.at)); got != s.want {
			t.Errorf("at +%s: admitted=%v, want %v", s.at, got, s.want)
		}
	}
}

func TestWindowKey(t *testing.T) {
	at := time.Date(2024, 5, 1, 10, 2, 10, 0, time.UTC)
	k := windowKey("p_", "reconcile", at, JobInterval)
	if want := "p_job:reconcile:20240501T100200Z"; k != want {
		t.Errorf("windowKey = %q, want %q", k, want)
	}
	if same := windowKey("p_", "reconcile", at.Add(109*time.Second), JobInterval); same != k {
		t.Errorf("a tick later in the same window named %q, want %q", same, k)
	}
	if next := windowKey("p_", "reconcile", at.Add(111*time.Second), JobInterval); next == k {
		t.Errorf("a tick in the next window named the same key %q", next)
	}
}

func TestJobWindow(t *testing.T) {
	t.Run("naive runs once per replica", func(t *testing.T) {
		res, _ := runCase(t, "memory", JobWindow, memParams, shape{variant: Naive, replicas: 3})
		everyBurst(t, res, "want 3 listings", func(b runner.Burst) bool { return b.Effects == 3 })
	})
	t.Run("claimed window runs once, late runners do not", func(t *testing.T) {
		res, _ := runCase(t, "memory", JobWindow, memParams, shape{variant: Fixed, replicas: 3, waves: 2, deploy: true})
		everyBurst(t, res, "want 1 listing", func(b runner.Burst) bool {
			return b.Effects == 1 && b.Outcomes[runner.Executed] == 1
		})
		checkOK(t, res, "a late runner in a claimed window does not run")
	})
	t.Run("store down runs anyway", func(t *testing.T) {
		res, _ := runCase(t, "memory", JobWindow, memParams, shape{variant: StoreDown, replicas: 3})
		everyBurst(t, res, "want 3 listings, all allowed", func(b runner.Burst) bool {
			return b.Effects == 3 && b.Allowed == 3
		})
		noteWith(t, res, "allowed by policy")
	})
}

func TestRewardPayoutMemory(t *testing.T) {
	t.Run("check then pay pays several times", func(t *testing.T) {
		res, _ := runCase(t, "memory", RewardPayout, memParams, shape{variant: CheckThenPay})
		if res.Violations() == 0 {
			t.Fatalf("no burst paid twice in %d", len(res.Bursts))
		}
	})
	t.Run("record then pay without a constraint still pays several times", func(t *testing.T) {
		res, _ := runCase(t, "memory", RewardPayout, memParams, shape{variant: RecordThenPay})
		if res.Violations() == 0 {
			t.Fatalf("no burst paid twice in %d", len(res.Bursts))
		}
	})
	t.Run("unique record first pays once", func(t *testing.T) {
		res, _ := runCase(t, "memory", RewardPayout, memParams, shape{variant: UniqueRecord})
		everyBurst(t, res, "want 1 payment", func(b runner.Burst) bool { return b.Effects == 1 })
		checkOK(t, res, "only the duplicate-key error")
		noteWith(t, res, "paid 10, recorded 10, difference +0")
	})
	t.Run("swallow-all misreports an injected failure", func(t *testing.T) {
		res, _ := runCase(t, "memory", RewardPayout, memParams, shape{variant: SwallowErrors})
		// The user is owed one payment and told "already paid": too few.
		everyBurst(t, res, "want 0 payments of 1 required, every attempt told already paid (a lost burst)", func(b runner.Burst) bool {
			return b.Effects == 0 && b.Required == 1 && b.Outcomes[runner.Declined] == 8 && b.Lost()
		})
		checkOK(t, res, "swallow-all reports an injected failure")
	})
	t.Run("one transaction pays once and rolls back a failed payment", func(t *testing.T) {
		res, _ := runCase(t, "memory", RewardPayout, memParams, shape{variant: OneTransaction})
		everyBurst(t, res, "want 1 payment", func(b runner.Burst) bool { return b.Effects == 1 })
		checkOK(t, res, "a failed payment rolls the record back")
	})
	t.Run("external payment with a lost response pays twice", func(t *testing.T) {
		res, _ := runCase(t, "memory", RewardPayout, memParams, shape{variant: External})
		everyBurst(t, res, "want 2 payments at the provider", func(b runner.Burst) bool { return b.Effects == 2 })
		noteWith(t, res, "paid 20, recorded 10, difference +10 (over-pay")
	})
	t.Run("idempotency key pays once", func(t *testing.T) {
		res, _ := runCase(t, "memory", RewardPayout, memParams, shape{variant: ExternalIdempotent})
		everyBurst(t, res, "want 1 payment at the provider", func(b runner.Burst) bool { return b.Effects == 1 })
		noteWith(t, res, "answered 10 repeated idempotency keys")
	})
}

func TestLeasePauseMemory(t *testing.T) {
	t.Run("naive: the paused holder writes after the next", func(t *testing.T) {
		res, _ := runCase(t, "memory", LeasePause, memParams, shape{variant: Naive})
		// A holder descheduled before its check (a loaded machine) sees the
		// job done and never pauses between check and write: that burst
		// writes once. Most bursts must show the pause; none may show more.
		everyBurst(t, res, "want at most 2 writes", func(b runner.Burst) bool { return b.Effects <= 2 })
		if v := res.Violations(); v*2 < len(res.Bursts) {
			t.Errorf("only %d of %d bursts wrote twice", v, len(res.Bursts))
		}
		checkOK(t, res, "a plain delete frees the next holder's lease")
		checkOK(t, res, "compare-and-delete leaves the next holder's lease")
	})
	t.Run("fenced: the store refuses the late write", func(t *testing.T) {
		res, _ := runCase(t, "memory", LeasePause, memParams, shape{variant: Fenced})
		everyBurst(t, res, "want 1 write", func(b runner.Burst) bool { return b.Effects == 1 })
		noteWith(t, res, "late writes in 10 bursts")
	})
}

func TestUnknownVariant(t *testing.T) {
	p := memParams
	p.RunID, p.Variant = "x1", "for-update"
	for _, sc := range []string{AlertDedupe, JobWindow, RewardPayout, LeasePause} {
		_, err := registry("memory").Build(context.Background(), sc, "memory", p)
		if err == nil || !strings.Contains(err.Error(), "has no variant") || !strings.Contains(err.Error(), "racetest explain "+sc) {
			t.Errorf("%s with --variant for-update: %v, want an error naming the variants", sc, err)
		}
	}
}

func TestExpectations(t *testing.T) {
	cases := []struct {
		spec     scenarios.Spec
		variant  string
		replicas int
		want     scenarios.Expectation
	}{
		{alertSpec(), "", 3, scenarios.ExpectRace},
		{alertSpec(), Naive, 1, scenarios.ExpectSafe},
		{alertSpec(), FailOpen, 3, scenarios.ExpectSafe},
		{jobSpec(), Fixed, 3, scenarios.ExpectSafe},
		{rewardSpec(), "", 1, scenarios.ExpectRace},
		{rewardSpec(), External, 1, scenarios.ExpectRace},
		{rewardSpec(), ExternalIdempotent, 1, scenarios.ExpectSafe},
		{leaseSpec(), Naive, 1, scenarios.ExpectRace},
		{leaseSpec(), Fenced, 1, scenarios.ExpectSafe},
	}
	for _, c := range cases {
		if got := c.spec.Expect(scenarios.Params{Variant: c.variant, Replicas: c.replicas}); got != c.want {
			t.Errorf("%s variant %q with %d replicas: expect %s, want %s", c.spec.Name, c.variant, c.replicas, got, c.want)
		}
	}
}

func TestFencingMustCoverTheCheckMemory(t *testing.T) {
	p := memParams
	p.RunID = scenarios.NewRunID()
	lb, err := memLeaseBackend(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	fencingInterleaving(t, lb, p)
}

// TestEffectsRefusedWithoutAReplica: a target whose replicas ran in other
// processes (run --processes) cannot see sends counted by an in-process
// sink; it must say so rather than count 0 and call the run SAFE.
func TestEffectsRefusedWithoutAReplica(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ scenario, variant string }{{AlertDedupe, Fixed}, {JobWindow, Naive}, {RewardPayout, External}} {
		p := memParams
		p.RunID, p.Variant = scenarios.NewRunID(), c.variant
		target, err := registry("memory").Build(ctx, c.scenario, "memory", p)
		if err != nil {
			t.Fatal(err)
		}
		if err := target.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
		s, err := target.Reset(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := target.Effects(ctx, s); err == nil || !strings.Contains(err.Error(), "without --processes") {
			t.Errorf("%s (%s): Effects with no replica opened here: %v, want a refusal naming --processes", c.scenario, c.variant, err)
		}
		target.Cleanup(ctx)
	}
}

// TestRewardVariantsAreThePatterns: --variant accepts exactly the keys of
// rewardPatterns, check-then-pay first, and the error lists them all.
func TestRewardVariantsAreThePatterns(t *testing.T) {
	p := memParams
	p.RunID, p.Variant = "x2", "no-such"
	_, err := registry("memory").Build(context.Background(), RewardPayout, "memory", p)
	if err == nil {
		t.Fatal("an unknown variant was accepted")
	}
	for v := range rewardPatterns {
		if !strings.Contains(err.Error(), v) {
			t.Errorf("the error %q does not list %s", err, v)
		}
		p.Variant = v
		target, err := registry("memory").Build(context.Background(), RewardPayout, "memory", p)
		if err != nil {
			t.Errorf("variant %s: %v", v, err)
			continue
		}
		if rt := target.(*rewardTarget); rt.variant != v || (rt.provider != nil) != (v == External || v == ExternalIdempotent) {
			t.Errorf("variant %s built as %s (provider %v)", v, rt.variant, rt.provider != nil)
		}
		target.(runner.Closer).Close()
	}
	if vs := variantsOf(CheckThenPay, rewardPatterns); vs[0] != CheckThenPay || len(vs) != len(rewardPatterns) {
		t.Errorf("variants %v: want check-then-pay first and every pattern once", vs)
	}
}
