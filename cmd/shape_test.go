package cmd

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/httpfire"
	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/runplan"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/builtin"
	"github.com/racetest/racetest/suite"
	"github.com/spf13/pflag"
)

// Every way of firing takes a knob of every run: a row of shapeFlagTable
// on firesBursts is a flag of run, demo, sql, redis, mongo, http, matrix,
// explore and replay (built-in scenarios and scripts).
func TestEveryWayOfFiringTakesTheSharedKnobs(t *testing.T) {
	io, _, _ := testStreams()
	root := newCmdRoot(&factory{IO: io, Registry: memoryOnly()})
	verbs := [][]string{{"run"}, {"demo"}, {"sql"}, {"redis"}, {"mongo"}, {"http"}, {"matrix"},
		{"explore"}, {"explore", "sql"}, {"explore", "redis"}, {"replay"}, {"replay", "mongo"}}
	shared := 0
	for _, f := range shapeFlagTable {
		if f.on&firesBursts != firesBursts {
			continue
		}
		shared++
		for _, v := range verbs {
			c, _, err := root.Find(v)
			if err != nil || c.Name() != v[len(v)-1] {
				t.Fatalf("no command %q: %v", strings.Join(v, " "), err)
			}
			if c.Flags().Lookup(f.name) == nil {
				t.Errorf("racetest %s has no --%s, a knob of every run", strings.Join(v, " "), f.name)
			}
		}
	}
	if shared < 2 {
		t.Fatalf("only %d flags of the table are on every way of firing: -n and --timeout at least", shared)
	}
}

// A flag of the shape is a key of a suite's defaults and cases, by the
// same name ('-' written '_'), and every such key is a flag: the suite
// reads the same shape. The exceptions are keys a suite writes elsewhere.
func TestShapeFlagsAreSuiteKeys(t *testing.T) {
	elsewhere := map[string]string{
		"allowed":    "under http:, sql:, redis: and mongo:",
		"solo-every": "solo_every, under http:, sql:, redis: and mongo:",
		"effects":    "a case's http: or script effects",
	}
	keys := map[string]bool{}
	st := reflect.TypeOf(suite.Shape{})
	for i := range st.NumField() {
		key, _, _ := strings.Cut(st.Field(i).Tag.Get("yaml"), ",")
		keys[key] = true
	}
	flags := map[string]bool{"release": true} // run's --release, registered beside the table
	for _, f := range shapeFlagTable {
		key := strings.ReplaceAll(f.name, "-", "_")
		flags[key] = true
		if _, ok := elsewhere[f.name]; !ok && !keys[key] {
			t.Errorf("--%s has no suite key %q: add it to suite.Shape (suite/schema.go) and its apply", f.name, key)
		}
	}
	for key := range keys {
		if !flags[key] {
			t.Errorf("the suite key %q is no flag of the shape (cmd/flags.go's shapeFlagTable)", key)
		}
	}
}

// A flag's own check (shapeFlag.check) runs on every command that takes
// it, before anything connects: a new row with a check needs nothing more.
func TestEveryWayOfFiringRunsTheRowsChecks(t *testing.T) {
	knob := 0
	saved := shapeFlagTable
	t.Cleanup(func() { shapeFlagTable = saved })
	shapeFlagTable = append(slices.Clone(saved), shapeFlag{name: "trial-knob", on: firesBursts,
		add: func(fs *pflag.FlagSet, _ *shapeFlags, _ verbShape, usage string) {
			fs.IntVar(&knob, "trial-knob", 0, usage)
		},
		usage: "a knob of this test",
		check: func(runplan.Shape) error {
			if knob < 0 {
				return usageErrorf("--trial-knob cannot be negative (got %d)", knob)
			}
			return nil
		}})
	for _, args := range [][]string{
		{"run", "check-then-write"},
		{"demo"},
		{"matrix", "-b", "postgres"},
		{"sql", "-b", "postgres", "--attempt", "SELECT 1;", "--effects", "SELECT 1;"},
		{"redis", "--attempt", "GET k", "--effects", "GET k"},
		{"mongo", "--attempt", `{"ping": 1}`, "--effects", `{"count": "x"}`},
		{"http", "http://127.0.0.1:1/x", "--success", "200"},
		{"explore", "check-then-write"},
		{"explore", "sql", "-b", "postgres", "--attempt", "SELECT 1;", "--effects", "SELECT 1;"},
		{"replay", "check-then-write", "--schedule", "A1 B1 A2 B2"},
	} {
		io, _, errOut := testStreams()
		code := execIO(t, io, builtin.Registry(), append(args, "--trial-knob", "-1")...)
		if code != exitUsage || !strings.Contains(errOut.String(), "--trial-knob cannot be negative (got -1)") {
			t.Errorf("racetest %s --trial-knob -1: exit %d, stderr %q; want exit %d naming the flag", strings.Join(args, " "), code, errOut.String(), exitUsage)
		}
	}
}

// An HTTP plan carries the shape it was made from, for 'racetest http' and
// a suite's http: cases alike: what builds its target reads knobs there.
func TestHTTPPlanCarriesItsShape(t *testing.T) {
	sh := runplan.DefaultShape()
	sh.Attempts, sh.Timeout = 5, 3*time.Second
	pl, err := newHTTPPlan(httpfire.Config{URL: "http://127.0.0.1:1/x", Success: httpfire.Success{Status: []string{"200"}}}, sh,
		scenarios.Params{RunID: "r1", Attempts: 5, Replicas: 1}, runner.NewConfig(sh.Options()...), "GET /x", "", report.Expect{Kind: report.ExpectSafe}, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(pl.Shape, sh) {
		t.Errorf("plan's shape %+v, want %+v", pl.Shape, sh)
	}
}
