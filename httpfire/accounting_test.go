package httpfire_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/racetest/racetest/httpfire"
	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
)

// counterServer counts hits in one shared counter, as a view counter or a
// balance does: POST /hit works for 2 ms, then reads the counter, waits,
// and writes it plus one (a lost update, unless locked); GET /count
// answers it. Locked, the lock covers the read and the write only: a lock
// around the whole request would make the server answer one request at a
// time, which the run rightly calls INCONCLUSIVE (TestSerialServer…).
func counterServer(t *testing.T, locked bool) string {
	var mu, lock sync.Mutex
	hits := 0
	srv := newServer(t, plainH1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			mu.Lock()
			fmt.Fprint(w, hits)
			mu.Unlock()
			return
		}
		if r.URL.Path != "/hit" {
			return // the release's probe of the server
		}
		time.Sleep(2 * time.Millisecond) // the request's own work, in parallel
		if locked {
			// The read and the write under one lock, held only for them, as
			// UPDATE … SET hits = hits + 1 does: the server still handles
			// the burst's requests at once, so the run tests the guard.
			lock.Lock()
			defer lock.Unlock()
		}
		mu.Lock()
		read := hits
		mu.Unlock()
		time.Sleep(100 * time.Microsecond)
		mu.Lock()
		hits = read + 1
		mu.Unlock()
	}))
	return srv.URL
}

func runWith(t *testing.T, cfg httpfire.Config, opts ...runner.Option) *runner.Result {
	t.Helper()
	target, err := httpfire.New(cfg, params())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := runner.Run(ctx, target, append([]runner.Option{runner.Timeout(5 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// A lost update over HTTP reads LOST through accounting: every 200 must
// have landed once, and the shared counter, read as a change, says how many
// did — with no computed count and no --allowed N to work out.
func TestLostUpdateReadsLostThroughAccounting(t *testing.T) {
	url := counterServer(t, false)
	cfg := httpfire.Config{Method: "POST", URL: url + "/hit", Effects: "http:" + url + "/count"}
	res := runWith(t, cfg, runner.Attempts(8), runner.Bursts(10), runner.Accounting(true))
	a := report.Assess(report.Case{Name: "POST " + url + "/hit", Backend: "http", Result: res})
	if a.Verdict != report.Lost {
		t.Fatalf("a lost update under accounting: %s (%s), want LOST", a.Verdict, a.Why)
	}
	if !strings.Contains(a.Why, "fewer than its successes") {
		t.Errorf("why = %q, want it to say the effects fell short of the successes", a.Why)
	}
	if b := res.Bursts[0]; b.Before != 0 || res.Bursts[1].Before == 0 {
		t.Errorf("the shared counter read %d then %d before the first two bursts, want 0 then what the first left", b.Before, res.Bursts[1].Before)
	}

	// Locked, every success lands: SAFE.
	url = counterServer(t, true)
	cfg = httpfire.Config{Method: "POST", URL: url + "/hit", Effects: "http:" + url + "/count"}
	res = runWith(t, cfg, runner.Attempts(4), runner.Bursts(10), runner.Accounting(true))
	if a := report.Assess(report.Case{Backend: "http", Result: res}); a.Verdict != report.Safe {
		t.Errorf("a locked counter under accounting: %s (%s), want SAFE", a.Verdict, a.Why)
	}
}

// An http: invariant is read before and after each burst; a burst that
// breaks it is a RACE named after it, and a boolean answer must hold.
func TestHTTPInvariant(t *testing.T) {
	var mu sync.Mutex
	stock := map[string]int{}
	srv := newServer(t, plainH1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := r.URL.Query().Get("k")
		switch r.URL.Path {
		case "/ok": // the invariant: no item below 0
			mu.Lock()
			fmt.Fprint(w, stock[k] >= 0)
			mu.Unlock()
			return
		case "/setup":
			mu.Lock()
			stock[k] = 1
			mu.Unlock()
			return
		}
		mu.Lock()
		left := stock[k]
		mu.Unlock()
		if left < 1 {
			w.WriteHeader(http.StatusConflict)
			return
		}
		time.Sleep(2 * time.Millisecond) // check, then act
		mu.Lock()
		stock[k]--
		mu.Unlock()
	}))
	cfg := httpfire.Config{Method: "POST", URL: srv.URL + "/buy?k={{.Token}}", Setup: "POST " + srv.URL + "/setup?k={{.Token}}",
		Invariants: []string{"http:" + srv.URL + "/ok?k={{.Token}}"}}
	cfg.Success.Status = []string{"200"}
	res := runWith(t, cfg, runner.Attempts(6), runner.Bursts(5))
	if !res.Uncounted {
		t.Error("invariants without an effects check: the successes were counted as effects")
	}
	a := report.Assess(report.Case{Backend: "http", Result: res})
	if a.Verdict != report.Race || !strings.Contains(a.Why, "invariant http:"+srv.URL+"/ok?k={{.Token}} broken after") {
		t.Errorf("oversold stock: %s %q, want a RACE named after the invariant", a.Verdict, a.Why)
	}
}

// A redeem-once endpoint with a naive check-then-insert, under accounting:
// every caller told "redeemed" was recorded, so accounting holds and the
// run reads SAFE, while several callers per burst redeemed the same coupon.
// The verdict answers what accounting asks; the line beside it says what
// it did not ask, and how to ask it.
func TestAccountingOnARedeemOnceEndpointSaysSo(t *testing.T) {
	srv := newServer(t, plainH1, newSubjects(2*time.Millisecond))
	cfg := httpfire.Config{Method: "POST", URL: srv.URL + "/attempt?key={{.Token}}", Setup: "PUT " + srv.URL + "/setup?key={{.Token}}",
		Effects: "http:" + srv.URL + "/count?key={{.Token}}"}
	res := runWith(t, cfg, runner.Attempts(8), runner.Bursts(6), runner.Accounting(true))
	a := report.Assess(report.Case{Backend: "http", Result: res})
	if a.Verdict != report.Safe || !strings.Contains(a.Why, "not that the action happened once") {
		t.Fatalf("a redeem-once endpoint under accounting: %s (%s), want SAFE with the caveat", a.Verdict, a.Why)
	}
	// Asked as it should be, the same endpoint races.
	res = runWith(t, cfg, runner.Attempts(8), runner.Bursts(6), runner.Allowed(1))
	if a := report.Assess(report.Case{Backend: "http", Result: res}); a.Verdict != report.Race {
		t.Errorf("with --allowed 1: %s (%s), want RACE", a.Verdict, a.Why)
	}
}
