package scenarios

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestMostHolders(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for _, c := range []struct {
		gs   []Grant
		want int
	}{
		{nil, 0},
		{[]Grant{{at(0), at(50)}}, 1},
		{[]Grant{{at(0), at(50)}, {at(50), at(100)}}, 1}, // the next holder after expiry
		{[]Grant{{at(0), at(50)}, {at(10), at(60)}}, 2},  // two holders at once
		{[]Grant{{at(0), at(50)}, {at(10), at(60)}, {at(20), at(30)}, {at(70), at(80)}}, 3},
	} {
		if got := MostHolders(c.gs); got != c.want {
			t.Errorf("MostHolders(%v) = %d, want %d", c.gs, got, c.want)
		}
	}
}

// AwaitExpiry passes a grant at or after the TTL, fails one before it, one
// that never comes, and a try that errs, saying which.
func TestAwaitExpiry(t *testing.T) {
	ctx := context.Background()
	const ttl = 40 * time.Millisecond
	grantAfter := func(d time.Duration) func() (bool, error) {
		start := time.Now()
		return func() (bool, error) { return time.Since(start) >= d, nil }
	}
	if c := AwaitExpiry(ctx, time.Now(), ttl/2, ttl, ", server clock", grantAfter(ttl)); !c.OK || c.Name != "lease liveness" ||
		!strings.Contains(c.Detail, "refused at 20ms") || !strings.Contains(c.Detail, "(TTL 40ms, server clock)") {
		t.Errorf("granted after the TTL: %+v", c)
	}
	if c := AwaitExpiry(ctx, time.Now(), ttl/2, ttl, "", grantAfter(0)); c.OK || !strings.Contains(c.Detail, "granted to the next after") {
		t.Errorf("granted before the TTL: %+v", c)
	}
	if c := AwaitExpiry(ctx, time.Now().Add(-2*time.Second), ttl/2, ttl, "", grantAfter(time.Hour)); c.OK || !strings.Contains(c.Detail, "still held") {
		t.Errorf("never granted: %+v", c)
	}
	if c := AwaitExpiry(ctx, time.Now(), ttl/2, ttl, "", func() (bool, error) { return false, errors.New("gone") }); c.OK || c.Detail != "gone" {
		t.Errorf("a try that errs: %+v", c)
	}
}
