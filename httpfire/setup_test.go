package httpfire_test

import (
	"context"
	"testing"
	"time"

	"github.com/racetest/racetest/httpfire"
	"github.com/racetest/racetest/runner"
)

// A server with fewer threads than a burst has attempts, each thread
// owning a connection from accept to close, must still get every burst's
// setup request and http: effects check: they never wait behind racetest's
// own idle connections (issue 25: gunicorn's gthread workers gave each idle
// connection a thread, and the setup timed out behind them).
func TestSetupGetsPastIdleConnections(t *testing.T) {
	for _, mode := range []httpfire.Release{httpfire.LastByte, httpfire.Barrier} {
		t.Run(string(mode), func(t *testing.T) {
			const k, n, bursts = 3, 8, 4
			srv := newBoundedServer(t, k, newSubjects(time.Millisecond))
			target, err := httpfire.New(httpfire.Config{
				Method:  "POST",
				URL:     srv.URL + "/attempt?key={{.Token}}",
				Setup:   "PUT " + srv.URL + "/setup?key={{.Token}}",
				Effects: "http:" + srv.URL + "/count?key={{.Token}}",
				Release: mode,
				Timeout: 2 * time.Second,
			}, params())
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			res, err := runner.Run(ctx, target, runner.Attempts(n), runner.Bursts(bursts), runner.Timeout(5*time.Second))
			if err != nil {
				t.Fatalf("a server with %d threads and a burst of %d: %v", k, n, err)
			}
			if len(res.Bursts) != bursts {
				t.Fatalf("%d bursts ran, want %d", len(res.Bursts), bursts)
			}
			for _, b := range res.Bursts {
				// The endpoint races (k threads can each redeem): what
				// matters is that every request was answered and counted.
				if ex := b.Outcomes[runner.Executed]; b.Effects < 1 || b.Effects != ex || ex+b.Outcomes[runner.Declined] != n {
					t.Errorf("burst %d: effects %d, outcomes %v; want every attempt answered and each success counted", b.Index, b.Effects, b.Outcomes)
				}
			}
		})
	}
}
