package script

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/runner"
)

// --effects auto on the servers: examples/auto's naive scripts differ from
// their solo twins in the table and column the pattern breaks, and the
// fixed ones change the store as the attempts do one at a time. No
// effects script is written.

const autoExamples = "../examples/auto"

var autoWatch = []string{"coupons_{{.RunID}}", "redemptions_{{.RunID}}", "items_{{.RunID}}", "accounts_{{.RunID}}"}

// autoTarget is examples/auto's schema with attempt (a file, @NAME, or the
// script's text) under --effects auto, watching autoWatch.
func autoTarget(t *testing.T, backend, attempt string) (*Target, string) {
	t.Helper()
	st, p := open(t, backend)
	spec := Spec{Setup: "@schema.sql", Subject: "@subject.sql", Attempt: []string{attempt}, Effects: "auto", Teardown: "@drop.sql"}
	sc, err := spec.Load(autoExamples, SQL, func(n string) string { return "--" + n })
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if !sc.Auto || sc.Effects != nil {
		t.Fatalf("--effects auto loaded as %+v", sc)
	}
	sc.Watch = autoWatch
	tg, err := New(st, sc, p.RunID)
	if err != nil {
		t.Fatal(err)
	}
	return tg, p.RunID
}

func runAuto(t *testing.T, backend, attempt string, bursts int) (*runner.Result, string) {
	t.Helper()
	tg, runID := autoTarget(t, backend, "@"+attempt+".sql")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := runner.Run(ctx, tg, runner.Attempts(8), runner.Bursts(bursts), runner.SoloTwins(1))
	if err != nil {
		t.Fatalf("%s: %v", attempt, err)
	}
	if res.CleanupErr != nil {
		t.Errorf("teardown: %v", res.CleanupErr)
	}
	return res, runID
}

// differing is the set of keys that differed in some burst.
func differing(res *runner.Result) map[string]runner.TwinVerdict {
	m := map[string]runner.TwinVerdict{}
	for _, b := range res.Bursts {
		for _, d := range b.Twin.Diffs {
			m[d.Key] = b.Twin.Verdict
		}
	}
	return m
}

func TestEffectsAutoOnSQLServers(t *testing.T) {
	for _, backend := range []string{"postgres", "mysql"} {
		t.Run(backend, func(t *testing.T) {
			for _, c := range []struct {
				attempt string
				key     string // "" for a fixed script
				verdict runner.TwinVerdict
			}{
				{"redeem-naive", "redemptions_%s rows", runner.TwinMore},
				{"buy-naive", "items_%s.stock", runner.TwinMore},
				{"deposit-naive", "accounts_%s.balance", runner.TwinFewer},
				{"redeem-fixed", "", 0},
				{"buy-fixed", "", 0},
				{"deposit-fixed", "", 0},
			} {
				t.Run(c.attempt, func(t *testing.T) {
					res, id := runAuto(t, backend, c.attempt, 12)
					if why := res.Twins.Reason(); why != "" {
						t.Fatalf("the twins cannot judge: %s", why)
					}
					diffs := differing(res)
					if c.key == "" {
						if res.Violations()+res.Lost() > 0 || len(diffs) > 0 {
							t.Fatalf("a fixed script differs from its twins: %v", diffs)
						}
						if 2*res.Tested() < len(res.Bursts) {
							t.Errorf("only %d of %d bursts tested", res.Tested(), len(res.Bursts))
						}
						return
					}
					key := strings.Replace(c.key, "%s", id, 1)
					if v, ok := diffs[key]; !ok || v != c.verdict {
						t.Fatalf("want %s to differ (%s); differing: %v", key, c.verdict, diffs)
					}
					if len(diffs) != 1 && c.attempt != "redeem-naive" {
						t.Errorf("more than %s differs: %v", key, diffs)
					}
				})
			}
		})
	}
}

