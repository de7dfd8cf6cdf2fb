package httpfire

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/runs"
)

// redeemService is a small HTTP service of the test's own on a SQL server:
// POST /coupon?code=C makes a coupon, POST /redeem?code=C redeems it —
// naive (read the flag, then write), fixed (one conditional UPDATE), or
// erratic (fixed, but every third redemption is recorded twice:
// an application that does not do the same thing twice). In the sell
// modes the coupon is a stock of 10 units and POST /redeem?code=C&q=Q
// sells Q of them where Q are left, recording the sale: sell-locked locks
// the row first (SELECT … FOR UPDATE), sell-naive does not; which sales
// fit depends on the order the requests reach the store.
type redeemService struct {
	db                  *sqldb.DB
	conns               chan sqldb.Conn
	coupons, redemption string
	mode                string
	redeemed            atomic.Int32 // erratic: every third records twice
	quantities          bool         // q is the attempt: sell q%4+1 units
}

func newRedeemService(t *testing.T, d sqldb.Dialect, mode string) *redeemService {
	t.Helper()
	ctx := context.Background()
	db := testenv.SQL(t, d)
	b := make([]byte, 4)
	rand.Read(b)
	s := &redeemService{db: db, mode: mode, conns: make(chan sqldb.Conn, 8),
		coupons: "racetest_" + hex.EncodeToString(b) + "_coupons", redemption: "racetest_" + hex.EncodeToString(b) + "_redemptions"}
	// Registered as a run is, so that 'racetest clean' drops the tables of
	// a test killed before its cleanup (a mutant's at its time-out,
	// scripts/mutation.sh httpfire).
	id, rd := hex.EncodeToString(b), runs.MySQL
	if d == sqldb.Postgres {
		rd = runs.Postgres
	}
	register := func(f func(context.Context, runs.Dialect, runs.SQL, string) error) error {
		return db.Admin(ctx, func(ctx context.Context, q sqldb.Querier) error { return f(ctx, rd, runs.Querier(q), id) })
	}
	if err := register(func(ctx context.Context, d runs.Dialect, q runs.SQL, id string) error {
		return runs.RegisterSQL(ctx, d, q, runs.New(id))
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := register(runs.UnregisterSQL); err != nil {
			t.Errorf("unregister run %s: %v", id, err)
		}
	})
	for _, q := range []string{
		"CREATE TABLE " + s.coupons + " (code VARCHAR(64) PRIMARY KEY, used INT NOT NULL DEFAULT 0)",
		"CREATE TABLE " + s.redemption + " (code VARCHAR(64) NOT NULL, n INT NOT NULL)",
	} {
		if err := db.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, tb := range []string{s.coupons, s.redemption} {
			if err := db.Exec(context.Background(), "DROP TABLE "+tb); err != nil {
				t.Errorf("drop %s by hand: %v", tb, err)
			}
		}
	})
	pool, conns, err := db.Warm(ctx, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		close(s.conns)
		for c := range s.conns {
			c.Close()
		}
		pool.Close()
	})
	for _, c := range conns {
		s.conns <- c
	}
	return s
}

