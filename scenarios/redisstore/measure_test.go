package redisstore_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// MeasureEnv turns on TestMeasureCheckThenWrite, which takes a few seconds
// and states no expectation: it prints what it saw.
const MeasureEnv = "RACETEST_MEASURE"

// TestMeasureCheckThenWrite measures how often check-then-write, with no
// injected gap, shows more than one effect: racetest's release (a dedicated
// pre-pinged connection per worker and a gate) beside a naive launcher (a
// goroutine per attempt on a fresh default pool, no warm-up, no gate).
//
//	RACETEST_MEASURE=1 go test -run TestMeasureCheckThenWrite -v ./scenarios/redisstore/
func TestMeasureCheckThenWrite(t *testing.T) {
	if os.Getenv(MeasureEnv) == "" {
		t.Skipf("set %s=1 to measure (prints figures, asserts none)", MeasureEnv)
	}
	cl := needServer(t)
	bursts := 200
	if s := os.Getenv("RACETEST_MEASURE_BURSTS"); s != "" {
		bursts, _ = strconv.Atoi(s)
	}
	// The machine is shared and its load swings within seconds, so the two
	// launchers take turns in chunks of chunk bursts rather than one after
	// the other: both see the same load.
	const chunk = 20
	type row struct {
		n        int
		launcher string
		raced    int
		effects  []int
		spreads  []time.Duration
		overlaps []int
	}
	var rows []row
	for _, n := range []int{2, 16} {
		gate, nv := row{n: n, launcher: "gate, pre-dialled"}, row{n: n, launcher: "naive"}
		for done := 0; done < bursts; done += chunk {
			k := min(chunk, bursts-done)
			tg, _ := build(t, scenarios.CheckThenWrite, testURL(), n, nil)
			res, err := runner.Run(context.Background(), tg, runner.Attempts(n), runner.Bursts(k))
			if err != nil {
				t.Fatal(err)
			}
			gate.raced += res.Violations()
			for _, b := range res.Bursts {
				gate.effects = append(gate.effects, b.Effects)
				gate.spreads = append(gate.spreads, b.Spread)
				gate.overlaps = append(gate.overlaps, b.Overlap)
			}
			raced, effects := naive(t, cl, n, k)
			nv.raced += raced
			nv.effects = append(nv.effects, effects...)
		}
		rows = append(rows, gate, nv)
	}
	t.Logf("check-then-write, no gap, %d bursts each, against %s", bursts, testURL())
	t.Logf("%-4s %-18s %-22s %-12s %-14s %s", "N", "launcher", "bursts with >1 effect", "median eff.", "median spread", "median overlap")
	for _, r := range rows {
		spread, overlap := "-", "-"
		if len(r.spreads) > 0 {
			spread, overlap = fmt.Sprint(median(r.spreads)), fmt.Sprint(median(r.overlaps))
		}
		t.Logf("%-4d %-18s %4d/%d = %5.1f%%        %-12d %-14s %s", r.n, r.launcher, r.raced, bursts,
			100*float64(r.raced)/float64(bursts), median(r.effects), spread, overlap)
	}
}

// naive is the launcher a developer writes first: for each burst a fresh
// client with go-redis's defaults, and a goroutine per attempt that runs
// EXISTS, then RPUSH if it was absent. It returns the bursts with more than
// one effect and each burst's effects.
func naive(t *testing.T, cl *redis.Client, n, bursts int) (raced int, effects []int) {
	t.Helper()
	ctx := context.Background()
	opt, err := redis.ParseURL(testURL())
	if err != nil {
		t.Fatal(err)
	}
	prefix := "racetest_" + scenarios.NewRunID() + "_naive_"
	defer func() {
		for _, k := range prefixKeys(t, cl, prefix) {
			cl.Del(ctx, k)
		}
	}()
	for b := range bursts {
		key := prefix + strconv.Itoa(b)
		c := redis.NewClient(opt)
		var wg sync.WaitGroup
		for w := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if c.Exists(ctx, key).Val() == 0 {
					c.RPush(ctx, key, w)
				}
			}()
		}
		wg.Wait()
		c.Close()
		got, err := cl.LLen(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		effects = append(effects, int(got))
		if got > 1 {
			raced++
		}
	}
	return raced, effects
}

func median[T int | time.Duration](xs []T) T {
	s := append([]T(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
