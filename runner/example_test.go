package runner_test

import (
	"context"
	"fmt"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/memstore"
)

// A team's own test can drive the engine directly: build a target, fire
// bursts, and look at what the store says happened.
func ExampleRun() {
	reg := scenarios.NewRegistry()
	for _, s := range scenarios.Core() {
		reg.AddScenario(s)
	}
	memstore.Register(reg)

	ctx := context.Background()
	for _, name := range []string{scenarios.CheckThenWrite, scenarios.UniqueInsert} {
		target, err := reg.Build(ctx, name, memstore.Name, scenarios.Params{
			RunID: scenarios.NewRunID(), Attempts: 8, Latency: scenarios.DefaultLatency,
		})
		if err != nil {
			panic(err)
		}
		res, err := runner.Run(ctx, target, runner.Attempts(8), runner.Bursts(50))
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: more than one effect in some bursts: %v\n", name, res.Violations() > 0)
	}
	// Output:
	// check-then-write: more than one effect in some bursts: true
	// unique-insert: more than one effect in some bursts: false
}