func (s *redeemService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	code := r.URL.Query().Get("code")
	c := <-s.conns
	defer func() { s.conns <- c }()
	q := func(text string) string { return s.db.Dialect().Rebind(text) }
	if r.URL.Path == "/coupon" {
		if _, _, err := c.Exec(ctx, q("INSERT INTO "+s.coupons+" (code) VALUES (?)"), code); err != nil {
			http.Error(w, err.Error(), 500)
		}
		return
	}
	redeemed := false
	// Some work before the store, as a real handler has: a server that
	// answers at once looks like one that serves one request at a time.
	time.Sleep(2 * time.Millisecond)
	err := sqldb.InTx(ctx, c, "", func(tx sqldb.Tx) error {
		if strings.HasPrefix(s.mode, "sell") {
			qty := r.URL.Query().Get("q")
			lock := " FOR UPDATE"
			if s.mode == "sell-naive" {
				lock = ""
			}
			var sold int
			if err := tx.QueryRow(ctx, q("SELECT used FROM "+s.coupons+" WHERE code = ?"+lock), code).Scan(&sold); err != nil {
				return err
			}
			var n int
			fmt.Sscan(qty, &n)
			if s.quantities {
				n = n%4 + 1
			}
			if sold+n > 10 {
				return nil
			}
			time.Sleep(2 * time.Millisecond)
			if _, _, err := tx.Exec(ctx, q("UPDATE "+s.coupons+" SET used = ? WHERE code = ?"), sold+n, code); err != nil {
				return err
			}
			redeemed = true
			_, _, err := tx.Exec(ctx, q("INSERT INTO "+s.redemption+" (code, n) VALUES (?, ?)"), code, n)
			return err
		}
		if s.mode == "naive" {
			var used int
			if err := tx.QueryRow(ctx, q("SELECT used FROM "+s.coupons+" WHERE code = ?"), code).Scan(&used); err != nil || used != 0 {
				return err
			}
			time.Sleep(2 * time.Millisecond)
			if _, _, err := tx.Exec(ctx, q("UPDATE "+s.coupons+" SET used = 1 WHERE code = ?"), code); err != nil {
				return err
			}
		} else {
			n, _, err := tx.Exec(ctx, q("UPDATE "+s.coupons+" SET used = 1 WHERE code = ? AND used = 0"), code)
			if err != nil || n == 0 {
				return err
			}
		}
		redeemed = true
		times := 1
		if s.mode == "erratic" && s.redeemed.Add(1)%3 == 0 {
			times = 2
		}
		for range times {
			if _, _, err := tx.Exec(ctx, q("INSERT INTO "+s.redemption+" (code, n) VALUES (?, 1)"), code); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	if !redeemed {
		http.Error(w, "already redeemed", http.StatusConflict)
	}
}

func runAutoHTTP(t *testing.T, d sqldb.Dialect, mode string) (*runner.Result, *redeemService) {
	t.Helper()
	svc := newRedeemService(t, d, mode)
	srv := httptest.NewServer(svc)
	t.Cleanup(srv.Close)
	p := scenarios.Params{RunID: scenarios.NewRunID(), Attempts: 6, Replicas: 1, Conn: testenv.Conns("postgres", "mysql")}
	url := srv.URL + "/redeem?code={{.Token}}"
	if strings.HasPrefix(mode, "sell") {
		// Requests 0 to 5 order 1, 2, 3, 4, 1, 2 units: 13 of a stock of 10.
		url += "&q={{.Attempt}}"
		svc.quantities = true
	}
	tg, err := New(Config{Method: "POST", URL: url, Setup: "POST " + srv.URL + "/coupon?code={{.Token}}",
		Effects: "auto:" + string(d), Watch: []string{svc.coupons + "," + svc.redemption}}, p)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := runner.Run(ctx, tg, runner.Attempts(6), runner.Bursts(10), runner.SoloTwins(1))
	if err != nil {
		t.Fatal(err)
	}
	if tg.Release() != LastByte {
		t.Errorf("release %s: --effects auto takes last-byte", tg.Release())
	}
	return res, svc
}

func TestEffectsAutoOverHTTP(t *testing.T) {
	for _, d := range []sqldb.Dialect{sqldb.Postgres, sqldb.MySQL} {
		t.Run(string(d), func(t *testing.T) {
			t.Run("naive", func(t *testing.T) {
				res, svc := runAutoHTTP(t, d, "naive")
				if res.Twins.Reason() != "" || res.Violations() == 0 {
					t.Fatalf("naive: %d violations, reason %q", res.Violations(), res.Twins.Reason())
				}
				for _, b := range res.Bursts {
					if b.Violated() && b.Twin.Diffs[0].Key != svc.redemption+runner.RowsSuffix {
						t.Errorf("burst %d differs in %v, want %s", b.Index, b.Twin.Diffs, svc.redemption)
					}
				}
			})
			t.Run("fixed", func(t *testing.T) {
				res, _ := runAutoHTTP(t, d, "fixed")
				if res.Twins.Reason() != "" || res.Violations()+res.Lost() != 0 || 2*res.Tested() < len(res.Bursts) {
					t.Fatalf("fixed: %d violations, %d lost, %d of %d tested, reason %q",
						res.Violations(), res.Lost(), res.Tested(), len(res.Bursts), res.Twins.Reason())
				}
				if res.Twins.Solos != 10 {
					t.Errorf("%d solo twins, want 10", res.Twins.Solos)
				}
			})
			// Correct code whose outcome depends on the order of the
			// requests: SAFE, each burst equal to some serial order of its
			// requests; the same sales unlocked oversell: RACE.
			t.Run("sell-locked", func(t *testing.T) {
				res, _ := runAutoHTTP(t, d, "sell-locked")
				if res.Twins.Reason() != "" || res.Violations()+res.Lost() != 0 || 2*res.Tested() < len(res.Bursts) {
					t.Fatalf("sell-locked: %d violations, %d lost, %d of %d tested, reason %q",
						res.Violations(), res.Lost(), res.Tested(), len(res.Bursts), res.Twins.Reason())
				}
			})
			t.Run("sell-naive", func(t *testing.T) {
				res, _ := runAutoHTTP(t, d, "sell-naive")
				if res.Violations()+res.Lost() == 0 {
					t.Fatalf("sell-naive: no burst differed from every serial order (reason %q)", res.Twins.Reason())
				}
			})
			t.Run("erratic", func(t *testing.T) {
				res, _ := runAutoHTTP(t, d, "erratic")
				if !strings.Contains(res.Twins.Reason(), "solo runs differ") {
					t.Fatalf("an erratic service: reason %q", res.Twins.Reason())
				}
				if res.Tested() != 0 || res.Violations() != 0 {
					t.Errorf("an erratic service was judged: %d tested", res.Tested())
				}
			})
		})
	}
}

func TestEffectsAutoInput(t *testing.T) {
	p := scenarios.Params{RunID: "r1"}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{URL: "http://127.0.0.1:1/", Effects: "auto:oracle"}, "auto:postgres, auto:mysql, auto:redis or auto:mongo"},
		{Config{URL: "http://127.0.0.1:1/", Effects: "auto:redis"}, "--watch 'PATTERN"},
		{Config{URL: "http://127.0.0.1:1/", Effects: "auto:postgres", Release: SinglePacket}, "single-packet cannot send one alone"},
		{Config{URL: "http://127.0.0.1:1/", Watch: []string{"t"}}, "there is no auto: effects check"},
	} {
		_, err := New(c.cfg, p)
		var in *InputError
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &in) {
			t.Errorf("%+v: %v, want an input error with %q", c.cfg, err, c.want)
		}
	}
	tg, err := New(Config{URL: "http://127.0.0.1:1/", Effects: "auto:postgres", Watch: []string{"a_{{.RunID}}, b"}}, p)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(tg.auto.watch, "|"); got != "a_r1|b" {
		t.Errorf("watch %s", got)
	}
}

