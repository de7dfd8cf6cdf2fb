package memstore

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A probe meant to run before the TTL that ran after it (a loaded machine
// overslept) proves nothing: the check is tried again, then inconclusive,
// never a failure.
func TestLivenessProbeThatRanLateIsNotAFailure(t *testing.T) {
	ttl := 200 * time.Millisecond // the on-time round has 80ms to spare on a loaded machine
	tgt := &target{name: "ttl-lease", store: NewStore(0)}
	tgt.p.TTL = ttl
	defer func() { probeWait = sleep }()

	probeWait = func(ctx context.Context, d time.Duration) error { return sleep(ctx, 2*ttl) }
	cs := tgt.Checks(context.Background())
	if len(cs) != 1 || cs[0].OK || !cs[0].Inconclusive || !strings.Contains(cs[0].Detail, "too loaded") {
		t.Errorf("late probes: %+v, want one inconclusive check", cs)
	}

	rounds := 0
	probeWait = func(ctx context.Context, d time.Duration) error {
		rounds++
		if rounds == 1 {
			return sleep(ctx, 2*ttl)
		}
		return sleep(ctx, d)
	}
	cs = tgt.Checks(context.Background())
	if len(cs) != 1 || !cs[0].OK || cs[0].Inconclusive || rounds != 2 {
		t.Errorf("one late round, then on time: %+v after %d rounds, want ok after 2", cs, rounds)
	}
}
