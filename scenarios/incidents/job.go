package incidents

import (
	"context"
	"time"

	"github.com/racetest/racetest/runner"
)

// JobInterval is how often the reconciliation job ticks on every replica.
const JobInterval = 2 * time.Minute

// jobName is the job whose windows the replicas compete for.
const jobName = "reconcile"

var jobKind = &onceKind{
	scenario: JobWindow,
	variants: jobVariants,
	window:   JobInterval,
	effect:   "listing",
	counter:  "the simulated inventory API",
	mode: func(v string) storeMode {
		if v == StoreDown {
			return storeDown
		}
		return storeUp
	},
	claims: func(v string) bool { return v != Naive },
	prune:  func(string) pruneMode { return pruneByExpiry },
	subject: func(t *onceTarget, burst int) (string, time.Time) {
		// Each burst is the next window of a simulated schedule; the
		// replicas tick 10 s into it.
		at := t.base.Add(time.Duration(burst)*JobInterval + 10*time.Second)
		return windowKey(t.p.Prefix(), jobName, at, JobInterval), at
	},
	checks: func(ctx context.Context, t *onceTarget) []runner.Check {
		if t.variant != Fixed {
			return nil
		}
		return []runner.Check{freshReplicaCheck(ctx, t, "a late runner in a claimed window does not run")}
	},
	refusedLocal: "already ran this window on this replica",
	refusedClaim: "window claimed by another replica",
}

// windowKey names the window that at falls in: job:<name>:<window start>.
// Every tick inside one window names the same key.
func windowKey(prefix, job string, at time.Time, interval time.Duration) string {
	return prefix + "job:" + job + ":" + at.UTC().Truncate(interval).Format("20060102T150405Z")
}
