package cmd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"

	"github.com/racetest/racetest/httpfire"
	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/runplan"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/script"
)

// The plans of targets that are not the catalog's scenarios: each builds
// its own target, so that execute runs every plan alike (runplan.Build
// makes the catalog's; processPlan in serve.go wraps one in processes).

// httpLesson is what an HTTP case teaches, whatever the endpoint.
const httpLesson = "what the server says is a claim; only the effects check counts what happened"

// httpBackend is the backend an HTTP target's case names: not a backend of
// the registry, since the state is the service's own.
const httpBackend = "http"

// newHTTPPlan makes the run of an HTTP target of shape sh, for 'racetest
// http' and a suite's http: cases: the one place both build it. The engine
// checks cfg now, so that a problem is bad input before anything runs.
// allowed is the allowance as the report shows it ("" when it is the
// default).
func newHTTPPlan(cfg httpfire.Config, sh runplan.Shape, p scenarios.Params, rc runner.Config, name, allowed string, expect report.Expect, strict, proveSafe bool) (plan, error) {
	if _, err := httpfire.New(cfg, p); err != nil {
		return plan{}, err
	}
	release := string(cmp.Or(cfg.Release, httpfire.Auto))
	settings := map[string]string{"release": release, "run_id": p.RunID}
	if cfg.Effects != "" {
		settings["effects"], _, _ = strings.Cut(cfg.Effects, ":")
	}
	if httpfire.IsAuto(cfg.Effects) {
		settings["effects"] = cfg.Effects
		if rc.SoloEvery > 1 {
			settings["effects"] += fmt.Sprintf(" (a solo twin before every %d bursts)", rc.SoloEvery)
		}
	}
	if allowed != "" {
		settings["allowed"] = allowed
	}
	return plan{
		Case: report.Case{Name: name, Scenario: "http", Backend: httpBackend, Lesson: httpLesson,
			Expect: expect, Strict: strict, ProveSafe: proveSafe, Release: release, Settings: settings},
		Params: p, Config: rc, Shape: sh,
		Build: func(_ context.Context, p scenarios.Params) (runner.Target, error) { return httpfire.New(cfg, p) },
		After: httpRan,
	}, nil
}

// httpRan completes an HTTP case once its target ran: an auto release
// became a mode when the server was asked, and the report names that one;
// a failure is said in the target's words, not the engine's ("open
// replica 0: ...").
func httpRan(t runner.Target, c report.Case) report.Case {
	if ht, ok := t.(*httpfire.Target); ok && ht.Release() != httpfire.Auto {
		c.Release = string(ht.Release())
		c.Settings = maps.Clone(c.Settings)
		c.Settings["release"] = c.Release
	}
	var ce *httpfire.ConnectError
	if errors.As(c.Err, &ce) {
		c.Err = ce
	}
	return c
}

// scriptBuilder builds a target of the user's own scripts on backend, and
// says on stderr (after "racetest: <doing> on <server>") what it will run.
func scriptBuilder(w io.Writer, doing, backend string, sc script.Scripts) runplan.Builder {
	return func(ctx context.Context, p scenarios.Params) (runner.Target, error) {
		store, err := script.Open(ctx, backend, p)
		if err != nil {
			return nil, err
		}
		t, err := script.New(store, sc, p.RunID)
		if err != nil {
			store.Close()
			return nil, err
		}
		fmt.Fprintf(w, "racetest: %s on %s\n", doing, store.Where())
		for _, line := range sc.Describe() {
			fmt.Fprintln(w, "  "+line)
		}
		return t, nil
	}
}
