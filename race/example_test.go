package race_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/racetest/racetest/race"
)

// store is a coupon store in memory whose every operation takes a round
// trip, as a database's would. Every access is locked: the Go race detector
// has nothing to say about either Redeem below.
type store struct {
	mu          sync.Mutex
	used        map[string]bool
	redemptions map[string]int
}

var errUsed = errors.New("coupon already redeemed")

func roundTrip() { time.Sleep(500 * time.Microsecond) }

func (s *store) isUsed(code string) bool {
	roundTrip()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used[code]
}

func (s *store) markUsed(code string) {
	roundTrip()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used[code] = true
	s.redemptions[code]++
}

// useIfFree is one atomic conditional write, as UPDATE … WHERE used = 0 is.
func (s *store) useIfFree(code string) bool {
	roundTrip()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used[code] {
		return false
	}
	s.used[code] = true
	s.redemptions[code]++
	return true
}

// redeemNaive checks, then writes: the gap between them lets several through.
func (s *store) redeemNaive(w *race.Worker, code string) error {
	w.Step("check")
	if s.isUsed(code) {
		return errUsed
	}
	w.Step("act")
	s.markUsed(code)
	return nil
}

// redeemFixed asks the store to write only if the coupon is free.
func (s *store) redeemFixed(w *race.Worker, code string) error {
	w.Step("act")
	if !s.useIfFree(code) {
		return errUsed
	}
	return nil
}

// In a test, race.Test(t, c) fails the test on anything but SAFE, with the
// table and the worst burst's timeline; race.Run is the same without a
// testing.T.
func Example() {
	s := &store{used: map[string]bool{}, redemptions: map[string]int{}}
	redeem := map[string]func(*race.Worker, string) error{"naive": s.redeemNaive, "fixed": s.redeemFixed}
	for _, name := range []string{"naive", "fixed"} {
		rep, err := race.Run(context.Background(), race.Case{
			Name:     name,
			Attempts: 8, Bursts: 50,
			Subject: func(ctx context.Context, b race.Burst) (any, error) { return b.Token(), nil },
			Attempt: func(ctx context.Context, code any, w *race.Worker) race.Outcome {
				return race.From(redeem[name](w, code.(string)), errUsed)
			},
			Effects: func(ctx context.Context, code any) (int, error) {
				s.mu.Lock()
				defer s.mu.Unlock()
				return s.redemptions[code.(string)], nil
			},
		})
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: %s\n", name, rep.Verdict)
	}
	// Output:
	// naive: RACE
	// fixed: SAFE
}
