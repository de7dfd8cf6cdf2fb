package memstore

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestLeaseLivenessJudgesOnlyWhatItCouldTry: a store that takes longer
// than the TTL to answer cannot show whether the lease held before it; the
// check says so (inconclusive), instead of failing a correct lease. A
// store that answers in time is judged, and a correct lease passes.
func TestLeaseLivenessJudgesOnlyWhatItCouldTry(t *testing.T) {
	ttl := 20 * time.Millisecond
	slow := leaseLiveness(context.Background(), NewStore(3*ttl), "slow", ttl)
	if !slow.Inconclusive || slow.OK || !strings.Contains(slow.Detail, "could not test") {
		t.Fatalf("a store slower than the TTL: want an inconclusive check, got %+v", slow)
	}
	fast := leaseLiveness(context.Background(), NewStore(0), "fast", time.Second)
	if fast.Inconclusive || !fast.OK {
		t.Fatalf("an answering store with a correct lease: want ok, got %+v", fast)
	}
}
