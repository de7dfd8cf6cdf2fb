package cmd

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/release/bench"
)

func TestBenchFlagsParse(t *testing.T) {
	f := &Factory{IO: func() *IOStreams { io, _, _ := Test(); return io }(), Registry: memoryOnly()}
	var got *BenchOptions
	c := NewCmdBench(f, func(_ context.Context, o *BenchOptions) error { got = o; return nil })
	c.SetArgs([]string{"--backends", "redis,postgres", "-n", "2,16", "--bursts", "40", "--chunk", "10", "--windows", "5us,1ms"})
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Backends, []string{"redis", "postgres"}) || !slices.Equal(got.Config.Attempts, []int{2, 16}) ||
		got.Config.Bursts != 40 || got.Config.Chunk != 10 ||
		!slices.Equal(got.Windows, []time.Duration{5 * time.Microsecond, time.Millisecond}) {
		t.Errorf("parsed options = %+v", got)
	}
}

func TestBenchDefaults(t *testing.T) {
	f := &Factory{IO: func() *IOStreams { io, _, _ := Test(); return io }(), Registry: memoryOnly()}
	var got *BenchOptions
	c := NewCmdBench(f, func(_ context.Context, o *BenchOptions) error { got = o; return nil })
	c.SetArgs(nil)
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Backends, bench.DefaultBackends) || !slices.Equal(got.Config.Attempts, bench.DefaultAttempts) ||
		got.Config.Bursts != bench.DefaultBursts || got.Config.Chunk != bench.DefaultChunk {
		t.Errorf("defaults = %+v", got)
	}
}

func TestBenchBadInputIsAUsageError(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--backends", "memory"},
		{"bench", "-n", "1"},
		{"bench", "--bursts", "0"},
		{"bench", "--windows", "0s"},
	} {
		_, stderr, code := execCmd(t, false, args...)
		if code != ExitUsage || !strings.Contains(stderr, "racetest: ") {
			t.Errorf("%q: exit %d, stderr %q; want a usage error", args, code, stderr)
		}
	}
}
