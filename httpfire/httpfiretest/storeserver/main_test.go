package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/racetest/racetest/httpfire"
	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/scenarios"
)

// Each store: the first attempt at a key writes, the next is refused, the
// count says one write; many attempts at once can write more than once (the
// race the target exists for, so it is not asserted, only that the count
// matches the 200s); the arrival stamp is on every answer; cleanup leaves
// nothing under the prefix.
func TestStores(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []string{"redis", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			prefix := "racetest_" + scenarios.NewRunID() + "_storeserver_"
			var st store
			var err error
			if kind == "redis" {
				st, err = newRedis(ctx, testenv.URL("redis"), prefix)
			} else {
				st, err = newPG(ctx, testenv.URL("postgres"), prefix)
			}
			if err != nil {
				testenv.Unavailable(t, kind, err)
			}
			srv := httptest.NewServer(handler(st))
			defer srv.Close()
			post := func(key string) int {
				resp, err := http.Post(srv.URL+"/attempt?key="+key, "text/plain", nil)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if resp.Header.Get(httpfire.ArrivalHeader) == "" {
					t.Errorf("no %s header", httpfire.ArrivalHeader)
				}
				return resp.StatusCode
			}
			count := func(key string) int {
				resp, err := http.Get(srv.URL + "/count?key=" + key)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				n, err := strconv.Atoi(strings.TrimSpace(string(b)))
				if err != nil {
					t.Fatalf("count %q: %v", b, err)
				}
				return n
			}
			if a, b := post("one"), post("one"); a != 200 || b != 409 {
				t.Errorf("two attempts in turn: %d then %d, want 200 then 409", a, b)
			}
			if n := count("one"); n != 1 {
				t.Errorf("count %d, want 1", n)
			}
			var mu sync.Mutex
			oks := 0
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if post("many") == 200 {
						mu.Lock()
						oks++
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if n := count("many"); n != oks || n < 1 {
				t.Errorf("8 attempts at once: %d answered 200, the store counted %d writes", oks, n)
			}
			if err := st.cleanup(ctx); err != nil {
				t.Fatal(err)
			}
			left := leftovers(t, kind, prefix)
			if left != 0 {
				t.Errorf("cleanup left %d things under %s", left, prefix)
			}
		})
	}
}

func leftovers(t *testing.T, kind, prefix string) int {
	ctx := context.Background()
	if kind == "redis" {
		s, err := newRedis(ctx, testenv.URL("redis"), prefix)
		if err != nil {
			t.Fatal(err)
		}
		defer s.c.Close()
		keys, err := s.c.Keys(ctx, prefix+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return len(keys)
	}
	s, err := newPGAdmin(ctx, testenv.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var n int
	if err := s.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE left(tablename, $1) = $2", len(prefix), prefix).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