// On Redis and MongoDB: the redeem examples of examples/redeem, with the
// effects command replaced by auto and the run's keys (collection) watched.
func TestEffectsAutoOnRedisAndMongo(t *testing.T) {
	for _, c := range []struct {
		backend string
		spec    func(attempt string) Spec
		watch   []string
		naive   string // the key that differs in the naive redeem
	}{
		{"redis", func(a string) Spec {
			return Spec{Attempt: []string{"@" + a + ".redis"}, Effects: "auto", Teardown: "@drop.redis"}
		},
			[]string{"coupon:{{.RunID}}-*", "redeemed:{{.RunID}}-*"}, "redeemed:%s-*.members"},
		{"mongo", func(a string) Spec {
			if a == "conditional" {
				a = "unique"
			}
			return Spec{Setup: "@schema.mongo", Attempt: []string{"@" + a + ".mongo"}, Effects: "auto", Teardown: "@drop.mongo"}
		}, []string{"redemptions_{{.RunID}}"}, "redemptions_%s rows"},
	} {
		t.Run(c.backend, func(t *testing.T) {
			for _, attempt := range []string{"naive", "conditional"} {
				t.Run(attempt, func(t *testing.T) {
					st, p := open(t, c.backend)
					d, _ := DialectOf(c.backend)
					sc, err := c.spec(attempt).Load(examples, d, func(n string) string { return "--" + n })
					if err != nil {
						t.Fatal(err)
					}
					sc.Watch = c.watch
					tg, err := New(st, sc, p.RunID)
					if err != nil {
						t.Fatal(err)
					}
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					defer cancel()
					res, err := runner.Run(ctx, tg, runner.Attempts(8), runner.Bursts(12), runner.SoloTwins(1))
					if err != nil {
						t.Fatal(err)
					}
					if res.CleanupErr != nil {
						t.Errorf("teardown: %v", res.CleanupErr)
					}
					if why := res.Twins.Reason(); why != "" {
						t.Fatalf("the twins cannot judge: %s", why)
					}
					diffs := differing(res)
					if attempt == "conditional" {
						if len(diffs) > 0 || 2*res.Tested() < len(res.Bursts) {
							t.Fatalf("conditional: differing %v, %d of %d tested", diffs, res.Tested(), len(res.Bursts))
						}
						return
					}
					key := strings.Replace(c.naive, "%s", p.RunID, 1)
					if v := diffs[key]; v != runner.TwinMore {
						t.Fatalf("want %s more together; differing: %v", key, diffs)
					}
				})
			}
		})
	}
}

// An auto run is counted by its snapshots: its target is neither read as a
// change (Baseliner) nor left to its invariants alone (Uncounted).
func TestAutoIsNeitherBaselinedNorUncounted(t *testing.T) {
	auto := &Target{sc: Scripts{Auto: true}}
	if auto.Baselined() || auto.Uncounted() {
		t.Errorf("auto: baselined %v, uncounted %v; want neither", auto.Baselined(), auto.Uncounted())
	}
	if !(&Target{sc: Scripts{}}).Uncounted() {
		t.Error("a target without effects script nor auto is not Uncounted")
	}
	if !(&Target{sc: Scripts{Effects: &Script{}}}).Baselined() {
		t.Error("a target with an effects script is not Baselined")
	}
}

// With --effects auto the first burst is checked too: a script whose every
// attempt fails is said to fail, not judged, and not as a snapshot that
// failed (it read the store as it should).
func TestAutoChecksTheFirstBurst(t *testing.T) {
	tg, _ := autoTarget(t, "postgres", "INSERT INTO no_such_table_{{.RunID}} VALUES (1);")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := runner.Run(ctx, tg, runner.Attempts(4), runner.Bursts(3), runner.SoloTwins(1))
	if err == nil || !strings.HasPrefix(err.Error(), "burst 0: the first burst: every attempt (4 of 4) failed") {
		t.Errorf("every attempt failing: %v, want the first burst named as failing whole (not as a snapshot)", err)
	}
}
