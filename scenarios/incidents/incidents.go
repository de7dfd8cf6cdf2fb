// Package incidents reproduces real incidents end to end. Each is a word
// made of the core patterns' alphabet, with its naive and its fixed variant:
//
//   - alert-dedupe: "send at most once per window", kept in each replica's
//     memory, then claimed in the shared store (and what fail-open, P0 and a
//     pruning bug do to it);
//   - job-window: one run of a periodic job per window across replicas;
//   - reward-payout: check, pay, record — and the orders, constraints,
//     transactions and idempotency keys that make it pay once;
//   - lease-pause: a lease holder that pauses past its TTL, and the fencing
//     token that refuses its late write.
//
// Effects are counted where they land: in the store, or on a simulated
// external side (the alert sink, the listing API, the payment provider) —
// never from what the replicas believed.
package incidents

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/memstore"
	"github.com/racetest/racetest/scenarios/mysqlstore"
	"github.com/racetest/racetest/scenarios/pgstore"
	"github.com/racetest/racetest/scenarios/redisstore"
)

// The incident scenarios' names.
const (
	AlertDedupe  = "alert-dedupe"
	JobWindow    = "job-window"
	RewardPayout = "reward-payout"
	LeasePause   = "lease-pause"
)

// Register adds the incident scenarios to r, on each backend r knows that
// implements them. Call it after the backends have been added.
func Register(r *scenarios.Registry) {
	for _, s := range Specs() {
		r.AddScenario(s)
	}
	rewardVariants := variantsOf(CheckThenPay, rewardPatterns)
	impls := []struct {
		scenario, backend string
		f                 scenarios.Factory
		vs                variants
	}{
		{AlertDedupe, memstore.Name, onceFactory(alertKind, memClaimsBackend), alertVariants},
		{AlertDedupe, redisstore.Name, onceFactory(alertKind, redisClaimsBackend), alertVariants},
		{JobWindow, memstore.Name, onceFactory(jobKind, memClaimsBackend), jobVariants},
		{JobWindow, redisstore.Name, onceFactory(jobKind, redisClaimsBackend), jobVariants},
		{RewardPayout, memstore.Name, rewardFactory(memLedgerBackend), rewardVariants},
		{RewardPayout, mysqlstore.Name, rewardFactory(sqlLedgerBackend(mysqlDialect)), rewardVariants},
		{RewardPayout, pgstore.Name, rewardFactory(sqlLedgerBackend(pgDialect)), rewardVariants},
		{LeasePause, memstore.Name, leaseFactoryOf(memLeaseBackend), leaseVariants},
		{LeasePause, redisstore.Name, leaseFactoryOf(redisLeaseBackend), leaseVariants},
		{LeasePause, mysqlstore.Name, leaseFactoryOf(sqlLeaseBackend(mysqlDialect)), leaseVariants},
		{LeasePause, pgstore.Name, leaseFactoryOf(sqlLeaseBackend(pgDialect)), leaseVariants},
		{FailoverLock, redisstore.Name, failoverFactory, failoverVariants},
		{ReplicaRead, mysqlstore.Name, replicaReadFactory(mysqlDialect), replicaVariants[mysqlstore.Name]},
		{ReplicaRead, pgstore.Name, replicaReadFactory(pgDialect), replicaVariants[pgstore.Name]},
	}
	for _, im := range impls {
		if _, err := r.Backend(im.backend); err != nil {
			continue // a registry built without that backend
		}
		r.Register(im.scenario, im.backend, im.f)
		r.SetVariants(im.scenario, im.backend, im.vs)
	}
}

// variants lists a scenario's variants; the first is the default.
type variants []string

// variantsOf lists the keys of patterns, the default first and the others
// in name order: a scenario whose variants are a map of patterns accepts
// exactly its keys.
func variantsOf[P any](def string, patterns map[string]P) variants {
	if _, ok := patterns[def]; !ok {
		panic("incidents: default variant " + def + " has no pattern")
	}
	vs := variants{def}
	for _, k := range slices.Sorted(maps.Keys(patterns)) {
		if k != def {
			vs = append(vs, k)
		}
	}
	return vs
}

// pick returns the variant p asks for, or an error naming the valid ones.
func (vs variants) pick(scenario, asked string) (string, error) {
	if asked == "" {
		return vs[0], nil
	}
	if slices.Contains(vs, asked) {
		return asked, nil
	}
	return "", scenarios.BadParam(fmt.Errorf("%s has no variant %q; use --variant with one of: %s (see 'racetest explain %s')",
		scenario, asked, strings.Join(vs, ", "), scenario))
}

// prepareOrUndo runs prepare, and when it fails drops what it made: the
// runner cleans up only after a successful Prepare, and a Prepare cut short
// by Ctrl-C may have created some of its objects already.
//
// prepare runs to its end even after Ctrl-C (each statement has its own
// deadline): a CREATE or a registration abandoned mid-way may still be
// applied by the server after the cleanup looked.
func prepareOrUndo(ctx context.Context, prepare, cleanup func(context.Context) error) error {
	err := prepare(context.WithoutCancel(ctx))
	if err == nil {
		return nil
	}
	if cerr := cleanup(context.WithoutCancel(ctx)); cerr != nil {
		return errors.Join(err, cerr)
	}
	return err
}
