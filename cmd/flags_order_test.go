package cmd

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/builtin"
)

// TestFlagErrorsComeInAFixedOrder: of two bad flags, a user always hears of
// the same one first (the first in the command's own order), run after run;
// a check that ranged over a Go map named either, at random.
func TestFlagErrorsComeInAFixedOrder(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		first string
	}{
		{[]string{"http", "http://127.0.0.1:1/", "-n", "0", "--bursts", "0"}, "--attempts must be at least 1"},
		{[]string{"sql", "-b", "postgres", "--attempt", "SELECT 1;", "--effects", "SELECT 1;", "-n", "0", "--bursts", "0"}, "--attempts must be at least 1"},
		{[]string{"run", "check-then-write", "-n", "0", "--bursts", "0", "--replicas", "0", "--waves", "0"}, "--attempts must be at least 1"},
		{[]string{"run", "check-then-write", "--bursts", "0", "--replicas", "0", "--waves", "0"}, "--bursts must be at least 1"},
		{[]string{"run", "check-then-write", "--gap", "-1s", "--latency", "-1s", "--ttl", "-1s", "--timeout", "-1s"}, "--gap cannot be negative"},
		{[]string{"run", "check-then-write", "--ttl", "-1s", "--timeout", "-1s"}, "--ttl cannot be negative"},
		{[]string{"serve", "check-then-write", "--latency", "-1s", "--ttl", "-1s", "--timeout", "-1s"}, "--latency cannot be negative"},
	} {
		// Go starts a small map's iteration at one of its entries at
		// random: 12 runs all alike leave a map-ordered check 1 chance in
		// 2048 of passing.
		for i := 0; i < 12; i++ {
			_, errOut, code := execCmd(t, false, tc.args...)
			if code != exitUsage || !strings.Contains(errOut, tc.first) {
				t.Fatalf("racetest %s (run %d): exit %d, %q; want exit 2 with %q first", strings.Join(tc.args, " "), i+1, code, errOut, tc.first)
			}
		}
	}
}

// TestMatrixNamesTheFirstUnknownVariant: of two variants no scenario has,
// the matrix's error names the first as given, every time; a check that
// ranged over the set of variants named either at random (each run 1
// chance in 2: 50 runs alike leave it about 1 in 10^15 of passing).
func TestMatrixNamesTheFirstUnknownVariant(t *testing.T) {
	args := append([]string{"matrix", "--scenario", "check-then-write", "--variant", "nope-b,plain,nope-a"}, nowhere...)
	for i := 0; i < 50; i++ {
		_, errOut, code := execWith(t, builtin.Registry(), args...)
		if code != exitUsage || !strings.Contains(errOut, `has a variant "nope-b" on`) {
			t.Fatalf("run %d: exit %d, %q; want exit 2 naming nope-b, the first unknown variant given", i+1, code, errOut)
		}
	}
}

// TestRunLeavesItsOptionsAsParsed: a run works on its own copy of the
// shape (the restart's waves, a fresh seed): the parsed options stay as
// the user gave them, so a test or a second run reads what was asked.
func TestRunLeavesItsOptionsAsParsed(t *testing.T) {
	io, _, _ := testStreams()
	f := &factory{IO: io, Registry: memoryOnly()}
	var after runOptions
	c := newCmdRun(f, func(ctx context.Context, o *runOptions) error {
		err := runRun(ctx, o)
		after = *o
		return err
	})
	c.SetArgs([]string{"check-then-write", "-n", "2", "--bursts", "1", "--restart-between", "-o", "json"})
	c.SetOut(&strings.Builder{})
	if err := c.ExecuteContext(context.Background()); exitCode(err) != exitOK && exitCode(err) != exitViolated {
		t.Fatalf("run: %v", err)
	}
	if s := after.Shape; s.Waves != 1 || s.Deploy || s.Seed != 0 {
		t.Errorf("after the run the options hold waves %d, deploy %v, seed %d: want the flags as given (1, false, 0)", s.Waves, s.Deploy, s.Seed)
	}
}

// TestVerbsLeaveTheirOptionsAsParsed: explore, matrix and demo read their
// options and never change them (explore kept its run id there, matrix and
// demo the seed validate draws, demo the solo twins of --effects auto):
// just after the run they are as they were just before it.
func TestVerbsLeaveTheirOptionsAsParsed(t *testing.T) {
	unchanged := func(name string, before, after any) {
		if !reflect.DeepEqual(before, after) {
			t.Errorf("%s changed its options while running:\nbefore %+v\nafter  %+v", name, before, after)
		}
	}
	newFactory := func(reg *scenarios.Registry) *factory {
		io, _, _ := testStreams()
		return &factory{IO: io, Registry: reg}
	}
	for _, tc := range []struct {
		c    *cobra.Command
		args []string
	}{
		{newCmdExplore(newFactory(memoryOnly()), func(ctx context.Context, o *exploreOptions) error {
			before := *o
			defer func() { unchanged("explore", before, *o) }()
			return runExplore(ctx, o)
		}), []string{"check-then-write", "--block-after", "1s", "--keep", "-o", "json"}},
		{newCmdMatrix(newFactory(isolationRegistry()), func(ctx context.Context, o *matrixOptions) error {
			before := *o
			defer func() { unchanged("matrix", before, *o) }()
			return runMatrix(ctx, o)
		}), []string{"-n", "2", "--bursts", "1", "-o", "json"}},
		{newCmdDemo(newFactory(memoryOnly()), func(ctx context.Context, o *demoOptions) error {
			before := *o
			defer func() { unchanged("demo", before, *o) }()
			return runDemo(ctx, o)
		}), []string{"-n", "2", "--bursts", "1", "--effects", "auto", "-o", "json"}},
	} {
		tc.c.SetArgs(tc.args)
		tc.c.SetOut(&strings.Builder{})
		tc.c.SetErr(&strings.Builder{})
		if err := tc.c.ExecuteContext(context.Background()); exitCode(err) > exitViolated {
			t.Errorf("%s %q: %v", tc.c.Name(), tc.args, err)
		}
	}
}
