package redisstore

import (
	"testing"
	"time"
)

func TestLeaseMillis(t *testing.T) {
	for ttl, want := range map[time.Duration]int64{
		50 * time.Millisecond:   50,
		1500 * time.Microsecond: 2, // rounded up, never down
		time.Microsecond:        1,
		2 * time.Second:         2000,
	} {
		if got := leaseMillis(ttl); got != want {
			t.Errorf("leaseMillis(%s) = %d, want %d", ttl, got, want)
		}
	}
}

// TestMostAtOnce: grants that follow an expiry are one holder at a time,
// however many; a grant inside another's lifetime is two.
func TestMostAtOnce(t *testing.T) {
	g := func(from, ttl int64) grant { return grant{from: from, expires: from + ttl} }
	for _, c := range []struct {
		name string
		gs   []grant
		want int
	}{
		{"none", nil, 0},
		{"one", []grant{g(1000, 50)}, 1},
		{"in turn: the next starts the millisecond after the expiry", []grant{g(1000, 50), g(1051, 50), g(1102, 50)}, 1},
		{"at the expiry millisecond Redis still holds the key", []grant{g(1000, 50), g(1050, 50)}, 2},
		{"two at once", []grant{g(1000, 50), g(1020, 50)}, 2},
		{"three at once, out of order", []grant{g(1030, 50), g(1000, 50), g(1010, 50), g(2000, 50)}, 3},
	} {
		if got := mostAtOnce(c.gs); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

func TestParseGrants(t *testing.T) {
	gs, err := parseGrants([]string{"1700000000050:50:r0-w1"})
	if err != nil || len(gs) != 1 || gs[0].from != 1700000000000 || gs[0].owner != "r0-w1" {
		t.Errorf("got %+v, %v", gs, err)
	}
	for _, bad := range []string{"", "12:50", "x:50:w", "12:y:w"} {
		if _, err := parseGrants([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestCLIArgs(t *testing.T) {
	for raw, want := range map[string]string{
		"redis://127.0.0.1:6379/0":         "-h 127.0.0.1 -p 6379",
		"rediss://u:pw@[::1]:6380/3":       "-h ::1 -p 6380 -n 3 --tls",
		"unix://u:pw@/run/redis.sock?db=2": "-s /run/redis.sock -n 2",
	} {
		if got := (&conn{raw: raw}).cliArgs(); got != want {
			t.Errorf("cliArgs(%s) = %q, want %q", raw, got, want)
		}
	}
}
