package scenarios

import (
	"sync"
	"sync/atomic"
	"testing"
)

func TestReplicaMemoryClaimsOnce(t *testing.T) {
	var m ReplicaMemory
	var first atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			if m.Claim("token") {
				first.Add(1)
			}
		})
	}
	wg.Wait()
	if got := first.Load(); got != 1 {
		t.Errorf("%d claims of one key succeeded in one replica, want 1", got)
	}
	if !m.Claim("other") {
		t.Error("a fresh key was refused")
	}
	var restarted ReplicaMemory // a deploy: a new replica, empty memory
	if !restarted.Claim("token") {
		t.Error("a restarted replica remembered a claim")
	}
}