// A redeem service on Redis: naive (GET the flag, then SET it and record
// the redemption) or fixed (SET NX).
func TestEffectsAutoOverHTTPOnRedis(t *testing.T) {
	url := testenv.URL("redis")
	rdb, prefix := testenv.OwnRedis(t)
	for _, mode := range []string{"naive", "fixed"} {
		t.Run(mode, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ctx := r.Context()
				code := r.URL.Query().Get("code")
				used, redeemed := prefix+":"+mode+":used:"+code, prefix+":"+mode+":redeemed:"+code
				won := false
				time.Sleep(2 * time.Millisecond) // a handler's own work
				if mode == "naive" {
					if rdb.Get(ctx, used).Val() == "" {
						time.Sleep(2 * time.Millisecond)
						rdb.Set(ctx, used, "1", time.Minute)
						won = true
					}
				} else {
					won = rdb.SetNX(ctx, used, "1", time.Minute).Val()
				}
				if !won {
					http.Error(w, "already", http.StatusConflict)
					return
				}
				rdb.Incr(ctx, redeemed)
			}))
			defer srv.Close()
			p := scenarios.Params{RunID: scenarios.NewRunID(), Conn: scenarios.NewConnections(map[string]string{"redis": url})}
			tg, err := New(Config{Method: "POST", URL: srv.URL + "/?code={{.Token}}", Effects: "auto:redis",
				Watch: []string{prefix + ":" + mode + ":used:*," + prefix + ":" + mode + ":redeemed:*"}}, p)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := runner.Run(ctx, tg, runner.Attempts(6), runner.Bursts(10), runner.SoloTwins(1))
			if err != nil {
				t.Fatal(err)
			}
			if why := res.Twins.Reason(); why != "" {
				t.Fatal(why)
			}
			if mode == "fixed" {
				if res.Violations() != 0 || 2*res.Tested() < len(res.Bursts) {
					t.Fatalf("fixed: %d violations, %d tested", res.Violations(), res.Tested())
				}
				return
			}
			want := prefix + ":naive:redeemed:*.value"
			found := false
			for _, b := range res.Bursts {
				for _, d := range b.Twin.Diffs {
					found = found || (d.Key == want && b.Violated())
				}
			}
			if !found {
				t.Fatalf("no burst counted more redemptions (%s) than its twin", want)
			}
		})
	}
}

// An auto: run is judged by its snapshots, not by its invariants alone.
func TestAutoTargetIsCounted(t *testing.T) {
	inv := []effectsCheck{nil}
	if (&Target{auto: &autoCheck{}, invariants: inv}).Uncounted() {
		t.Error("an auto: target with an invariant is Uncounted")
	}
	if !(&Target{invariants: inv}).Uncounted() {
		t.Error("a target with only an invariant is not Uncounted")
	}
}

// --effects auto's snapshot gets at least 30 s, whatever the attempts'
// timeout: a snapshot reads whole tables, and a short --timeout (made for
// a fast endpoint) must not fail every burst's reading of the store.
func TestTheSnapshotHasItsOwnTime(t *testing.T) {
	svc := newRedeemService(t, sqldb.Postgres, "naive")
	p := scenarios.Params{RunID: scenarios.NewRunID(), Attempts: 2, Replicas: 1, Conn: testenv.Conns("postgres")}
	tg, err := New(Config{Method: "POST", URL: "http://127.0.0.1:9/redeem", Effects: "auto:postgres", Watch: []string{svc.coupons + "," + svc.redemption}}, p)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := tg.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	defer tg.Cleanup(ctx)
	tg.c.timeout = time.Nanosecond
	if _, err := tg.Snapshot(ctx); err != nil {
		t.Errorf("a snapshot under a 1ns attempt timeout: %v, want it read within its own 30 s", err)
	}
}
