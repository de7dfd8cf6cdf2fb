package bench

import (
	"context"
	"sort"
	"sync"
	"time"
)

// naiveBurst fires n attempts the way a hand-written race test does: a
// goroutine per attempt, started one after another, no warm-up and no gate.
// Each attempt's "release" is its goroutine's start; the spread and overlap
// are measured as the runner measures its own.
func naiveBurst(ctx context.Context, n int, attempt func(ctx context.Context, worker int) error) (spread time.Duration, overlap int, errs int) {
	starts := make([]time.Time, n)
	ends := make([]time.Time, n)
	failed := make([]bool, n)
	var wg sync.WaitGroup
	wg.Add(n)
	for i := range n {
		go func() {
			defer wg.Done()
			starts[i] = time.Now()
			failed[i] = attempt(ctx, i) != nil
			ends[i] = time.Now()
		}()
	}
	wg.Wait()
	return burstFigures(starts, ends, failed)
}

// burstFigures are a hand-written burst's spread (first to last start),
// overlap and failed attempts.
func burstFigures(starts, ends []time.Time, failed []bool) (spread time.Duration, overlap int, errs int) {
	n := len(starts)
	first, last := starts[0], starts[0]
	for i := range n {
		if starts[i].Before(first) {
			first = starts[i]
		}
		if starts[i].After(last) {
			last = starts[i]
		}
		if failed[i] {
			errs++
		}
	}
	return last.Sub(first), inFlight(starts, ends), errs
}

// inFlight is the most intervals [start, end] open at one instant; touching
// is not overlapping.
func inFlight(starts, ends []time.Time) int {
	type edge struct {
		at    time.Time
		delta int
	}
	edges := make([]edge, 0, 2*len(starts))
	for i := range starts {
		edges = append(edges, edge{starts[i], +1}, edge{ends[i], -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		if !edges[i].at.Equal(edges[j].at) {
			return edges[i].at.Before(edges[j].at)
		}
		return edges[i].delta < edges[j].delta
	})
	cur, most := 0, 0
	for _, e := range edges {
		cur += e.delta
		most = max(most, cur)
	}
	return most
}

func median[T int | time.Duration](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	s := append([]T(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
